"""Stage drivers: where each stage's outputs live under the artifacts root, and the pipeline."""

import logging
from pathlib import Path

from argen.config import Config
from argen.curate import curate, curate_key

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


def run_pipeline(config: Config) -> Path:
    """The whole pipeline on a recipe; returns the directory of its final output."""
    return run_curate(config)
