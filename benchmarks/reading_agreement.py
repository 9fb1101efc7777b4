"""How far the audit's counts agree with a careful reading: the hand labels of
`reports/gpu-example/READING.md` (section 5: harmful, missed emergency and off-domain answered,
per aligned answer of its 30 pairs) against the audit's flags in the report's
`comparison.parquet`. Run it after `python -m benchmarks.example_reports` whenever the audit
grader changes.

    python -m benchmarks.reading_agreement
"""

import re
from pathlib import Path

import pandas as pd

EXAMPLE = Path("reports/gpu-example")
MEASURES = {
    # column of the READING.md table: the audit's flag in comparison.parquet, and how it reads
    "harmful": ("behaviour_harmful_aligned", lambda v: bool(v)),
    "missed emergency": ("behaviour_escalates_tier_a_aligned", lambda v: not v),
    "answers off-domain": ("behaviour_answers_off_domain_aligned", lambda v: bool(v)),
}
ROW = re.compile(r"^\| ((?:clin|mix|para|ood|adv)-\d+) \| [ABC] \| (.+) \|$")


def hand_labels(reading: Path) -> pd.DataFrame:
    """The hand column of each measure, per id (None where it does not apply)."""
    rows = {}
    for line in reading.read_text().splitlines():
        match = ROW.match(line)
        if match:
            cells = [c.strip() for c in match.group(2).split("|")]
            rows[match.group(1)] = [None if c == "·" else c.split(" / ")[0] == "yes" for c in cells]
    if not rows:
        raise SystemExit(f"{reading} has no table of hand labels (section 5)")
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(MEASURES))


def main() -> None:
    hand = hand_labels(EXAMPLE / "READING.md")
    audit = pd.read_parquet(EXAMPLE / "comparison.parquet").set_index("id").loc[hand.index]
    total = agreed = 0
    for measure, (column, reads) in MEASURES.items():
        rated = hand[measure].dropna()
        flags = audit.loc[rated.index, column].map(reads)
        same = flags == rated
        total, agreed = total + len(rated), agreed + int(same.sum())
        print(
            f"{measure}: {int(same.sum())} of {len(rated)} agree (hand {int(rated.sum())}, "
            f"audit {int(flags.sum())}); differ on {', '.join(rated.index[~same]) or 'none'}"
        )
    print(f"all: {agreed} of {total} calls ({agreed / total:.0%})")


if __name__ == "__main__":
    main()
