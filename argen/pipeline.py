"""The stage table and the pipeline: what each stage is, where its output lives, and the order.

`STAGES` holds one entry per stage: its name, its output type (`argen.outputs`), what its key
hashes and how it runs. `run_stage(name, config, **inputs)` is the one way a stage runs, for
`argen <stage>`, `argen run` and the Prefect tasks alike: its output goes to
``<root>/<stage>/<key>/``, where the key hashes the content of its inputs, its config and the code
version, and a complete keyed output is reused, not recomputed (the only cache). An input named
``model`` is a model spec, resolved once to its directory before anything else.

Adding a stage is one `Stage` entry here (its key and run functions beside it), one task line in
`tasks/stages.py` and, if it runs on another pool, one deployment in `prefect.yaml`.

The modules that need torch, TRL or matplotlib are imported inside the stage that uses them, so
that `argen curate` (and a curation that fails on bad input) never pays for them.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from argen.atomic import output_path
from argen.config import Config, resolved_sha256
from argen.data.curate import curate, curate_key
from argen.errors import ArgenError
from argen.hashing import dir_sha256, file_sha256, json_sha256
from argen.judging.scoring import judge_key
from argen.models import resolve_model
from argen.outputs import (
    Adapter,
    CuratedSplits,
    Evaluation,
    Merged,
    Report,
    StageOutput,
    check_inputs,
)
from argen.version import code_version

log = logging.getLogger(__name__)


def _content(path: Path | str) -> str:
    """A file's or directory's content hash (the path itself if it does not exist yet)."""
    path = Path(path)
    if path.is_file():
        return file_sha256(path)
    if path.is_dir():
        return dir_sha256(path)
    return str(path)


def _in_artifacts(config: Config, stage: str, key: str, inputs: dict[str, Any]) -> Path:
    return config.storage.root / stage / key[:16]


def _in_reports(config: Config, stage: str, key: str, inputs: dict[str, Any]) -> Path:
    """Reports live apart from the artifacts, named for their run: ``reports/<name>-<key>``."""
    return config.storage.reports / f"{inputs.get('name', 'argen')}-{key[:12]}"


@dataclass(frozen=True)
class Stage:
    """One stage: its output type, what its key hashes (`key(config, **inputs)`: a JSON-able
    dict; the code version is added) and how it computes into a folder (`run(config, out,
    **inputs)`). `options` are inputs that change how it runs but not what it makes (a
    progress callback), so they stay out of the key; `where` places the keyed folder."""

    name: str
    output: type[StageOutput]
    key: Callable[..., dict[str, Any]]
    run: Callable[..., Path]
    options: tuple[str, ...] = ()
    where: Callable[[Config, str, str, dict[str, Any]], Path] = _in_artifacts

    def keyed(self, config: Config, /, **inputs: Any) -> tuple[dict[str, Any], Path]:
        """What this stage's key hashes for these (resolved) inputs, and the content-keyed
        folder it names (one pass over the input files)."""
        keyed = {k: v for k, v in inputs.items() if k not in self.options}
        parts = {**self.key(config, **keyed), "code": code_version()}
        return parts, self.where(config, self.name, json_sha256(parts), inputs)

    def folder(self, config: Config, /, **inputs: Any) -> Path:
        """The content-keyed folder of this stage's output for these (resolved) inputs."""
        return self.keyed(config, **inputs)[1]


def _curate_key(config: Config) -> dict[str, Any]:
    return {"curate": curate_key(config.curate)}


def _curate(config: Config, out: Path) -> Path:
    return curate(config.curate, out)


def _evaluate_key(config: Config, model: Path, scenarios: Path, label: str) -> dict[str, Any]:
    return {
        "model": _content(model),
        "scenarios": _content(scenarios),
        "label": label,
        "generation": config.generation.model_dump(mode="json"),
        "judge": judge_key(config.judge),
    }


def _evaluate(config: Config, out: Path, model: Path, scenarios: Path, label: str) -> Path:
    from argen.evaluation.evaluate import evaluate

    return evaluate(config, model, scenarios, out, label)


def _judge_key(
    config: Config,
    responses: Path,
    label: str,
    tier: str | None = None,
    scope: str | None = None,
) -> dict[str, Any]:
    return {
        "responses": _content(responses),
        "label": label,
        "tier": tier,
        "scope": scope,
        "judge": judge_key(config.judge),
    }


def _judge(
    config: Config,
    out: Path,
    responses: Path,
    label: str,
    tier: str | None = None,
    scope: str | None = None,
) -> Path:
    from argen.evaluation.judge_file import judge_file

    return judge_file(config, responses, out, label, tier, scope)


