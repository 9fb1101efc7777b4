"""One Prefect task per stage. Each calls `argen.stages`, keys its cache on the content-keyed
output directory the stage itself would use (input file hashes, config section, code version),
and hands the next stage a small reference: the output path and its key."""

from pathlib import Path

from prefect import task
from prefect.tasks import exponential_backoff

from argen import stages
from argen.config import Config
from argen.errors import ArgenError, JudgeOutage
from argen.models import resolve_model


def retry_unless_bad_input(task, task_run, state) -> bool:
    """Retry faults that can pass (a judge outage, I/O); never a bad config or bad input."""
    try:
        state.result()
    except JudgeOutage:
        return True
    except ArgenError:
        return False
    except Exception:
        return True
    return False


def ref(stage: str, out: Path) -> dict:
    """What stages pass each other: where the output is and which content key it has."""
    return {"stage": stage, "path": str(out), "key": out.name}


def _key_if_complete(stage: str, out: Path) -> str:
    # A cache entry whose files were deleted must not be reused: the key then differs.
    return f"argen-{stage}-{out.name}" + ("" if stages.is_complete(stage, out) else "-pending")


RETRYING = dict(
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=2),
    retry_jitter_factor=0.2,
    retry_condition_fn=retry_unless_bad_input,
    persist_result=True,
)


@task(
    name="curate",
    task_run_name="curate scenarios",
    cache_key_fn=lambda ctx, p: _key_if_complete("curate", stages.curate_out(p["config"])),
    **RETRYING,
)
def curate(config: Config) -> dict:
    return ref("curate", stages.run_curate(config))


def _evaluate_key(ctx, p) -> str:
    model_dir = resolve_model(p["model"])
    out = stages.evaluate_out(p["config"], model_dir, Path(p["scenarios"]), p["label"])
    return _key_if_complete("evaluate", out)


@task(name="evaluate", task_run_name="evaluate {label}", cache_key_fn=_evaluate_key, **RETRYING)
def evaluate(config: Config, model: str, scenarios: str, label: str) -> dict:
    return ref("evaluate", stages.run_evaluate(config, model, Path(scenarios), label))


def _train_key(ctx, p) -> str:
    curated = Path(p["curated"])
    out = stages.train_out(
        p["config"],
        resolve_model(p["model"]),
        curated / "train.parquet",
        curated / "validation.parquet",
    )
    return _key_if_complete("train", out)


@task(name="train", task_run_name="train {model}", cache_key_fn=_train_key, **RETRYING)
def train(config: Config, model: str, curated: str, callbacks: tuple = ()) -> dict:
    curated_dir = Path(curated)
    out = stages.run_train(
        config,
        model,
        curated_dir / "train.parquet",
        curated_dir / "validation.parquet",
        callbacks=callbacks,
    )
    return ref("train", out)


def _merge_key(ctx, p) -> str:
    out = stages.merge_out(p["config"], resolve_model(p["model"]), Path(p["adapter"]))
    return _key_if_complete("merge", out)


@task(name="merge", task_run_name="merge adapter into base", cache_key_fn=_merge_key, **RETRYING)
def merge(config: Config, model: str, adapter: str) -> dict:
    return ref("merge", stages.run_merge(config, model, Path(adapter)))


def _report_key(ctx, p) -> str:
    out = stages.report_out(p["config"], Path(p["baseline"]), Path(p["aligned"]), p["name"])
    return _key_if_complete("report", out)


@task(name="report", task_run_name="report {name}", cache_key_fn=_report_key, **RETRYING)
def report(
    config: Config, baseline: str, aligned: str, training_log: str | None, name: str
) -> dict:
    out = stages.run_report(
        config,
        Path(baseline),
        Path(aligned),
        training_log=Path(training_log) if training_log else None,
        name=name,
    )
    return ref("report", out)
