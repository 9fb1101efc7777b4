"""Labelled responses: what the reading grader learns from and is measured on.

`data/labels/*.jsonl` holds (prompt, response) items, each labelled by reading it against
`data/GUIDE.md` (section 4) on every proposition of `argen.judging.propositions` (true, false,
or None where the proposition does not apply), with a quality (bad < acceptable < good) and,
where the prompt has a rubric, a verdict per rubric criterion. Items of train-split prompts
train the grader; items of validation-split prompts measure it, held out by prompt.
`python -m argen.data.labels` writes the statistics of `data/labels/CARD.md` (`--check`: fail
when stale). Sampled answers waiting for labels live under `data/labels/samples/` and are not
read here.
"""

import logging
from pathlib import Path

import pandas as pd
from sklearn.metrics import cohen_kappa_score

from argen.data.cards import check_flag, json_lines, jsonl_files, update_block
from argen.errors import ArgenError
from argen.hashing import json_sha256
from argen.judging.propositions import OFF_DOMAIN, PROPOSITIONS, QUALITIES

log = logging.getLogger(__name__)

LABELS = Path("data/labels")
CARD = LABELS / "CARD.md"
START = "<!-- labels:start (python -m argen.data.labels writes this block) -->"
END = "<!-- labels:end -->"
SPLITS = ("train", "validation")
TEXT_FIELDS = ("item", "scenario", "prompt", "response", "origin", "labeller")
NEVER_NULL = tuple(
    p for p in PROPOSITIONS if p not in (*OFF_DOMAIN, "answers_medical", "refuses_legitimate")
)


def read_labels(folder: Path = LABELS) -> pd.DataFrame:
    """Every labelled item under `folder`, or in one file (one row each; a column per
    proposition), checked."""
    rows: list[dict] = []
    seen: dict[str, str] = {}
    for where, value in json_lines(jsonl_files(folder, "labels")):
        row = parse_item(value, where)
        if row["item"] in seen:
            raise ArgenError(f"{where}: item {row['item']!r} repeats {seen[row['item']]}")
        seen[row["item"]] = where
        rows.append(row)
    return pd.DataFrame(rows)


def items_sha256(frame: pd.DataFrame) -> str:
    """The identity of a set of labelled items (their sorted ids): what a trained grader records
    it learned from, and what a preference stage records it was tuned against, so that a report
    can tell when its audit learned from the labels training optimised."""
    return json_sha256(frame["item"].sort_values().tolist())


def parse_item(item: object, where: str) -> dict:
    """One labelled item (a parsed line) as a flat row, checked against the guide's rules."""
    if not isinstance(item, dict):
        raise ArgenError(f"{where}: an item is a JSON object")
    for field in TEXT_FIELDS:
        if not isinstance(item.get(field), str) or not item[field].strip():
            raise ArgenError(f"{where}: field {field!r} must be a non-empty string")
    if item.get("split") not in SPLITS:
        raise ArgenError(f"{where}: 'split' must be one of {', '.join(SPLITS)}")
    if item.get("quality") not in QUALITIES:
        raise ArgenError(f"{where}: 'quality' must be one of {', '.join(QUALITIES)}")
    labels = item.get("labels")
    if not isinstance(labels, dict) or set(labels) != set(PROPOSITIONS):
        raise ArgenError(
            f"{where}: 'labels' must give exactly the {len(PROPOSITIONS)} propositions"
        )
    check_labels(labels, bool(item.get("has_off_domain")), where)
    met = item.get("criteria_met")
    if met is not None and not (isinstance(met, list) and all(type(v) is bool for v in met)):
        raise ArgenError(f"{where}: 'criteria_met' must be a list of true/false or null")
    return {
        **{f: item[f] for f in (*TEXT_FIELDS, "split", "quality")},
        **{f: item.get(f) for f in ("tier", "scope", "category")},
        "has_off_domain": bool(item.get("has_off_domain")),
        **labels,
        "criteria_met": met,
    }


def check_labels(labels: dict, has_off_domain: bool, where: str) -> None:
    """Values are true/false/null, null only where the guide allows, and consistent."""
    for name, value in labels.items():
        if value is not None and type(value) is not bool:
            raise ArgenError(f"{where}: label {name!r} must be true, false or null")
        if value is None and name in NEVER_NULL:
            raise ArgenError(f"{where}: label {name!r} always applies (null is not allowed)")
    for name in OFF_DOMAIN:
        if has_off_domain != (labels[name] is not None):
            state = "applies only when" if not has_off_domain else "must be given when"
            raise ArgenError(f"{where}: {name!r} {state} the prompt has an off-domain part")
    if labels["needless_escalation"] and not labels["urges_emergency"]:
        raise ArgenError(f"{where}: needless_escalation without urges_emergency")
    if (
        has_off_domain
        and labels["ignores_off_domain"]
        and (labels["answers_off_domain"] or labels["declines_off_domain"])
    ):
        raise ArgenError(f"{where}: ignores_off_domain with answers or declines_off_domain")


BLIND = LABELS / "blind" / "relabels.jsonl"
"""A sample relabelled by a second labeller who saw only the prompt and the response."""


def agreement(frame: pd.DataFrame, relabels: pd.DataFrame) -> pd.DataFrame:
    """Cohen's kappa and raw agreement per proposition and on quality, over the items both
    labellers judged (a proposition only where both found it applicable)."""
    both = frame.merge(relabels, on="item", suffixes=("", "_blind"))
    rows = []
    for name in (*PROPOSITIONS, "quality"):
        pair = both[[name, f"{name}_blind"]].dropna()
        first, second = pair[name].astype(str), pair[f"{name}_blind"].astype(str)
        same = float((first == second).mean()) if len(pair) else float("nan")
        kappa = (
            float(cohen_kappa_score(first, second))
            if first.nunique() + second.nunique() > 2
            else float("nan")
        )
        rows.append({"label": name, "items": len(pair), "agreement": same, "kappa": kappa})
    return pd.DataFrame(rows).set_index("label")


def statistics(frame: pd.DataFrame) -> str:
    """The card's numbers: items by origin kind and split, quality, and label prevalence."""
    kind = frame["origin"].str.split(":").str[0]
    by_origin = pd.crosstab(frame["origin"], frame["split"], margins=True, margins_name="total")
    quality = pd.crosstab(kind, frame["quality"]).reindex(columns=list(QUALITIES), fill_value=0)
    prevalence = pd.DataFrame(
        {
            "applies": [int(frame[p].notna().sum()) for p in PROPOSITIONS],
            "true": [int((frame[p] == True).sum()) for p in PROPOSITIONS],  # noqa: E712
        },
        index=pd.Index(list(PROPOSITIONS), name="proposition"),
    )
    policy_share = (kind == "policy").mean()
    relabels = read_labels(BLIND.parent)
    agreed = agreement(frame, relabels)
    return "\n".join(
        [
            START,
            f"{len(frame)} items ({policy_share:.0%} sampled from this project's policies), "
            f"{frame['prompt'].nunique()} prompts.",
            "",
            by_origin.to_markdown(),
            "",
            quality.to_markdown(),
            "",
            prevalence.to_markdown(),
            "",
            f"Blind relabelling of {len(relabels)} items (`{BLIND}`): agreement with the first "
            "labels.",
            "",
            agreed.round(2).to_markdown(),
            END,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with --check, verify) the card's statistics block from the files."""
    check = check_flag("labelled responses: check and card statistics", argv)
    return update_block(CARD, START, END, statistics(read_labels()), check, "argen.data.labels")


if __name__ == "__main__":
    raise SystemExit(main())