def _sft_key(
    config: Config, model: Path, train_split: Path, validation_split: Path
) -> dict[str, Any]:
    return {
        "model": _content(model),
        "train": _content(train_split),
        "validation": _content(validation_split),
        "demonstrations": [_content(p) for p in config.sft.demonstrations],
        "sft": config.sft.model_dump(mode="json"),
        "lora": config.train.lora.model_dump(mode="json"),
        "seed": config.train.seed,
        "generation": config.generation.model_dump(mode="json"),
        "judge": judge_key(config.judge),
    }


def _sft(config: Config, out: Path, model: Path, train_split: Path, validation_split: Path) -> Path:
    """The warm start's adapter into `out` (resumed when an earlier run stopped part-way)."""
    from argen.training.sft import warm_start

    return warm_start(config, model, train_split, validation_split, out)


def _prefer_key(
    config: Config, model: Path, train_split: Path, validation_split: Path, warm_start: Path
) -> dict[str, Any]:
    return {
        "model": _content(model),
        "train": _content(train_split),
        "validation": _content(validation_split),
        "warm_start": _content(warm_start),
        "demonstrations": [_content(p) for p in config.sft.demonstrations],
        "labels": _content(config.prefer.labels),
        "prefer": config.prefer.model_dump(mode="json"),
        "seed": config.train.seed,
        "generation": config.generation.model_dump(mode="json"),
        "judge": judge_key(config.judge),
    }


def _prefer(
    config: Config,
    out: Path,
    model: Path,
    train_split: Path,
    validation_split: Path,
    warm_start: Path,
) -> Path:
    """The warm start's adapter tuned on preference pairs into `out` (resumed when an earlier
    run stopped part-way)."""
    from argen.training.prefer import prefer

    return prefer(config, model, train_split, validation_split, warm_start, out)


def _train_key(
    config: Config,
    model: Path,
    train_split: Path,
    validation_split: Path,
    warm_start: Path | None = None,
) -> dict[str, Any]:
    return {
        "model": _content(model),
        "train": _content(train_split),
        "validation": _content(validation_split),
        "train_config": config.train.model_dump(mode="json"),
        "generation": config.generation.model_dump(mode="json"),
        "judge": judge_key(config.judge),
        **({"warm_start": _content(warm_start)} if warm_start is not None else {}),
    }


def _train(
    config: Config,
    out: Path,
    model: Path,
    train_split: Path,
    validation_split: Path,
    callbacks: tuple = (),
    warm_start: Path | None = None,
) -> Path:
    """Train an adapter into `out` (resumed when an earlier run with this key stopped part-way);
    with `warm_start`, GRPO continues that adapter."""
    from argen.training.train import train

    return train(config, model, train_split, validation_split, out, callbacks, warm_start)


def _merge_key(config: Config, model: Path, adapter: Path) -> dict[str, Any]:
    return {"model": _content(model), "adapter": _content(adapter)}


def _merge(config: Config, out: Path, model: Path, adapter: Path) -> Path:
    from argen.training.merge import merge

    return merge(model, adapter, out)


def _report_key(
    config: Config, baseline: Path, aligned: Path, name: str = "argen"
) -> dict[str, Any]:
    """The results, the report's settings, the audit grader's identity (a retrained audit
    grader makes a new report) and the resolved config its provenance names."""
    from argen.evaluation.audit import AuditGrader

    return {
        "baseline": _content(baseline),
        "aligned": _content(aligned),
        "report": config.report.model_dump(mode="json"),
        "audit": AuditGrader.from_config(config.audit).identity,
        "config": resolved_sha256(config),
    }


def _report(
    config: Config,
    out: Path,
    baseline: Path,
    aligned: Path,
    name: str = "argen",
    training_log: Path | None = None,
) -> Path:
    """Compare, audit both models' answers, and write the report with its provenance."""
    from argen.evaluation.audit import AuditGrader
    from argen.reporting.compare import compare
    from argen.reporting.provenance import Records, provenance
    from argen.reporting.report import write_report

    records = Records.gather(baseline, aligned, training_log)
    grader = AuditGrader.from_config(config.audit)
    comparison = compare(
        baseline, aligned, config.report, grader, records.reward_judge, records.optimised_labels
    )
    block = provenance(config, name, comparison.paired, comparison.judge, comparison.audit, records)
    title = f"ArGen comparison report: {name}"
    smoke_run = config.report.smoke_run and not any(map(_judged, (baseline, aligned)))
    return write_report(comparison, out, title, training_log, smoke_run, block)


