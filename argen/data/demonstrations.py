"""Demonstrations for the supervised warm start: hand-written answers to train-split prompts.

A demonstrations source is a folder of JSON Lines files (or one file), one answer per line:
``{"id": "<scenario id>", "response": "...", "writer": "..."}`` (`data/demonstrations/`, written
by `data/GUIDE.md`; `python -m argen.data.demonstrations` writes the statistics of their card,
`--check` fails when it is stale). They are joined to the curated train split by scenario id: an
answer whose prompt curation placed in the validation or test split is left out (counted, never
trained on), so a different split seed can never leak an evaluation prompt into the warm start.
"""

import logging
from pathlib import Path

import pandas as pd

from argen.config import load_config
from argen.data.cards import check_flag, json_lines, update_block
from argen.data.curate import curate_frames
from argen.errors import ArgenError

log = logging.getLogger(__name__)

FIELDS = ("id", "response")


def demonstration_files(source: Path) -> list[Path]:
    """The JSON Lines files of a source folder (sorted), or the one file it names."""
    source = Path(source)
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise ArgenError(f"demonstrations {source} not found (a .jsonl file or a folder of them)")
    files = sorted(source.glob("*.jsonl"))
    if not files:
        raise ArgenError(f"demonstrations folder {source} holds no .jsonl file")
    return files


def read_demonstrations(source: Path) -> pd.DataFrame:
    """Every answer of a source as a frame (`id`, `response`), checked: each line an object with
    non-empty string fields, each id once. A bad line is an error naming its file and line."""
    rows: list[dict] = []
    seen: dict[str, str] = {}
    for where, value in json_lines(demonstration_files(source)):
        row = _parse(value, where)
        if row["id"] in seen:
            raise ArgenError(f"{where}: demonstration {row['id']!r} repeats {seen[row['id']]}")
        seen[row["id"]] = where
        rows.append(row)
    return pd.DataFrame(rows, columns=list(FIELDS))


def _parse(row: object, where: str) -> dict:
    if not isinstance(row, dict):
        raise ArgenError(f"{where}: a demonstration must be a JSON object")
    for field in FIELDS:
        value = row.get(field)
        if not isinstance(value, str) or not value.strip():
            raise ArgenError(f"{where}: field {field!r} must be a non-empty string")
    return {field: row[field] for field in FIELDS}


def pair_with_train(train: pd.DataFrame, demonstrations: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The train scenarios that have an answer, with it as `response`, and how many answers
    were left out because their prompt is not in this train split."""
    if (train["split"] != "train").any():
        raise ArgenError("the warm start trains on the train split only")
    paired = train.merge(demonstrations, on="id", how="inner", validate="one_to_one")
    left_out = len(demonstrations) - len(paired)
    if paired.empty:
        raise ArgenError(
            "no demonstration matches a train-split scenario id; check sft.demonstrations"
        )
    return paired.reset_index(drop=True), left_out


SOURCES = (Path("data/demonstrations"), Path("data/demonstrations-careful"))
"""The committed demonstration sets (two styles, `data/GUIDE.md` sections 3 and 3a), each with
its own `CARD.md`."""
START = "<!-- demonstrations:start (python -m argen.data.demonstrations writes this block) -->"
END = "<!-- demonstrations:end -->"


def statistics(paired: pd.DataFrame, left_out: int) -> str:
    """The card's numbers: answers by category and tier, and their length in words."""
    table = pd.crosstab(paired["category"], paired["tier"], margins=True, margins_name="total")
    words = paired["response"].str.split().str.len()
    return "\n".join(
        [
            START,
            f"{len(paired)} answers to train-split prompts of the default curation "
            f"({left_out} for prompts outside it); {words.min()} to {words.max()} words, "
            f"median {int(words.median())}.",
            "",
            table.to_markdown(),
            END,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with --check, verify) each set's card statistics block from its files."""
    check = check_flag("demonstrations card statistics", argv)
    scenarios = curate_frames(load_config().curate).scenarios
    train = scenarios[scenarios["split"] == "train"]
    failed = 0
    for source in SOURCES:
        paired, left_out = pair_with_train(train, read_demonstrations(source))
        block = statistics(paired, left_out)
        card = source / "CARD.md"
        failed |= update_block(card, START, END, block, check, "argen.data.demonstrations")
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
