"""Stage drivers: where each stage's outputs live under the artifacts root, and the pipeline.

Every stage writes under ``<root>/<stage>/<key>/`` where the key hashes the content of its
inputs, its config section and the code version; a complete keyed output is reused, not
recomputed (`keyed`): the only cache, whoever runs the stage. The `*_out` functions compute
those directories without running anything.

The modules that need torch, TRL or matplotlib are imported inside the stage that uses them, so
that `argen curate` (and a curation that fails on bad input) never pays for them.
"""

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from argen.atomic import output_path
from argen.config import Config
from argen.data.curate import curate, curate_key
from argen.errors import ArgenError
from argen.hashing import dir_sha256, file_sha256, json_sha256
from argen.models import resolve_model
from argen.outputs import STAGE_OUTPUTS, Adapter, CuratedSplits, Evaluation
from argen.version import code_version

log = logging.getLogger(__name__)


def is_complete(stage: str, out: Path) -> bool:
    """Whether `out` holds a finished output of `stage` (its sidecar, written last)."""
    return STAGE_OUTPUTS[stage](out).is_complete()


def check_out(stage: str, out: Path, overwrite: bool = False) -> Path:
    """A folder the user named for `stage`'s output: new or empty, or with `overwrite` an
    earlier output of the same stage. Other files are never replaced; checked before any work."""
    out = output_path(out)
    if out.exists() and not out.is_dir():
        raise ArgenError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ArgenError(
                f"--out {out} is not empty; pass --overwrite to replace an earlier {stage} "
                "output there, or name a new folder"
            )
        if not is_complete(stage, out):
            raise ArgenError(
                f"--out {out} holds files that are not an argen {stage} output "
                f"(no {STAGE_OUTPUTS[stage].SIDECAR}); refusing to replace them"
            )
    return out


def _content(path: Path) -> str:
    """A file's or directory's content hash (the path itself if it does not exist yet)."""
    if path.is_file():
        return file_sha256(path)
    if path.is_dir():
        return dir_sha256(path)
    return str(path)


def _keyed(config: Config, stage: str, parts: dict) -> Path:
    key = json_sha256({**parts, "code": code_version()})[:16]
    return config.storage.root / stage / key


def curate_out(config: Config) -> Path:
    return config.storage.root / "curate" / curate_key(config.curate)


def evaluate_out(config: Config, model_dir: Path, scenarios: Path, label: str) -> Path:
    return _keyed(
        config,
        "evaluate",
        {
            "model": _content(model_dir),
            "scenarios": _content(scenarios),
            "label": label,
            "generation": config.generation.model_dump(mode="json"),
            "judge": config.judge.model_dump(mode="json"),
        },
    )


def train_out(config: Config, model_dir: Path, train_split: Path, validation_split: Path) -> Path:
    return _keyed(
        config,
        "train",
        {
            "model": _content(model_dir),
            "train": _content(train_split),
            "validation": _content(validation_split),
            "train_config": config.train.model_dump(mode="json"),
            "generation": config.generation.model_dump(mode="json"),
            "judge": config.judge.model_dump(mode="json"),
        },
    )


def merge_out(config: Config, model_dir: Path, adapter: Path) -> Path:
    return _keyed(config, "merge", {"model": _content(model_dir), "adapter": _content(adapter)})


def report_out(config: Config, baseline: Path, aligned: Path, name: str) -> Path:
    key = json_sha256(
        {
            "baseline": _content(baseline),
            "aligned": _content(aligned),
            "report": config.report.model_dump(mode="json"),
            "code": code_version(),
        }
    )[:12]
    return config.storage.reports / f"{name}-{key}"


def keyed(stage: str, out: Path, config: Config, *inputs, **options) -> tuple[Path, bool]:
    """A stage's output in its content-keyed directory `out`: reused when complete (True), else
    computed into it now (False). The one cache, for `argen run` and the Prefect tasks alike."""
    if is_complete(stage, out):
        log.info("%s is up to date: %s", stage, out)
        return out, True
    return RUNNERS[stage](config, *inputs, out=out, **options), False


def run_curate(config: Config, out: Path | None = None) -> Path:
    """Curate into `out`, or into the keyed directory (reused when already complete)."""
    if out is None:
        return keyed("curate", curate_out(config), config)[0]
    return curate(config.curate, out)


