"""Stage drivers: where each stage's outputs live under the artifacts root, and the pipeline."""

import logging
from pathlib import Path

from argen.config import Config
from argen.curate import curate, curate_key
from argen.evaluate import evaluate
from argen.hashing import dir_sha256, file_sha256, json_sha256
from argen.models import resolve_model
from argen.version import code_version

log = logging.getLogger(__name__)


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


def run_pipeline(config: Config) -> Path:
    """The whole pipeline on a recipe; returns the directory of its final output."""
    curated = run_curate(config)
    return run_evaluate(config, config.model.base, curated / "test.parquet", "baseline")
