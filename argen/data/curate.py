"""Curation: scenario sources -> validated, deduplicated, stratified train/validation/test parquets.

Steps: read every source file (`argen.data.sources`), validate and normalize each row, drop exact
duplicates, then near-duplicates (cosine similarity of MiniLM embeddings, `argen.data.dedup`), group
remaining related prompts so that no group straddles splits, and split each tier x scope x
category stratum by the configured fractions with a seeded shuffle. Same inputs and seed, same
bytes. Sources are read and validated before the sentence encoder (torch) is imported, so bad
input fails in about a second.
"""

import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from argen.atomic import atomic_dir
from argen.config import CurateConfig
from argen.data.dedup import drop_exact_duplicates, near_duplicates
from argen.data.proposals import agreement_text, propose
from argen.data.schema import (
    CATEGORIES,
    GIVEN,
    LABEL_SOURCES,
    LABELS,
    PROPOSED,
    REVIEWED,
    SCENARIO_COLUMNS,
    SCOPES,
    SOURCE_FIELDS,
    SPLITS,
    TIERS,
)
from argen.data.sources import SourceRow, listing, read_sources, source_files, source_hashes
from argen.errors import ArgenError, machine_faults
from argen.hashing import file_sha256, json_sha256
from argen.outputs import CuratedSplits
from argen.version import code_version

log = logging.getLogger(__name__)


@dataclass
class Curated:
    """The result of curation before it is written."""

    scenarios: pd.DataFrame
    rejects: pd.DataFrame
    duplicates: pd.DataFrame
    inputs: dict[str, str] = field(default_factory=dict)
    review: pd.DataFrame = field(default_factory=pd.DataFrame)
    """The rows whose labels were proposed, least confident first (`REVIEW_COLUMNS`)."""


# ---------------------------------------------------------------- validation


def normalize_text(text: str) -> str:
    """Unicode NFC, whitespace runs collapsed to one space, trimmed."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


def validate_row(
    row: SourceRow, max_prompt_chars: int, columns: Mapping[str, str] | None = None
) -> tuple[dict | None, str | None]:
    """Return (normalized scenario, None) or (None, problem) for one source row. A row without
    labels gets `label_source` proposed and no labels (curation proposes them); its `id` is
    None when the source gives none (`validate` makes one)."""
    data = mapped_fields(row.data, columns or {})
    given = {name: data[name] for name in SOURCE_FIELDS if not _missing(data.get(name))}
    if "prompt" not in given:
        return None, "missing or empty 'prompt'"
    for name, value in given.items():
        if not _is_text(name, value):
            return None, f"{name!r} must be text, got {type(value).__name__} {_short(value)}"
        if isinstance(value, str) and not _encodable(value):
            return None, f"{name!r} is not valid Unicode (an unpaired surrogate escape)"
    prompt = normalize_text(given["prompt"])
    if len(prompt) > max_prompt_chars:
        return None, f"prompt has {len(prompt)} characters, over the limit of {max_prompt_chars}"
    labels, problem = _labels(given)
    if problem:
        return None, problem
    scenario = {
        "id": str(given["id"]).strip() if "id" in given else None,
        "prompt": prompt,
        **labels,
        "source": normalize_text(given["source"]) if "source" in given else row.file.stem,
    }
    return scenario, None


def mapped_fields(data: Mapping, columns: Mapping[str, str]) -> dict:
    """A source row's values under the scenario's field names: a field mapped to a column the
    row has is read from it, any other from the field's own name."""
    return {
        name: data[columns[name]] if columns.get(name) in data else data.get(name)
        for name in SOURCE_FIELDS
    }


