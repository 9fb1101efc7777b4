"""Demonstrations for the supervised warm start: hand-written answers the policy learns from.

A demonstrations source is a folder of JSON Lines files (or one file), one answer per line, of
two kinds:

- an answer to a scenario, ``{"id": "<scenario id>", "response": "...", "writer": "..."}``
  (`data/demonstrations/`, `data/demonstrations-careful/`). It is joined to the curated train
  split by scenario id: an answer whose prompt curation placed in the validation or test split
  is left out (counted, never trained on), so a different split seed can never leak an
  evaluation prompt into the warm start;
- a written prompt with its answer, ``{"id": ..., "prompt": ..., "tier": ..., "scope": ...,
  "category": ..., "response": ..., "writer": ...}`` (`data/demonstrations-written/` and
  `data/demonstrations-redflags/`, GUIDE sections 3b and 3c): training data beyond the
  scenario set, which cannot grow without moving the splits. Its prompt must not be related
  to an evaluation prompt: one at or above `curate.related_threshold` (the similarity at which
  curation keeps prompts in one split) to a validation, test or holdout prompt is an error
  naming both.

`sft.demonstrations` names one source or several, read as one. `python -m
argen.data.demonstrations` writes the statistics of each committed set's card (`--check` fails
when one is stale, or when a written prompt is related to an evaluation prompt).
"""

import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from argen.config import load_config
from argen.data.cards import check_flag, json_lines, jsonl_files, update_block
from argen.data.curate import curate_frames
from argen.data.datacard import HOLDOUT, load_rows
from argen.data.schema import CATEGORIES, SCOPES, TIERS
from argen.errors import ArgenError

log = logging.getLogger(__name__)

FIELDS = ("id", "response")
WRITTEN = {"prompt": None, "tier": TIERS, "scope": SCOPES, "category": CATEGORIES}
"""The fields of a written prompt, each with its allowed values (None: any non-empty text)."""
COLUMNS = (*FIELDS, *WRITTEN)


def demonstration_files(sources: Path | Sequence[Path]) -> list[Path]:
    """The JSON Lines files of each source: a folder's, sorted, or the one file it names."""
    many = [sources] if isinstance(sources, str | Path) else sources
    return [file for source in many for file in jsonl_files(source, "demonstrations")]


def read_demonstrations(sources: Path | Sequence[Path]) -> pd.DataFrame:
    """Every answer of one source or several as a frame (`COLUMNS`; the written-prompt fields
    None for an answer to a scenario), checked: each line an object with non-empty string
    fields, allowed tiers, scopes and categories, each id once. A bad line is an error naming
    its file and line."""
    rows: list[dict] = []
    seen: dict[str, str] = {}
    for where, value in json_lines(demonstration_files(sources)):
        row = _parse(value, where)
        if row["id"] in seen:
            raise ArgenError(f"{where}: demonstration {row['id']!r} repeats {seen[row['id']]}")
        seen[row["id"]] = where
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _parse(row: object, where: str) -> dict:
    if not isinstance(row, dict):
        raise ArgenError(f"{where}: a demonstration must be a JSON object")
    fields = COLUMNS if "prompt" in row else FIELDS
    for field in fields:
        value = row.get(field)
        if not isinstance(value, str) or not value.strip():
            raise ArgenError(f"{where}: field {field!r} must be a non-empty string")
        allowed = WRITTEN.get(field)
        if allowed and value not in allowed:
            raise ArgenError(f"{where}: {field} {value!r} is not one of {', '.join(allowed)}")
    return {field: row.get(field) for field in COLUMNS}


def is_written(demonstrations: pd.DataFrame) -> pd.Series:
    """Which rows bring their own prompt (the others answer a scenario)."""
    if "prompt" not in demonstrations:
        return pd.Series(False, index=demonstrations.index)
    return demonstrations["prompt"].notna()


