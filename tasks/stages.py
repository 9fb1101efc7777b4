"""Prefect tasks: one per stage of the library's table (`argen.pipeline.STAGES`), each one call of
`argen.pipeline.run_stage` with a name, retries and the retry condition. The library is the one
cache: each stage writes under a content-keyed directory and reuses it when complete, so Prefect
caches nothing. Stages hand each other small references: the output path, its key and whether it
was reused."""

from pathlib import Path
from typing import Any, cast

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.tasks import exponential_backoff

from argen import console
from argen.config import Config
from argen.errors import ArgenError
from argen.pipeline import run_stage


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


STAGE_TASK: dict[str, Any] = dict(
    cache_policy=NO_CACHE,
    persist_result=False,
    retries=3,
    retry_delay_seconds=exponential_backoff(backoff_factor=2),
    retry_jitter_factor=0.2,
    retry_condition_fn=retry_unless_bad_input,
)


TASKS: dict[str, Task] = {}
"""Each stage's Prefect task, by name (`run` runs them)."""
TITLES: dict[str, str] = {}
"""What the console and the Prefect UI call a run of each stage, formatted with its inputs."""


def stage_task(name: str, title: str) -> None:
    """Make the Prefect task of stage `name` (`run_stage` on its inputs); `title` names its runs
    and console lines, formatted with those inputs: ``"evaluate {label}"``."""

    def run(config: Config, inputs: dict[str, Any]) -> dict:
        return ref(name, *run_stage(name, config, **inputs))

    def run_name(parameters: dict[str, Any]) -> str:
        return title.format(**parameters["inputs"])

    TASKS[name] = task(name=name, task_run_name=cast(Any, run_name), **STAGE_TASK)(run)
    TITLES[name] = title


stage_task("curate", "curate")
stage_task("evaluate", "evaluate {label}")
stage_task("judge", "judge {label}")
stage_task("sft", "warm start")
stage_task("prefer", "preference tuning")
stage_task("train", "train")
stage_task("merge", "merge")
stage_task("report", "report {name}")


def title(name: str, inputs: dict[str, Any]) -> str:
    """This run of stage `name` as the console and the UI name it: ``evaluate baseline``."""
    return TITLES[name].format(**inputs)


def _run(stage_task: Any, title: str, config: Config, *args: Any) -> dict:
    """Run a stage task with the recipe's time limit, between a start and an end line on the
    console (the end line names the output and says whether it was reused)."""
    timeout = config.orchestration.stage_timeout_s
    with console.stage(title) as span:
        result = stage_task.with_options(timeout_seconds=timeout)(config, *args)
        span.out, span.reused = result["path"], result["reused"]
    return result


def run(name: str, config: Config, /, **inputs: Any) -> dict:
    """Stage `name` as its Prefect task, in this flow run; returns its reference."""
    return _run(TASKS[name], title(name, inputs), config, inputs)