def run_evaluate(
    config: Config, model: str, scenarios: Path, label: str, out: Path | None = None
) -> Path:
    """Evaluate `model` (a spec or directory) on `scenarios`, into `out` or a keyed directory."""
    model_dir = resolve_model(model)
    if out is None:
        out = evaluate_out(config, model_dir, scenarios, label)
        return keyed("evaluate", out, config, model, scenarios, label)[0]
    from argen.evaluation.evaluate import evaluate

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
        out = train_out(config, model_dir, train_split, validation_split)
        inputs = (model, train_split, validation_split)
        return keyed("train", out, config, *inputs, callbacks=callbacks)[0]
    from argen.training.train import train

    return train(config, model_dir, train_split, validation_split, out, callbacks)


def run_merge(config: Config, model: str, adapter: Path, out: Path | None = None) -> Path:
    """Merge `adapter` into the base `model`, into `out` or a keyed directory."""
    model_dir = resolve_model(model)
    if out is None:
        return keyed("merge", merge_out(config, model_dir, adapter), config, model, adapter)[0]
    from argen.training.merge import merge

    return merge(model_dir, adapter, out)


def run_report(
    config: Config,
    baseline: Path,
    aligned: Path,
    out: Path | None = None,
    training_log: Path | None = None,
    name: str = "argen",
) -> Path:
    """Compare two results files into `out`, or ``reports/<name>-<key>`` (reused when complete)."""
    if out is None:
        out = report_out(config, baseline, aligned, name)
        return keyed(
            "report", out, config, baseline, aligned, training_log=training_log, name=name
        )[0]
    from argen.reporting.compare import compare
    from argen.reporting.report import write_report

    comparison = compare(baseline, aligned, config.report)
    title = f"ArGen comparison report: {name}"
    return write_report(comparison, out, title, training_log, config.report.smoke_run)


RUNNERS: dict[str, Callable[..., Path]] = {
    "curate": run_curate,
    "evaluate": run_evaluate,
    "train": run_train,
    "merge": run_merge,
    "report": run_report,
}
"""Each stage's run function, called by `keyed` with the output directory to compute into."""


class StageRunner(Protocol):
    """How each stage of the pipeline runs: here, in this process, or as an orchestrator's task
    (a Prefect flow passes its own). The order of the stages is `run_pipeline`'s alone."""

    def curate(self, config: Config) -> Path: ...

    def evaluate(self, config: Config, model: str, scenarios: Path, label: str) -> Path: ...

    def train_and_merge(self, config: Config, curated: Path) -> tuple[Path, Path]:
        """The adapter directory and the merged model directory."""
        ...

    def report(
        self, config: Config, baseline: Path, aligned: Path, training_log: Path, name: str
    ) -> Path: ...


class InProcess:
    """Every stage in this process, reusing complete keyed outputs."""

    def curate(self, config: Config) -> Path:
        return run_curate(config)

    def evaluate(self, config: Config, model: str, scenarios: Path, label: str) -> Path:
        return run_evaluate(config, model, scenarios, label)

    def train_and_merge(self, config: Config, curated: Path) -> tuple[Path, Path]:
        base = config.model.base
        splits = CuratedSplits(curated)
        adapter = run_train(config, base, splits.train, splits.validation)
        return adapter, run_merge(config, base, adapter)

    def report(
        self, config: Config, baseline: Path, aligned: Path, training_log: Path, name: str
    ) -> Path:
        return run_report(config, baseline, aligned, training_log=training_log, name=name)


def run_pipeline(
    config: Config, name: str = "argen", runner: StageRunner | None = None
) -> dict[str, Path]:
    """The whole pipeline, the one definition of its order: curate, evaluate the baseline, train
    and merge, evaluate the aligned model, compare. Returns each stage's output directory."""
    runner = runner or InProcess()
    curated = runner.curate(config)
    test = CuratedSplits(curated).test
    baseline = runner.evaluate(config, config.model.base, test, "baseline")
    adapter, merged = runner.train_and_merge(config, curated)
    aligned = runner.evaluate(config, str(merged), test, "aligned")
    report = runner.report(
        config,
        Evaluation(baseline).results,
        Evaluation(aligned).results,
        Adapter(adapter).training_log,
        name,
    )
    return {
        "curate": curated,
        "baseline": baseline,
        "train": adapter,
        "merge": merged,
        "aligned": aligned,
        "report": report,
    }