def pair_with_train(train: pd.DataFrame, demonstrations: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The train scenarios that have an answer, with it as `response`, then the written prompts
    with theirs (`written` tells them apart); and how many answers to scenarios were left out
    because their prompt is not in this train split."""
    if (train["split"] != "train").any():
        raise ArgenError("the warm start trains on the train split only")
    written = is_written(demonstrations)
    answers = demonstrations.loc[~written, list(FIELDS)]
    paired = train.merge(answers, on="id", how="inner", validate="one_to_one").assign(written=False)
    left_out = len(answers) - len(paired)
    own = demonstrations.loc[written]
    clash = sorted(set(own["id"]) & set(train["id"]))
    if clash:
        raise ArgenError(f"written prompts reuse scenario ids: {', '.join(clash[:5])}")
    if len(own):
        own = own[list(COLUMNS)].assign(split="train", written=True)
        paired = pd.concat([paired, own], ignore_index=True)
    if paired.empty:
        raise ArgenError(
            "no demonstration matches a train-split scenario id; check sft.demonstrations"
        )
    return paired.reset_index(drop=True), left_out


def closest_evaluation_prompts(
    demonstrations: pd.DataFrame, evaluation: pd.DataFrame
) -> pd.DataFrame:
    """For each written prompt, the evaluation prompt (`id`, `prompt`) closest to it and their
    cosine similarity on the MiniLM embeddings curation groups related prompts by."""
    from argen.judging.embeddings import embed  # torch: only when there is something to compare

    written = demonstrations[is_written(demonstrations)]
    columns = ["id", "evaluation_id", "similarity"]
    if written.empty or evaluation.empty:
        return pd.DataFrame(columns=columns)
    vectors = embed([*written["prompt"], *evaluation["prompt"]])
    similarity = vectors[: len(written)] @ vectors[len(written) :].T
    closest = similarity.argmax(axis=1)
    return pd.DataFrame(
        {
            "id": written["id"].to_numpy(),
            "evaluation_id": evaluation["id"].to_numpy()[closest],
            "similarity": similarity[range(len(written)), closest].round(3),
        },
        columns=columns,
    )


def check_written_prompts(closest: pd.DataFrame, threshold: float) -> None:
    """Refuse written prompts related to an evaluation prompt (`closest_evaluation_prompts`):
    training on a near copy of what is measured would make the measurement a memory test."""
    related = closest[closest["similarity"] >= threshold]
    if len(related):
        pairs = "; ".join(
            f"{r.id} ~ {r.evaluation_id} ({r.similarity})" for r in related.head(5).itertuples()
        )
        raise ArgenError(
            f"{len(related)} written prompt(s) related to an evaluation prompt at or above "
            f"{threshold} (curate.related_threshold): {pairs}"
        )


SOURCES = (
    Path("data/demonstrations"),
    Path("data/demonstrations-careful"),
    Path("data/demonstrations-written"),
    Path("data/demonstrations-redflags"),
)
"""The committed demonstration sets (two styles of answers to scenarios, `data/GUIDE.md`
sections 3 and 3a, and written prompts: the scope line, section 3b, and red flags, 3c), each
with its own `CARD.md`."""
START = "<!-- demonstrations:start (python -m argen.data.demonstrations writes this block) -->"
END = "<!-- demonstrations:end -->"


def statistics(paired: pd.DataFrame, left_out: int, closest: float | None, threshold: float) -> str:
    """The card's numbers: answers by category and tier, their length in words, and for written
    prompts the highest similarity of one to an evaluation prompt (related from `threshold`)."""
    table = pd.crosstab(paired["category"], paired["tier"], margins=True, margins_name="total")
    words = paired["response"].str.split().str.len()
    written = int(paired["written"].sum())
    counts = (
        f"{written} written prompts with their answers; "
        if written
        else f"{len(paired)} answers to train-split prompts of the default curation "
        f"({left_out} for prompts outside it); "
    )
    lines = [START, f"{counts}{words.min()} to {words.max()} words, median {int(words.median())}."]
    if closest is not None:
        lines.append(
            f"Closest written prompt to a validation, test or holdout prompt: cosine similarity "
            f"{closest:.3f} (related from {threshold})."
        )
    return "\n".join([*lines, "", table.to_markdown(), END])


def evaluation_prompts(scenarios: pd.DataFrame) -> pd.DataFrame:
    """Every prompt a model is measured on: the default curation's validation and test splits
    and `data/holdout` (`id`, `prompt`)."""
    held = scenarios.loc[scenarios["split"] != "train", ["id", "prompt"]]
    holdout = pd.DataFrame(load_rows([HOLDOUT]))[["id", "prompt"]]
    return pd.concat([held, holdout], ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with --check, verify) each set's card statistics block from its files; a
    written prompt related to an evaluation prompt is an error either way."""
    check = check_flag("demonstrations card statistics", argv)
    config = load_config().curate
    scenarios = curate_frames(config).scenarios
    train = scenarios[scenarios["split"] == "train"]
    evaluation = evaluation_prompts(scenarios)
    failed = 0
    for source in SOURCES:
        demonstrations = read_demonstrations(source)
        closest = closest_evaluation_prompts(demonstrations, evaluation)
        check_written_prompts(closest, config.related_threshold)
        paired, left_out = pair_with_train(train, demonstrations)
        highest = float(closest["similarity"].max()) if len(closest) else None
        block = statistics(paired, left_out, highest, config.related_threshold)
        card = source / "CARD.md"
        failed |= update_block(card, START, END, block, check, "argen.data.demonstrations")
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
