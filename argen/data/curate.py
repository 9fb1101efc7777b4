"""Curation: scenario sources -> validated, deduplicated, stratified train/validation/test parquets.

Steps: read every source file (`argen.data.sources`), validate and normalize each row, drop exact
duplicates, then near-duplicates (cosine similarity of MiniLM embeddings, `argen.data.dedup`), group
remaining related prompts so that no group straddles splits, and split each tier x scope x
category stratum by the configured fractions with a seeded shuffle. Same inputs and seed, same
bytes. Sources are read and validated before the sentence encoder (torch) is imported, so bad
input fails in about a second.
"""

import json
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from argen.atomic import atomic_dir
from argen.config import CurateConfig
from argen.data.dedup import drop_exact_duplicates, near_duplicates
from argen.data.schema import CATEGORIES, SCENARIO_COLUMNS, SCOPES, SOURCE_REQUIRED, SPLITS, TIERS
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


# ---------------------------------------------------------------- validation


def normalize_text(text: str) -> str:
    """Unicode NFC, whitespace runs collapsed to one space, trimmed."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


def validate_row(row: SourceRow, max_prompt_chars: int) -> tuple[dict | None, str | None]:
    """Return (normalized scenario, None) or (None, problem) for one source row."""
    data = row.data
    for name in SOURCE_REQUIRED:
        value = data.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None, f"missing or empty {name!r}"
        if not _is_text(name, value):
            return None, f"{name!r} must be text, got {type(value).__name__} {_short(value)}"
    source = data.get("source")
    if source is not None and not isinstance(source, str):
        return None, f"'source' must be text, got {type(source).__name__} {_short(source)}"
    for name in (*SOURCE_REQUIRED, "source"):
        if isinstance(data.get(name), str) and not _encodable(data[name]):
            return None, f"{name!r} is not valid Unicode (an unpaired surrogate escape)"
    prompt = normalize_text(data["prompt"])
    if len(prompt) > max_prompt_chars:
        return None, f"prompt has {len(prompt)} characters, over the limit of {max_prompt_chars}"
    tier = str(data["tier"]).strip().upper()
    scope = str(data["scope"]).strip().upper()
    category = str(data["category"]).strip().lower()
    for name, value, allowed in (
        ("tier", tier, TIERS),
        ("scope", scope, SCOPES),
        ("category", category, CATEGORIES),
    ):
        if value not in allowed:
            return None, f"unknown {name} {data[name]!r} (expected one of {', '.join(allowed)})"
    scenario = {
        "id": str(data["id"]).strip(),
        "prompt": prompt,
        "tier": tier,
        "scope": scope,
        "category": category,
        "source": normalize_text(source) if source else row.file.stem,
    }
    return scenario, None


def _is_text(name: str, value) -> bool:
    """Required fields are strings; an id may also be an integer (a numeric id column)."""
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


def validate(rows: list[SourceRow], config: CurateConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Validate all rows; raise one error listing every problem unless drop_invalid is set."""
    good, rejects = [], []
    seen_ids: dict[str, str] = {}
    for row in rows:
        scenario, problem = validate_row(row, config.max_prompt_chars)
        if scenario and scenario["id"] in seen_ids:
            problem = f"duplicate id {scenario['id']!r} (first seen at {seen_ids[scenario['id']]})"
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
            continue
        assert scenario is not None  # validate_row gives a scenario or a problem
        seen_ids[scenario["id"]] = f"{row.file} {row.where}"
        good.append(scenario)
    if rejects and not config.drop_invalid:
        listed = [f"{r['file']} {r['where']}: {r['problem']}" for r in rejects]
        raise ArgenError(
            f"{len(rejects)} invalid scenario row(s); fix them or set "
            f"curate.drop_invalid=true:\n{listing(listed)}"
        )
    reject_frame = pd.DataFrame(rejects, columns=["file", "where", "problem", "row"])
    return pd.DataFrame(good, columns=list(SCENARIO_COLUMNS[:-1])), reject_frame


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


# ---------------------------------------------------------------- the stage


def curate_frames(config: CurateConfig) -> Curated:
    """Run every curation step in memory; raises ArgenError on bad input before any writing."""
    files, rows = read_sources(config.sources)
    scenarios, rejects = validate(rows, config)
    if scenarios.empty:
        raise ArgenError(f"no valid scenarios in {', '.join(map(str, files))}")
    inputs = source_hashes(files)
    scenarios, exact = drop_exact_duplicates(scenarios)
    from argen.judging.embeddings import (
        embed,  # torch and sentence-transformers: only for valid input
    )

    vectors = embed(scenarios["prompt"].tolist())
    found = near_duplicates(vectors, config.near_duplicate_threshold, config.related_threshold)
    near = near_duplicate_records(scenarios, found)
    scenarios = scenarios.iloc[found.kept].reset_index(drop=True)
    groups = found.groups
    fractions = config.split.model_dump()
    scenarios["split"] = assign_splits(scenarios, groups, fractions, config.seed).to_numpy()
    scenarios = scenarios.sort_values(["split", "id"], key=_split_order).reset_index(drop=True)
    duplicates = pd.DataFrame(exact + near, columns=["id", "duplicate_of", "kind", "similarity"])
    return Curated(scenarios[list(SCENARIO_COLUMNS)], rejects, duplicates, inputs)


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
    """Content key of a curation run: source file hashes, the config section, the code version."""
    inputs = source_hashes(source_files(config.sources))
    return json_sha256(
        {"inputs": inputs, "config": config.model_dump(mode="json"), "code": code_version()}
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
    for column in ("tier", "scope", "category"):
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
    for column in ("tier", "scope", "category"):
        table = pd.crosstab(frame[column], frame["split"], margins=True, margins_name="total")
        lines += [f"## By {column}", "", table.to_markdown(), ""]
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