def _labels(given: Mapping) -> tuple[dict, str | None]:
    """The normalized labels and label source of a row's given fields, or a problem."""
    present = [name for name in LABELS if name in given]
    source = str(given.get("label_source", "")).strip().lower() or None
    if source is not None and source not in LABEL_SOURCES:
        known = ", ".join(LABEL_SOURCES)
        return {}, f"unknown label_source {given['label_source']!r} (expected one of {known})"
    if not present:
        if source not in (None, PROPOSED):
            return {}, f"label_source {source!r} but no tier, scope or category"
        return {**dict.fromkeys(LABELS), "label_source": PROPOSED}, None
    if len(present) < len(LABELS):
        absent = ", ".join(name for name in LABELS if name not in present)
        return {}, (
            f"has {', '.join(present)} but no {absent}: give all three labels, or none to "
            "have them proposed"
        )
    labels = {
        "tier": str(given["tier"]).strip().upper(),
        "scope": str(given["scope"]).strip().upper(),
        "category": str(given["category"]).strip().lower(),
    }
    for name, allowed in (("tier", TIERS), ("scope", SCOPES), ("category", CATEGORIES)):
        if labels[name] not in allowed:
            return {}, f"unknown {name} {given[name]!r} (expected one of {', '.join(allowed)})"
    return {**labels, "label_source": source or GIVEN}, None


def _missing(value) -> bool:
    """None (an empty parquet or dataset cell) or blank text: the field is not given."""
    return value is None or (isinstance(value, str) and not value.strip())


def _is_text(name: str, value) -> bool:
    """Fields are strings; an id may also be an integer (a numeric id column)."""
    if name == "id" and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return True
    return isinstance(value, str)


def _encodable(text: str) -> bool:
    """False for text holding a lone surrogate (a JSON escape like \\ud800): not writable."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _short(value) -> str:
    """A value's repr for an error message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def made_id(row: SourceRow, prompt: str) -> str:
    """An id for a row without one: its source's name and a hash of its prompt (so it stays
    the same when rows are added or reordered, and a review file matches it)."""
    return f"{row.file.stem}-{hashlib.sha256(prompt.encode()).hexdigest()[:10]}"


def supersedes(review: dict, unlabelled: dict) -> bool:
    """Whether `review` is a fed-back review row for `unlabelled`: same prompt, labels that
    were proposed (and maybe corrected or marked reviewed), against a row with none."""
    return (
        unlabelled["tier"] is None
        and review["tier"] is not None
        and review["label_source"] in (PROPOSED, REVIEWED)
        and review["prompt"] == unlabelled["prompt"]
    )