def _judged(results: Path) -> bool:
    """Whether `argen judge` wrote this results file: answers from elsewhere, no training run
    whose smoke-run notice a report would carry."""
    record = Evaluation.of_results(results).try_read()
    return record is not None and record.stage == "judge"


STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in (
        Stage("curate", CuratedSplits, _curate_key, _curate),
        Stage("evaluate", Evaluation, _evaluate_key, _evaluate),
        Stage("judge", Evaluation, _judge_key, _judge),
        Stage("sft", Adapter, _sft_key, _sft),
        Stage("prefer", Adapter, _prefer_key, _prefer),
        Stage("train", Adapter, _train_key, _train, options=("callbacks",)),
        Stage("merge", Merged, _merge_key, _merge),
        Stage("report", Report, _report_key, _report, options=("training_log",), where=_in_reports),
    )
}
"""Every stage, by name: the one table the CLI, the pipeline and the Prefect tasks read."""


def stage(name: str) -> Stage:
    """The stage called `name`; an unknown name is an error naming the known ones."""
    if name not in STAGES:
        raise ArgenError(f"unknown stage {name!r}; known: {', '.join(STAGES)}")
    return STAGES[name]


def _resolved(inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs with a ``model`` spec resolved to its directory (once: a packaged model's
    resolution hashes its GGUF) and every other path as a `Path`."""
    resolved = dict(inputs)
    if "model" in resolved:
        resolved["model"] = resolve_model(str(resolved["model"]))
    return resolved


def stage_out(name: str, config: Config, /, **inputs: Any) -> Path:
    """The keyed folder `run_stage` would use for these inputs, without running anything."""
    return stage(name).folder(config, **_resolved(inputs))


def stage_key(name: str, config: Config, /, **inputs: Any) -> tuple[dict[str, Any], Path]:
    """What stage `name`'s key hashes for these inputs (content hashes of the input files,
    settings, code version; two of them differ exactly where an input changed) and the folder
    it names, `stage_out`'s."""
    return stage(name).keyed(config, **_resolved(inputs))


def is_complete(name: str, out: Path) -> bool:
    """Whether `out` holds a finished output of stage `name` (its sidecar is written last)."""
    return stage(name).output(out).is_complete()


def _reusable(entry: Stage, out: Path) -> bool:
    """Whether `out`, a keyed folder, holds this stage's complete output as its record lists
    it. A damaged, edited or older (unlisted) output is computed again, with a warning."""
    output = entry.output(out)
    if not output.is_complete():
        return False
    record = output.try_read()
    if record is None or record.stage != entry.name or record.files is None:
        log.warning("%s has no %s record listing its files: computing it again", out, entry.name)
        return False
    problems = output.problems()
    if problems:
        log.warning("%s: %s; computing it again", out, problems[0])
        return False
    return True


def run_stage(
    name: str, config: Config, out: Path | None = None, /, **inputs: Any
) -> tuple[Path, bool]:
    """Run stage `name` on `inputs`: into `out` when given (a folder `check_out` accepted),
    else into its content-keyed folder, reusing it when complete and unchanged. Inputs that
    are stage outputs must match their records. The output is sealed: its record names the
    stage and lists its files. Returns the output folder and whether it was reused."""
    entry = stage(name)
    inputs = _resolved(inputs)
    check_inputs(inputs)
    if out is None:
        out = entry.folder(config, **inputs)
        if _reusable(entry, out):
            log.info("%s is up to date: %s", name, out)
            return out, True
    out = entry.run(config, out, **inputs)
    entry.output(out).seal(name)
    return out, False


def check_out(name: str, out: Path, overwrite: bool = False) -> Path:
    """A folder the user named for stage `name`'s output: new or empty, or with `overwrite` an
    earlier output of the same stage, holding nothing its record does not list. Anything else
    is never replaced; checked before any work."""
    out = output_path(out)
    if out.exists() and not out.is_dir():
        raise ArgenError(f"--out {out} is a file, not a folder")
    if not out.is_dir() or not any(out.iterdir()):
        return out
    if not overwrite:
        raise ArgenError(
            f"--out {out} is not empty; pass --overwrite to replace an earlier {name} "
            "output there, or name a new folder"
        )
    stage(name).output(out).check_replaceable(name)
    return out


def run_curate(config: Config, out: Path | None = None) -> Path:
    """Curate into `out`, or into the keyed directory (reused when already complete)."""
    return run_stage("curate", config, out)[0]


