"""One Prefect task per stage, called through a small function that computes the stage's
content-keyed output directory (input file hashes, config section, code version: the same
directory `argen.stages` uses). That directory's name is the cache key, and a cached result
whose files are gone is refreshed instead of reused. Stages hand each other small references:
the output path and its key."""

from pathlib import Path

from prefect import Task, task
from prefect.serializers import JSONSerializer
from prefect.tasks import exponential_backoff

from argen import console, stages
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


def ref(stage: str, out: Path) -> dict:
    """What stages pass each other: where the output is and which content key it has."""
    return {"stage": stage, "path": str(out), "key": out.name}


def by_output(context, parameters: dict) -> str:
    """Cache key: the stage and its content-keyed output directory."""
    return f"argen-{parameters['stage']}-{Path(parameters['out']).name}"


# Results are small references (`ref`): cached as plain JSON, never pickle, and with no
# object hooks, so reading a cache record cannot import or build arbitrary objects.
RESULT_SERIALIZER = JSONSerializer(object_encoder=None, object_decoder=None)

STAGE_TASK = dict(
    cache_key_fn=by_output,
    persist_result=True,
    result_serializer=RESULT_SERIALIZER,
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=2),
    retry_jitter_factor=0.2,
    retry_condition_fn=retry_unless_bad_input,
)


def _run(stage_task: Task, stage: str, out: Path, **parameters) -> dict:
    """Run a stage task with the recipe's time limit, between a start and an end line on the
    console; ``reused`` says it recomputed nothing."""
    fresh = not stages.is_complete(stage, out)
    timeout = parameters["config"].orchestration.stage_timeout_s
    options = stage_task.with_options(refresh_cache=fresh, timeout_seconds=timeout)
    name = " ".join([stage, *[parameters[k] for k in ("label", "name") if k in parameters]])
    with console.stage(name, out, reused=not fresh):
        result = options(stage=stage, out=str(out), **parameters)
    return {**result, "reused": not fresh}


@task(name="curate", task_run_name="curate scenarios", **STAGE_TASK)
def curate_task(stage: str, out: str, config: Config) -> dict:
    return ref(stage, stages.run_curate(config, Path(out)))


@task(name="evaluate", task_run_name="evaluate {label}", **STAGE_TASK)
def evaluate_task(
    stage: str, out: str, config: Config, model: str, scenarios: str, label: str
) -> dict:
    return ref(stage, stages.run_evaluate(config, model, Path(scenarios), label, Path(out)))


@task(name="train", task_run_name="train on {curated}", **STAGE_TASK)
def train_task(
    stage: str, out: str, config: Config, model: str, curated: str, callbacks: tuple = ()
) -> dict:
    splits = CuratedSplits(curated)
    return ref(
        stage,
        stages.run_train(
            config,
            model,
            splits.train,
            splits.validation,
            Path(out),
            callbacks,
        ),
    )


@task(name="merge", task_run_name="merge adapter into base", **STAGE_TASK)
def merge_task(stage: str, out: str, config: Config, model: str, adapter: str) -> dict:
    return ref(stage, stages.run_merge(config, model, Path(adapter), Path(out)))


@task(name="report", task_run_name="report {name}", **STAGE_TASK)
def report_task(
    stage: str,
    out: str,
    config: Config,
    baseline: str,
    aligned: str,
    training_log: str | None,
    name: str,
) -> dict:
    log = Path(training_log) if training_log else None
    return ref(
        stage, stages.run_report(config, Path(baseline), Path(aligned), Path(out), log, name)
    )


def curate(config: Config) -> dict:
    return _run(curate_task, "curate", stages.curate_out(config), config=config)


def evaluate(config: Config, model: str, scenarios: str, label: str) -> dict:
    out = stages.evaluate_out(config, resolve_model(model), Path(scenarios), label)
    return _run(
        evaluate_task, "evaluate", out, config=config, model=model, scenarios=scenarios, label=label
    )


def train(config: Config, model: str, curated: str, callbacks: tuple = ()) -> dict:
    splits = CuratedSplits(curated)
    out = stages.train_out(config, resolve_model(model), splits.train, splits.validation)
    return _run(
        train_task, "train", out, config=config, model=model, curated=curated, callbacks=callbacks
    )


def merge(config: Config, model: str, adapter: str) -> dict:
    out = stages.merge_out(config, resolve_model(model), Path(adapter))
    return _run(merge_task, "merge", out, config=config, model=model, adapter=adapter)


def report(
    config: Config, baseline: str, aligned: str, training_log: str | None, name: str
) -> dict:
    out = stages.report_out(config, Path(baseline), Path(aligned), name)
    return _run(
        report_task,
        "report",
        out,
        config=config,
        baseline=baseline,
        aligned=aligned,
        training_log=training_log,
        name=name,
    )
