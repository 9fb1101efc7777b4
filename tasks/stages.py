"""One Prefect task per stage: a thin wrapper of the library's stage (`argen.pipeline`) that adds
a name, retries and the retry condition. The library is the one cache: each stage writes under
a content-keyed directory and reuses it when complete, so Prefect caches nothing. Stages hand
each other small references: the output path, its key and whether it was reused."""

from pathlib import Path

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.tasks import exponential_backoff

from argen import console, pipeline
from argen.config import Config
from argen.errors import ArgenError
from argen.models import resolve_model
from argen.outputs import CuratedSplits


def retry_unless_bad_input(task, task_run, state) -> bool:
    """Retry faults that can pass (a judge outage, I/O); never a bad config, bad input or a
    stage that ran past its time limit (it would only run past it again)."""
    try:
        state.result()
    except (ArgenError, TimeoutError):
        return False
    except Exception:  # a JudgeOutage among them
        return True
    return False


def ref(stage: str, out: Path, reused: bool = False) -> dict:
    """What stages pass each other: where the output is, its content key, whether it was reused."""
    return {"stage": stage, "path": str(out), "key": out.name, "reused": reused}


STAGE_TASK = dict(
    cache_policy=NO_CACHE,
    persist_result=False,
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=2),
    retry_jitter_factor=0.2,
    retry_condition_fn=retry_unless_bad_input,
)


def _run(stage_task: Task, title: str, config: Config, *args) -> dict:
    """Run a stage task with the recipe's time limit, between a start and an end line on the
    console (the end line names the output and says whether it was reused)."""
    timeout = config.orchestration.stage_timeout_s
    with console.stage(title) as span:
        result = stage_task.with_options(timeout_seconds=timeout)(config, *args)
        span.out, span.reused = result["path"], result["reused"]
    return result


@task(name="curate", task_run_name="curate scenarios", **STAGE_TASK)
def curate_task(config: Config) -> dict:
    return ref("curate", *pipeline.keyed("curate", pipeline.curate_out(config), config))


@task(name="evaluate", task_run_name="evaluate {label}", **STAGE_TASK)
def evaluate_task(config: Config, model: str, scenarios: str, label: str) -> dict:
    model_dir = resolve_model(model)  # once: a packaged model's resolution hashes its file
    out = pipeline.evaluate_out(config, model_dir, Path(scenarios), label)
    inputs = (str(model_dir), Path(scenarios), label)
    return ref("evaluate", *pipeline.keyed("evaluate", out, config, *inputs))


@task(name="train", task_run_name="train on {curated}", **STAGE_TASK)
def train_task(config: Config, model: str, curated: str, callbacks: tuple = ()) -> dict:
    splits = CuratedSplits(curated)
    model_dir = resolve_model(model)
    out = pipeline.train_out(config, model_dir, splits.train, splits.validation)
    inputs = (str(model_dir), splits.train, splits.validation)
    return ref("train", *pipeline.keyed("train", out, config, *inputs, callbacks=callbacks))


@task(name="merge", task_run_name="merge adapter into base", **STAGE_TASK)
def merge_task(config: Config, model: str, adapter: str) -> dict:
    model_dir = resolve_model(model)
    out = pipeline.merge_out(config, model_dir, Path(adapter))
    return ref("merge", *pipeline.keyed("merge", out, config, str(model_dir), Path(adapter)))


@task(name="report", task_run_name="report {name}", **STAGE_TASK)
def report_task(
    config: Config, baseline: str, aligned: str, training_log: str | None, name: str
) -> dict:
    out = pipeline.report_out(config, Path(baseline), Path(aligned), name)
    log = Path(training_log) if training_log else None
    inputs = (Path(baseline), Path(aligned))
    return ref(
        "report", *pipeline.keyed("report", out, config, *inputs, training_log=log, name=name)
    )


def curate(config: Config) -> dict:
    return _run(curate_task, "curate", config)


def evaluate(config: Config, model: str, scenarios: str, label: str) -> dict:
    return _run(evaluate_task, f"evaluate {label}", config, model, scenarios, label)


def train(config: Config, model: str, curated: str, callbacks: tuple = ()) -> dict:
    return _run(train_task, "train", config, model, curated, callbacks)


def merge(config: Config, model: str, adapter: str) -> dict:
    return _run(merge_task, "merge", config, model, adapter)


def report(
    config: Config, baseline: str, aligned: str, training_log: str | None, name: str
) -> dict:
    return _run(report_task, f"report {name}", config, baseline, aligned, training_log, name)
