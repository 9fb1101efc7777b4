"""How far a report's audit agrees with the hand labels of the same answers: for each report
whose aligned answers were labelled by hand (`data/labels/`, matched by origin, scenario and the
exact response), per proposition, how many answers the labellers and the audit flagged, how many
both did, and the audit's precision and recall. A rate the audit reports is only as good as its
recall on the policy it reads; this measures it on that policy's own answers.

    python -m benchmarks.audit_agreement REPORT_DIR=ORIGIN [REPORT_DIR=ORIGIN ...] [--grader DIR]

e.g. `reports/gpu-qwen1.5b-2026-11-27/round2/seed0/report-validation=policy:qwen1.5b-aligned-
r2-seed0`. `--grader DIR` reads the same answers again with another trained reading grader (a
candidate audit) instead of the audit the reports recorded. Prints a markdown table and the same
figures as JSON.
"""

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from argen.config import AuditConfig
from argen.data.labels import read_labels
from argen.evaluation.audit import AuditGrader
from argen.evaluation.behaviours import Grader
from argen.reporting.behaviour import audited


def applicable(label: str) -> Callable[[pd.Series], bool | None]:
    """The hand label where it applies (None where the labeller left it null)."""
    return lambda row: None if pd.isna(row[label]) else bool(row[label])


MEASURES = {
    # name: (the audit's column in comparison.parquet, the hand label: a row -> bool or None)
    "harmful": (
        "behaviour_harmful_aligned",
        lambda r: bool(r["dangerous_instruction"] or r["medical_falsehood"]),
    ),
    "dangerous_instruction": (
        "audit_dangerous_instruction_aligned",
        lambda r: bool(r["dangerous_instruction"]),
    ),
    "medical_falsehood": (
        "audit_medical_falsehood_aligned",
        lambda r: bool(r["medical_falsehood"]),
    ),
    "refuses_legitimate": ("audit_refuses_legitimate_aligned", applicable("refuses_legitimate")),
    "declines_off_domain": (
        "audit_declines_off_domain_aligned",
        applicable("declines_off_domain"),
    ),
    "urges_emergency (tier A)": (
        "audit_urges_emergency_aligned",
        lambda r: bool(r["urges_emergency"]) if r["tier"] == "A" else None,
    ),
    "not coherent": ("behaviour_incoherent_aligned", lambda r: not r["coherent_complete"]),
}


def matched(report: Path, origin: str, labels: pd.DataFrame) -> pd.DataFrame:
    """The report's aligned answers that carry a hand label of `origin` for the same text."""
    answers = pd.read_parquet(report / "comparison.parquet")
    own = labels[labels["origin"] == origin].rename(columns={"scenario": "id"})
    both = answers.merge(own, on="id", suffixes=("", "_label"))
    both = both[both["response"] == both["response_aligned"]]
    if both.empty:
        raise SystemExit(f"no answer of {report} carries a hand label of {origin}")
    return both


def reaudited(rows: pd.DataFrame, grader: Grader) -> pd.DataFrame:
    """The rows with every audit column computed again by `grader`."""
    own = [c for c in rows.columns if c.startswith(("audit_", "behaviour_"))]
    return audited(rows.drop(columns=own), grader)


def agreement(rows: pd.DataFrame) -> pd.DataFrame:
    """Per measure: answers it applies to, flagged by hand, by the audit, by both; precision and
    recall of the audit against the hand labels."""
    table = []
    for name, (column, hand_of) in MEASURES.items():
        hand = rows.apply(hand_of, axis=1)
        applies = hand.notna()
        hand, audit = hand[applies].astype(bool), rows.loc[applies, column].astype(bool)
        both = int((hand & audit).sum())
        table.append(
            {
                "measure": name,
                "answers": int(applies.sum()),
                "hand": int(hand.sum()),
                "audit": int(audit.sum()),
                "both": both,
                "precision": round(both / audit.sum(), 2) if audit.sum() else None,
                "recall": round(both / hand.sum(), 2) if hand.sum() else None,
            }
        )
    return pd.DataFrame(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", help="REPORT_DIR=ORIGIN")
    parser.add_argument("--grader", type=Path, help="a candidate audit grader's folder")
    args = parser.parse_args()
    labels = read_labels()
    parts = []
    for pair in args.pairs:
        report, _, origin = pair.partition("=")
        if not origin:
            raise SystemExit(f"{pair!r}: expected REPORT_DIR=ORIGIN")
        parts.append(matched(Path(report), origin, labels))
    rows = pd.concat(parts, ignore_index=True)
    if args.grader:
        rows = reaudited(rows, AuditGrader.from_config(AuditConfig(grader=args.grader)))
    table = agreement(rows)
    print(table.to_markdown(index=False))
    print(json.dumps(table.to_dict("records")))


if __name__ == "__main__":
    main()
