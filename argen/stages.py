"""Stage drivers: where each stage's outputs live under the artifacts root, and the pipeline."""

import logging
from pathlib import Path

from argen.compare import compare
from argen.config import Config
from argen.curate import curate, curate_key
from argen.evaluate import evaluate
from argen.hashing import dir_sha256, file_sha256, json_sha256
from argen.merge import merge
from argen.models import resolve_model
from argen.report import write_report
from argen.train import train
from argen.version import code_version

log = logging.getLogger(__name__)

REPORTS_DIR = Path("reports")
"""Where generated reports land (relative to the working directory)."""


def stage_dir(config: Config, stage: str, key: str) -> Path:
    """``<root>/<stage>/<key>``: a stage's outputs, keyed by the content of its inputs."""
    return config.storage.root / stage / key


def run_curate(config: Config, out: Path | None = None) -> Path:
    """Curate into `out`, or into the keyed directory (reused when already complete)."""
    if out is None:
        out = stage_dir(config, "curate", curate_key(config.curate))
        if (out / "manifest.json").is_file():
            log.info("curation is up to date: %s", out)
            return out
    return curate(config.curate, out)


def run_evaluate(
    config: Config, model: str, scenarios: Path, label: str, out: Path | None = None
) -> Path:
    """Evaluate `model` (a spec or directory) on `scenarios`, into `out` or a keyed directory."""
    model_dir = resolve_model(model)
    if out is None:
        key = json_sha256(
            {
                "model": dir_sha256(model_dir),
                "scenarios": file_sha256(scenarios) if scenarios.is_file() else str(scenarios),
                "generation": config.generation.model_dump(mode="json"),
                "judge": config.judge.model_dump(mode="json"),
                "label": label,
                "code": code_version(),
            }
        )[:16]
        out = stage_dir(config, "evaluate", key)
        if (out / "summary.json").is_file():
            log.info("evaluation of %s is up to date: %s", label, out)
            return out
    return evaluate(config, model_dir, scenarios, out, label)


def run_train(
    config: Config,
    model: str,
    train_split: Path,
    validation_split: Path,
    out: Path | None = None,
    callbacks=(),
) -> Path:
    """Train an adapter into `out` or a keyed directory (reused when complete, resumed when
    an earlier run with the same key stopped part-way)."""
    model_dir = resolve_model(model)
    if out is None:
        key = json_sha256(
            {
                "model": dir_sha256(model_dir),
                "train": file_sha256(train_split) if train_split.is_file() else str(train_split),
                "validation": (
                    file_sha256(validation_split)
                    if validation_split.is_file()
                    else str(validation_split)
                ),
                "train_config": config.train.model_dump(mode="json"),
                "generation": config.generation.model_dump(mode="json"),
                "judge": config.judge.model_dump(mode="json"),
                "code": code_version(),
            }
        )[:16]
        out = stage_dir(config, "train", key)
        if (out / "manifest.json").is_file():
            log.info("training is up to date: %s", out)
            return out
    return train(config, model_dir, train_split, validation_split, out, callbacks)


def run_merge(config: Config, model: str, adapter: Path, out: Path | None = None) -> Path:
    """Merge `adapter` into the base `model`, into `out` or a keyed directory."""
    model_dir = resolve_model(model)
    if out is None:
        adapter_hash = dir_sha256(adapter) if adapter.is_dir() else str(adapter)
        key = json_sha256(
            {"model": str(model_dir), "adapter": adapter_hash, "code": code_version()}
        )[:16]
        out = stage_dir(config, "merge", key)
        if (out / "merge_manifest.json").is_file():
            log.info("merge is up to date: %s", out)
            return out
    return merge(model_dir, adapter, out)


def run_report(
    config: Config,
    baseline: Path,
    aligned: Path,
    out: Path | None = None,
    training_log: Path | None = None,
    name: str = "argen",
) -> Path:
    """Compare two results files into `out` or ``reports/<name>-<key>``."""
    if out is None:
        key = json_sha256(
            {
                "baseline": file_sha256(baseline) if baseline.is_file() else str(baseline),
                "aligned": file_sha256(aligned) if aligned.is_file() else str(aligned),
                "report": config.report.model_dump(mode="json"),
                "code": code_version(),
            }
        )[:12]
        out = REPORTS_DIR / f"{name}-{key}"
    comparison = compare(baseline, aligned, config.report)
    return write_report(comparison, out, f"ArGen comparison report: {name}", training_log)


def run_pipeline(config: Config, name: str = "argen") -> dict[str, Path]:
    """The whole pipeline on a recipe; returns each stage's output directory."""
    curated = run_curate(config)
    test = curated / "test.parquet"
    baseline = run_evaluate(config, config.model.base, test, "baseline")
    adapter = run_train(
        config, config.model.base, curated / "train.parquet", curated / "validation.parquet"
    )
    merged = run_merge(config, config.model.base, adapter)
    aligned = run_evaluate(config, str(merged), test, "aligned")
    return {
        "curate": curated,
        "baseline": baseline,
        "train": adapter,
        "merge": merged,
        "aligned": aligned,
    }