def validate(rows: list[SourceRow], config: CurateConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Validate all rows; raise one error listing every problem unless drop_invalid is set.

    Two rows with one id are an error, except a review row fed back beside the unlabelled row
    it reviews (`supersedes`): the review is kept. Rows without an id get one (`made_id`); a
    repeated prompt's id is numbered, and the prompt is then dropped as an exact duplicate."""
    check_columns(rows, config.columns)
    kept: dict[str, tuple[dict, str]] = {}
    rejects = []
    for row in rows:
        scenario, problem = validate_row(row, config.max_prompt_chars, config.columns)
        if scenario is not None:
            problem = _place(scenario, f"{row.file} {row.where}", row, kept)
        if problem:
            rejects.append(
                {
                    "file": str(row.file),
                    "where": row.where,
                    "problem": problem,
                    "row": json.dumps(row.data, ensure_ascii=False, default=str)
                    .encode("utf-8", "backslashreplace")
                    .decode("utf-8"),
                }
            )
    if rejects and not config.drop_invalid:
        listed = [f"{r['file']} {r['where']}: {r['problem']}" for r in rejects]
        raise ArgenError(
            f"{len(rejects)} invalid scenario row(s); fix them or set "
            f"curate.drop_invalid=true:\n{listing(listed)}"
        )
    reject_frame = pd.DataFrame(rejects, columns=["file", "where", "problem", "row"])
    good = [scenario for scenario, _ in kept.values()]
    return pd.DataFrame(good, columns=list(SCENARIO_COLUMNS[:-1])), reject_frame


def _place(scenario: dict, where: str, row: SourceRow, kept: dict) -> str | None:
    """Add a valid scenario to `kept` (by id, in reading order), or say why it cannot be."""
    made = scenario["id"] is None
    if made:
        scenario["id"] = made_id(row, scenario["prompt"])
    key = scenario["id"]
    if key in kept:
        earlier, first_seen = kept[key]
        if supersedes(scenario, earlier):
            kept[key] = (scenario, where)
            return None
        if supersedes(earlier, scenario):
            return None
        if not made:
            return f"duplicate id {key!r} (first seen at {first_seen})"
        number = 2
        while f"{key}-{number}" in kept:
            number += 1
        scenario["id"] = key = f"{key}-{number}"
    kept[key] = (scenario, where)
    return None


def check_columns(rows: list[SourceRow], columns: Mapping[str, str]) -> None:
    """Fail naming a mapped column that no source row has (a typo in `curate.columns`)."""
    seen = {name for row in rows for name in row.data}
    absent = {field: column for field, column in columns.items() if column not in seen}
    if absent:
        wrong = ", ".join(f"{field} -> {column!r}" for field, column in absent.items())
        raise ArgenError(
            f"curate.columns maps {wrong}, but no source row has such a column (the sources' "
            f"columns: {', '.join(sorted(map(str, seen))) or 'none'})"
        )


# ---------------------------------------------------------------- split


def stratum_quotas(
    n: int, fractions: dict[str, float], deficit: dict[str, float]
) -> dict[str, int]:
    """Largest-remainder item counts per split for one stratum: each within one of n * fraction.

    Leftover items go to the splits furthest behind their overall target (`deficit`), so that
    rounding in many small strata does not pile up in one split.
    """
    exact = {s: n * fractions[s] for s in SPLITS}
    quota = {s: int(np.floor(exact[s] + 1e-9)) for s in SPLITS}
    leftover = n - sum(quota.values())
    order = sorted(
        SPLITS, key=lambda s: (-(exact[s] - quota[s] > 1e-9), -deficit[s], SPLITS.index(s))
    )
    for s in order[:leftover]:
        quota[s] += 1
    return quota


def assign_splits(
    frame: pd.DataFrame, groups: np.ndarray, fractions: dict[str, float], seed: int
) -> pd.Series:
    """Seeded, stratified split by tier x scope x category; a related group stays in one split."""
    frame = frame.assign(group_=groups)
    first_of_group = frame.sort_values("id").groupby("group_", sort=True).head(1)
    group_stratum = {
        row.group_: (row.tier, row.scope, row.category) for row in first_of_group.itertuples()
    }
    group_size = frame.groupby("group_").size().to_dict()
    group_min_id = frame.groupby("group_")["id"].min().to_dict()
    rng = np.random.default_rng(seed)
    assigned_total = dict.fromkeys(SPLITS, 0)
    seen_total = 0
    split_of_group: dict[int, str] = {}
    for stratum in sorted(set(group_stratum.values())):
        members = sorted(
            (g for g, s in group_stratum.items() if s == stratum), key=group_min_id.get
        )
        members = [members[i] for i in rng.permutation(len(members))]
        n = sum(group_size[g] for g in members)
        seen_total += n
        deficit = {s: (seen_total * fractions[s]) - assigned_total[s] for s in SPLITS}
        remaining = stratum_quotas(n, fractions, deficit)
        for g in sorted(members, key=lambda g: -group_size[g]):
            split = max(SPLITS, key=lambda s: (remaining[s], -SPLITS.index(s)))
            split_of_group[g] = split
            remaining[split] -= group_size[g]
            assigned_total[split] += group_size[g]
    return frame["group_"].map(split_of_group).rename("split")


def split_scenarios(
    frame: pd.DataFrame, groups: np.ndarray, fractions: dict[str, float], seed: int
) -> np.ndarray:
    """`assign_splits`, with every related group that holds an unreviewed proposed label
    split between train and validation alone: a proposal never reaches the test split."""
    barred = np.isin(groups, groups[(frame["label_source"] == PROPOSED).to_numpy()])
    splits = np.empty(len(frame), dtype=object)
    for rows, shares in ((~barred, fractions), (barred, _without_test(fractions, barred))):
        if rows.any():
            splits[rows] = assign_splits(frame[rows], groups[rows], shares, seed).to_numpy()
    return splits


def _without_test(fractions: dict[str, float], barred: np.ndarray) -> dict[str, float]:
    """The train and validation fractions scaled up to fill the test split's share."""
    kept = fractions["train"] + fractions["validation"]
    if not kept:
        if barred.any():
            raise ArgenError(
                "curate.split puts every scenario in test, where proposed labels may not go: "
                "give train or validation a share, or review the proposals (label_source: "
                "reviewed in the review file) and curate with it"
            )
        return fractions
    return {
        "train": fractions["train"] / kept,
        "validation": fractions["validation"] / kept,
        "test": 0.0,
    }


# ---------------------------------------------------------------- proposals


REVIEW_COLUMNS = (
    "id",
    "prompt",
    "tier",
    "scope",
    "category",
    "label_source",
    "confidence",
    "split",
    "source",
)
"""The review file: a source curation reads back (extra columns are ignored), so a person
corrects tier, scope or category, sets label_source to reviewed, and curates with it."""


def label_examples(config: CurateConfig, scenarios: pd.DataFrame) -> pd.DataFrame:
    """The labelled scenarios proposals learn from: the sources' own rows with given or
    reviewed labels, then those of `curate.label_examples` (each prompt once)."""
    own = scenarios[scenarios["label_source"] != PROPOSED]
    frames = [own]
    if config.label_examples:
        _, rows = read_sources(config.label_examples)
        plain = config.model_copy(update={"columns": {}, "drop_invalid": False})
        examples, _ = validate(rows, plain)
        unlabelled = examples[examples["label_source"] == PROPOSED]
        if not unlabelled.empty:
            raise ArgenError(
                f"curate.label_examples must hold labelled scenarios; {len(unlabelled)} row(s) "
                f"have no labels or only proposed ones (first: id {unlabelled['id'].iloc[0]!r})"
            )
        frames.append(examples)
    examples = pd.concat(frames, ignore_index=True).drop_duplicates("prompt")
    if examples.empty:
        raise ArgenError(
            "some rows have no labels and there are no labelled examples to propose them from: "
            "label a few rows, or name labelled scenarios in curate.label_examples"
        )
    return examples.reset_index(drop=True)


def propose_labels(
    scenarios: pd.DataFrame, vectors: np.ndarray, examples: pd.DataFrame
) -> tuple[pd.DataFrame, pd.Series]:
    """Fill the labels of rows that have none; their confidence (NaN for the other rows)."""
    from argen.judging.embeddings import embed  # torch: only for valid input

    todo = (scenarios["label_source"] == PROPOSED) & scenarios["tier"].isna()
    confidence = pd.Series(np.nan, index=scenarios.index)
    if not todo.any():
        return scenarios, confidence
    proposed = propose(vectors[todo.to_numpy()], embed(examples["prompt"].tolist()), examples)
    proposed.index = scenarios.index[todo]
    scenarios = scenarios.copy()
    scenarios.loc[todo, list(LABELS)] = proposed[list(LABELS)]
    confidence[todo] = proposed["confidence"]
    return scenarios, confidence


def review_rows(scenarios: pd.DataFrame, confidence: pd.Series) -> pd.DataFrame:
    """The rows with proposed labels (unreviewed), least confident first, for a person."""
    frame = scenarios.assign(confidence=confidence)
    frame = frame[frame["label_source"] == PROPOSED]
    frame = frame.sort_values(["confidence", "id"], na_position="first")
    return frame[list(REVIEW_COLUMNS)].reset_index(drop=True)


# ---------------------------------------------------------------- the stage


def curate_frames(config: CurateConfig) -> Curated:
    """Run every curation step in memory; raises ArgenError on bad input before any writing."""
    files, rows = read_sources(config.sources)
    scenarios, rejects = validate(rows, config)
    if scenarios.empty:
        raise ArgenError(f"no valid scenarios in {', '.join(map(str, files))}")
    unlabelled = scenarios["tier"].isna().any()
    examples = label_examples(config, scenarios) if unlabelled else None  # before torch
    inputs = source_hashes(files)
    scenarios, exact = drop_exact_duplicates(scenarios)
    from argen.judging.embeddings import (
        embed,  # torch and sentence-transformers: only for valid input
    )

    vectors = embed(scenarios["prompt"].tolist())
    found = near_duplicates(vectors, config.near_duplicate_threshold, config.related_threshold)
    near = near_duplicate_records(scenarios, found)
    scenarios = scenarios.iloc[found.kept].reset_index(drop=True)
    confidence = pd.Series(np.nan, index=scenarios.index)
    if examples is not None:
        scenarios, confidence = propose_labels(scenarios, vectors[found.kept], examples)
    fractions = config.split.model_dump()
    scenarios["split"] = split_scenarios(scenarios, found.groups, fractions, config.seed)
    review = review_rows(scenarios, confidence)
    scenarios = scenarios.sort_values(["split", "id"], key=_split_order).reset_index(drop=True)
    duplicates = pd.DataFrame(exact + near, columns=["id", "duplicate_of", "kind", "similarity"])
    return Curated(scenarios[list(SCENARIO_COLUMNS)], rejects, duplicates, inputs, review)


def near_duplicate_records(frame: pd.DataFrame, found) -> list[dict]:
    """One duplicates.parquet record per near duplicate, in row order."""
    ids = frame["id"].to_numpy()
    return [
        {
            "id": ids[i],
            "duplicate_of": ids[found.duplicate_of[i]],
            "kind": "near",
            "similarity": round(float(found.similarity[i]), 4),
        }
        for i in np.flatnonzero(found.duplicate_of >= 0)
    ]


def _split_order(column: pd.Series) -> pd.Series:
    """Sort key: splits in SPLITS order, other columns as they are."""
    return column.map(SPLITS.index) if column.name == "split" else column


def curate_key(config: CurateConfig) -> str:
    """Content key of a curation run: the sources' and label examples' hashes, the config
    section, the code version. A label example path that does not exist counts as absent: it
    is an error only where a proposal needs it."""
    inputs = source_hashes(source_files(config.sources))
    present = [path for path in config.label_examples if path.exists()]
    examples = {
        **dict.fromkeys(map(str, config.label_examples), "absent"),
        **source_hashes(source_files(present)),
    }
    return json_sha256(
        {
            "inputs": inputs,
            "examples": examples,
            "config": config.model_dump(mode="json"),
            "code": code_version(),
        }
    )[:16]


def curate(config: CurateConfig, out_dir: Path) -> Path:
    """Curate into `out_dir` (replaced atomically): split parquets, manifest, data card."""
    curated = curate_frames(config)
    with machine_faults(out_dir), atomic_dir(out_dir) as tmp:  # a full disk: the user's to mend
        outputs = {}
        for split in SPLITS:
            part = curated.scenarios[curated.scenarios["split"] == split].reset_index(drop=True)
            name = CuratedSplits.split_name(split)
            outputs[name] = write_parquet(part, tmp / name)
        outputs[CuratedSplits.DUPLICATES] = write_parquet(
            curated.duplicates, tmp / CuratedSplits.DUPLICATES
        )
        if not curated.rejects.empty:
            outputs[CuratedSplits.REJECTS] = write_parquet(
                curated.rejects, tmp / CuratedSplits.REJECTS
            )
        if not curated.review.empty:
            curated.review.to_csv(tmp / CuratedSplits.REVIEW, index=False)
            outputs[CuratedSplits.REVIEW] = file_sha256(tmp / CuratedSplits.REVIEW)
        (tmp / CuratedSplits.DATACARD).write_text(data_card(curated))
        manifest = {
            "stage": "curate",
            "code_version": code_version(),
            "inputs": curated.inputs,
            "config": config.model_dump(mode="json"),
            "counts": counts(curated),
            "outputs": outputs,
        }
        (tmp / CuratedSplits.SIDECAR).write_text(
            json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        )
    log.info("curated %d scenarios into %s", len(curated.scenarios), out_dir)
    if not curated.review.empty:
        log.info(
            "%d prompt(s) had no labels: proposed labels, kept out of the test split, are "
            "listed for review in %s",
            len(curated.review),
            out_dir / CuratedSplits.REVIEW,
        )
    return out_dir


def write_parquet(frame: pd.DataFrame, path: Path) -> str:
    """Write a frame deterministically (no index) and return the file's sha256."""
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return file_sha256(path)


def counts(curated: Curated) -> dict:
    """Row counts per split and per split x tier / scope / category, plus what was dropped."""
    frame = curated.scenarios
    result: dict = {"total": len(frame), "rejected": len(curated.rejects)}
    result["duplicates"] = curated.duplicates["kind"].value_counts().sort_index().to_dict()
    result["split"] = frame["split"].value_counts().reindex(SPLITS, fill_value=0).to_dict()
    for column in (*LABELS, "label_source"):
        table = pd.crosstab(frame[column], frame["split"]).reindex(
            columns=list(SPLITS), fill_value=0
        )
        result[column] = {k: {s: int(v) for s, v in row.items()} for k, row in table.iterrows()}
    return result


def data_card(curated: Curated) -> str:
    """A short markdown card: what is in each split and what was dropped, and why."""
    frame = curated.scenarios
    lines = [
        "# Curated scenarios",
        "",
        f"{len(frame)} scenarios from {len(curated.inputs)} source file(s).",
        "",
    ]
    sizes = frame["split"].value_counts().reindex(SPLITS, fill_value=0)
    lines += ["## Splits", "", sizes.to_frame("scenarios").to_markdown(), ""]
    for column in LABELS:
        table = pd.crosstab(frame[column], frame["split"], margins=True, margins_name="total")
        lines += [f"## By {column}", "", table.to_markdown(), ""]
    lines += labels_section(curated)
    dup = curated.duplicates
    lines += [
        "## Dropped",
        "",
        f"- exact duplicates: {int((dup['kind'] == 'exact').sum())}",
        f"- near duplicates: {int((dup['kind'] == 'near').sum())}",
        f"- invalid rows: {len(curated.rejects)} (see rejects.parquet)",
        "",
    ]
    lines += ["## Sources", ""] + [f"- `{p}` sha256 `{h[:16]}`" for p, h in curated.inputs.items()]
    return "\n".join(lines) + "\n"


def labels_section(curated: Curated) -> list[str]:
    """The card's account of where labels come from, and every proposed one."""
    frame = curated.scenarios
    table = pd.crosstab(frame["label_source"], frame["split"], margins=True, margins_name="total")
    lines = ["## Labels", "", table.to_markdown(), ""]
    if curated.review.empty:
        return lines
    lines += [
        f"{len(curated.review)} prompt(s) came without labels: their tier, scope and category "
        "were proposed by a classifier over the sentence embeddings of labelled scenarios "
        "(`label_source: proposed`) and are kept out of the test split until a person "
        f"reviews them. {agreement_text()}",
        "",
        f"To review: correct `{CuratedSplits.REVIEW}` (least confident first), set "
        "`label_source` to `reviewed` on each row you checked, and curate again with that file "
        "as a source beside the others (a review row replaces the unlabelled row of the same "
        "id).",
        "",
        curated.review.drop(columns=["prompt", "source"]).to_markdown(index=False),
        "",
    ]
    return lines
