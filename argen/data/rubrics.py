"""Per-scenario rubrics: criteria written for each prompt, with points (as in HealthBench).

`data/rubrics/*.jsonl` holds one line per scenario of `data/scenarios` and `data/holdout`:
``{"id": ..., "criteria": [{"text", "points", "tag"}, ...]}``, written by `data/GUIDE.md`
(section 2). Positive points reward what a good answer must do, negative points what it must
not; each criterion's tag names the proposition it checks (`argen.judging.propositions`) or
``content``. `rubric_score` is the one scoring rule, for training rewards and evaluation alike.

`python -m argen.data.rubrics` checks every rubric and its coverage of the scenarios and
rewrites the statistics block of `data/rubrics/CARD.md`; `--check` fails when the card is stale.
"""

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from argen.data.cards import check_flag, json_lines, update_block
from argen.errors import ArgenError
from argen.judging.propositions import CRITERION_TAGS

log = logging.getLogger(__name__)

RUBRICS = Path("data/rubrics")
CARD = RUBRICS / "CARD.md"
START = "<!-- rubrics:start (python -m argen.data.rubrics writes this block) -->"
END = "<!-- rubrics:end -->"
MIN_CRITERIA, MAX_CRITERIA = 3, 7
MAX_POINTS = 10


@dataclass(frozen=True)
class Criterion:
    """One checkable statement about a response to one prompt, with its points."""

    text: str
    points: int
    tag: str


def read_rubrics(folder: Path = RUBRICS) -> dict[str, list[Criterion]]:
    """Every rubric under `folder` by scenario id, checked; a bad line names file and line."""
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise ArgenError(f"no rubric files (*.jsonl) in {folder}")
    rubrics: dict[str, list[Criterion]] = {}
    where_of: dict[str, str] = {}
    for where, value in json_lines(files):
        scenario, criteria = parse_rubric(value, where)
        if scenario in rubrics:
            raise ArgenError(f"{where}: rubric for {scenario!r} repeats {where_of[scenario]}")
        rubrics[scenario], where_of[scenario] = criteria, where
    return rubrics


def parse_rubric(row: object, where: str) -> tuple[str, list[Criterion]]:
    """One rubric (a parsed line): its scenario id and criteria, checked against the guide."""
    if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"]:
        raise ArgenError(f"{where}: a rubric is an object with a scenario 'id'")
    raw = row.get("criteria")
    if not isinstance(raw, list) or not MIN_CRITERIA <= len(raw) <= MAX_CRITERIA:
        raise ArgenError(
            f"{where}: {row['id']} needs {MIN_CRITERIA} to {MAX_CRITERIA} criteria in 'criteria'"
        )
    criteria = [_criterion(item, f"{where} criterion {i}") for i, item in enumerate(raw, 1)]
    if not any(c.points > 0 for c in criteria) or not any(c.points < 0 for c in criteria):
        raise ArgenError(f"{where}: {row['id']} needs a positive and a negative criterion")
    return row["id"], criteria


def _criterion(item, where: str) -> Criterion:
    if not isinstance(item, dict):
        raise ArgenError(f"{where}: a criterion is an object with text, points and tag")
    text, points, tag = item.get("text"), item.get("points"), item.get("tag")
    if not isinstance(text, str) or len(text.split()) < 2:
        raise ArgenError(f"{where}: 'text' must say what the response does, in words")
    if type(points) is not int or points == 0 or abs(points) > MAX_POINTS:
        raise ArgenError(f"{where}: 'points' must be a whole number in -10..-1 or 1..10")
    if tag not in CRITERION_TAGS:
        allowed = ", ".join(CRITERION_TAGS)
        raise ArgenError(f"{where}: tag {str(tag)[:40]!r} is not one of {allowed}")
    return Criterion(text.strip(), points, tag)


def rubric_score(points: Sequence[int], met: Sequence[bool]) -> float:
    """HealthBench's rule: the points of the criteria met (negative ones subtract) over the
    points available (the positive ones), clipped to [0, 1]."""
    if len(points) != len(met):
        raise ValueError("one verdict per criterion")
    available = sum(p for p in points if p > 0)
    earned = sum(p for p, ok in zip(points, met, strict=True) if ok)
    return min(1.0, max(0.0, earned / available))


def check_coverage(rubrics: dict[str, list[Criterion]], scenario_ids: Sequence[str]) -> None:
    """Every scenario has its rubric and every rubric its scenario."""
    missing = sorted(set(scenario_ids) - set(rubrics))
    extra = sorted(set(rubrics) - set(scenario_ids))
    if missing or extra:
        raise ArgenError(
            f"rubrics do not match the scenarios: {len(missing)} scenario(s) without a rubric "
            f"({', '.join(missing[:5])}), {len(extra)} rubric(s) for no scenario "
            f"({', '.join(extra[:5])})"
        )


def statistics(rubrics: dict[str, list[Criterion]], scenarios: pd.DataFrame) -> str:
    """The card's numbers: rubrics and criteria by category, points and tags."""
    rows = [
        {"category": category, "id": sid, "points": c.points, "tag": c.tag}
        for sid, category in zip(scenarios["id"], scenarios["category"], strict=True)
        for c in rubrics[sid]
    ]
    frame = pd.DataFrame(rows)
    by_category = frame.groupby("category").agg(
        rubrics=("id", "nunique"),
        criteria=("id", "size"),
        positive=("points", lambda p: int((p > 0).sum())),
        negative=("points", lambda p: int((p < 0).sum())),
    )
    by_category.loc["total"] = by_category.sum()
    tags = frame["tag"].value_counts().rename_axis("tag").rename("criteria").to_frame()
    return "\n".join(
        [
            START,
            f"{frame['id'].nunique()} rubrics, {len(frame)} criteria "
            f"({len(frame) / frame['id'].nunique():.1f} per rubric).",
            "",
            by_category.to_markdown(),
            "",
            tags.to_markdown(),
            END,
        ]
    )


def scenario_frame() -> pd.DataFrame:
    """Every scenario of the bundled sources and the holdout (id and category)."""
    from argen.data.datacard import HOLDOUT, SCENARIOS, load_rows

    rows = load_rows([SCENARIOS, HOLDOUT])
    return pd.DataFrame([{"id": r["id"], "category": r["category"]} for r in rows])


def main(argv: Sequence[str] | None = None) -> int:
    """Check every rubric and its coverage, and rewrite (--check: verify) the card's block."""
    check = check_flag(__doc__.splitlines()[0], argv)
    rubrics = read_rubrics()
    scenarios = scenario_frame()
    check_coverage(rubrics, scenarios["id"].tolist())
    return update_block(
        CARD, START, END, statistics(rubrics, scenarios), check, "argen.data.rubrics"
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
