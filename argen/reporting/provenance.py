"""What a report compared, from the records its inputs carry: the models (base name and
SHA-256, each evaluated model's weights, the adapter), the recipe's resolved config, the reward
judge and the audit grader, the scenarios and splits, the code, the seeds, the date and the
hardware of every stage. What no record holds is None (the report says "not recorded"), never
guessed."""

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from argen.config import Config, resolved_sha256
from argen.errors import ArgenError
from argen.hashing import json_sha256
from argen.machine import hardware
from argen.models import PACKAGED_MODELS
from argen.outputs import Adapter, CuratedSplits, Evaluation, Merged, StageOutput
from argen.version import code_version


def _record(output: StageOutput) -> dict:
    """An output's record as a dict, or empty when there is none (or it does not parse)."""
    record = output.try_read() if output.path.is_dir() else None
    return record.model_dump(exclude_unset=True) if record is not None else {}


@dataclass(frozen=True)
class Records:
    """The records behind a comparison: each evaluation's summary, the aligned model's merge
    manifest, the training manifest and the curation manifest (empty where absent)."""

    baseline: dict = field(default_factory=dict)
    aligned: dict = field(default_factory=dict)
    merge: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    curation: dict = field(default_factory=dict)

    @classmethod
    def gather(cls, baseline: Path, aligned: Path, training_log: Path | None = None) -> "Records":
        """Follow the records from the two results files: their evaluations, the merged model
        the aligned one evaluated, its adapter (or the training log's folder), the curation
        whose split the baseline read."""
        base = _record(Evaluation.of_results(baseline))
        other = _record(Evaluation.of_results(aligned))
        model_dir = _get(other, "model_dir")
        merge = _record(Merged(Path(model_dir))) if model_dir else {}
        adapter = Path(training_log).parent if training_log else _get(merge, "adapter")
        training = _record(Adapter(Path(adapter))) if adapter else {}
        split = _get(base, "scenarios")
        curation = _record(CuratedSplits(Path(split).parent)) if split else {}
        return cls(base, other, merge, training, curation)

    @property
    def reward_judge(self) -> str | None:
        """The judge training optimised, as the training record names it."""
        return _get(self.training, "config", "judge")

    @property
    def optimised_labels(self) -> list[str]:
        """The label sets a preference stage tuned the policy against, as the training record
        names them (none before preference tuning was recorded)."""
        return list(_get(self.training, "optimised_labels") or [])


def base_model(name: str) -> dict:
    """The base model the recipe names, with its packaged file's SHA-256 where it is packaged."""
    packaged = PACKAGED_MODELS.get(name)
    if packaged is None:
        return {"name": name, "packaged_sha256": None}
    try:
        digest = packaged.sha256()
    except (ArgenError, OSError):
        digest = "packaged file not installed where the report ran"
    return {"name": name, "packaged_sha256": digest}


def scenario_set(paired: pd.DataFrame) -> dict:
    """The compared scenarios: how many, and the SHA-256 of their ids, prompts, tiers, scopes and
    categories in id order (the same set hashes the same whichever file carried it)."""
    rows = paired.sort_values("id")[["id", "prompt", "tier", "scope", "category"]]
    return {"n": len(rows), "content_sha256": json_sha256(rows.to_numpy().tolist())}


def _get(record: Any, *keys: str) -> Any:
    """``record[k1][k2]...``, or None where a key is missing or a level is not a mapping (an
    older or hand-made record)."""
    for key in keys:
        if not isinstance(record, dict):
            return None
        record = record.get(key)
    return record


def provenance(
    config: Config, name: str, paired: pd.DataFrame, judge: dict, audit: dict, records: Records
) -> dict:
    """The provenance block of a report: `judge` and `audit` as the comparison names them,
    `records` as `Records.gather` finds them; None wherever no record holds the fact."""
    base, aligned, training = records.baseline, records.aligned, records.training
    curation = records.curation
    outputs = _get(curation, "outputs") or {}
    splits = {k: v for k, v in outputs.items() if k.endswith(".parquet")}
    curate_seed = _get(curation, "config", "seed")
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "run": name,
        "config_sha256": resolved_sha256(config),
        "code_version": code_version(),
        "base_model": base_model(config.model.base),
        "baseline": _model(base),
        "aligned": _model(aligned)
        | {k: _get(records.merge, k) for k in ("adapter", "adapter_sha256")},
        "training": {
            "steps": _get(training, "steps"),
            "seed": _get(training, "config", "train", "seed"),
            "reward_judge": records.reward_judge,
            "config_sha256": json_sha256(training["config"]) if "config" in training else None,
            "code_version": _get(training, "code_version"),
        },
        "judge": judge,
        "audit": {
            k: audit[k]
            for k in ("label", "grader", "files_sha256", "threshold", "independent", "reward_judge")
        },
        "scenarios": scenario_set(paired)
        | {
            "split_file": _get(base, "scenarios"),
            "split_sha256": _get(base, "settings", "scenarios_sha256"),
            "splits_sha256": splits or None,
            "sources_sha256": json_sha256(curation["inputs"]) if "inputs" in curation else None,
        },
        "seeds": {
            "curate": config.curate.seed if curate_seed is None else curate_seed,
            "train": _get(training, "config", "train", "seed"),
            "generation": _get(base, "settings", "generation", "seed"),
            "judge": config.judge.seed,
            "report": config.report.seed,
        },
        "hardware": {
            "report": hardware(),
            "baseline evaluation": _get(base, "hardware"),
            "aligned evaluation": _get(aligned, "hardware"),
            "training": _get(training, "hardware"),
        },
    }


def _model(summary: dict) -> dict:
    """An evaluated model as its evaluation's record names it."""
    return {
        "label": _get(summary, "label"),
        "model_dir": _get(summary, "model_dir"),
        "weights_sha256": _get(summary, "model_sha256"),
        "code_version": _get(summary, "code_version"),
    }