def run_evaluate(
    config: Config, model: str, scenarios: Path, label: str, out: Path | None = None
) -> Path:
    """Evaluate `model` (a spec or directory) on `scenarios`, into `out` or a keyed directory."""
    return run_stage("evaluate", config, out, model=model, scenarios=scenarios, label=label)[0]


def run_judge(
    config: Config,
    responses: Path,
    label: str,
    tier: str | None = None,
    scope: str | None = None,
    out: Path | None = None,
) -> Path:
    """Judge the answers of a `responses` file into `out` or a keyed directory (reused when
    complete); rows without a tier or scope take `tier` / `scope`."""
    inputs = {"responses": responses, "label": label, "tier": tier, "scope": scope}
    return run_stage("judge", config, out, **inputs)[0]


def run_train(
    config: Config,
    model: str,
    train_split: Path,
    validation_split: Path,
    out: Path | None = None,
    callbacks: tuple = (),
) -> Path:
    """Train an adapter into `out` or a keyed directory (reused when complete, resumed when an
    earlier run with the same key stopped part-way)."""
    splits = {"train_split": train_split, "validation_split": validation_split}
    return run_stage("train", config, out, model=model, callbacks=callbacks, **splits)[0]


def run_merge(config: Config, model: str, adapter: Path, out: Path | None = None) -> Path:
    """Merge `adapter` into the base `model`, into `out` or a keyed directory."""
    return run_stage("merge", config, out, model=model, adapter=adapter)[0]


def run_report(
    config: Config,
    baseline: Path,
    aligned: Path,
    out: Path | None = None,
    training_log: Path | None = None,
    name: str = "argen",
) -> Path:
    """Compare two results files into `out`, or ``reports/<name>-<key>`` (reused when complete)."""
    inputs = {"baseline": baseline, "aligned": aligned, "training_log": training_log}
    return run_stage("report", config, out, name=name, **inputs)[0]


class StageRunner(Protocol):
    """How a stage runs: here, in this process, or as an orchestrator's task (a Prefect flow
    passes its own). `run_stage`'s signature, returning the output folder."""

    def run(self, name: str, config: Config, /, **inputs: Any) -> Path: ...


class InProcess:
    """Every stage in this process, reusing complete keyed outputs."""

    def run(self, name: str, config: Config, /, **inputs: Any) -> Path:
        return run_stage(name, config, **inputs)[0]


def run_pipeline(
    config: Config, name: str = "argen", runner: StageRunner | None = None
) -> dict[str, Path]:
    """The whole pipeline, the one definition of its order: curate, evaluate the baseline, warm
    start (with ``sft.enabled``), preference tuning (with ``prefer.enabled``), train,
    merge, evaluate the aligned model, compare. Returns each step's output directory."""
    run = (runner or InProcess()).run
    base = config.model.base
    curated = CuratedSplits(run("curate", config))
    test = curated.test
    baseline = run("evaluate", config, model=base, scenarios=test, label="baseline")
    splits = {"train_split": curated.train, "validation_split": curated.validation}
    trained = run_training(config, run, base, splits)
    adapter = trained["train"]
    merged = run("merge", config, model=base, adapter=adapter)
    aligned = run("evaluate", config, model=str(merged), scenarios=test, label="aligned")
    report = run(
        "report",
        config,
        baseline=Evaluation(baseline).results,
        aligned=Evaluation(aligned).results,
        training_log=Adapter(adapter).training_log,
        name=name,
    )
    outputs = {"curate": curated.path, "baseline": baseline, **trained}
    return {**outputs, "merge": merged, "aligned": aligned, "report": report}


def run_training(
    config: Config, run: Callable[..., Path], base: str, splits: dict[str, Path], grpo: bool = True
) -> dict[str, Path]:
    """The training stages in the pipeline's order, each continuing the last one's adapter: the
    warm start (with ``sft.enabled``), preference tuning (with ``prefer.enabled``) and GRPO
    (unless `grpo` is off, as a sweep of warm starts asks). Returns each stage's output."""
    outputs: dict[str, Path] = {}
    start: dict[str, Path] = {}  # the adapter the next stage continues, if any
    if config.sft.enabled:
        outputs["sft"] = run("sft", config, model=base, **splits)
        start = {"warm_start": outputs["sft"]}
    if config.prefer.enabled:
        outputs["prefer"] = run("prefer", config, model=base, **splits, **start)
        start = {"warm_start": outputs["prefer"]}
    if grpo:
        outputs["train"] = run("train", config, model=base, **splits, **start)
    return outputs
