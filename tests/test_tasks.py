"""The stage tasks' Prefect settings, without a server: no Prefect cache (the library's keyed
directories are the one cache), retries only for faults that can pass, the recipe's time limit."""

import pytest
from prefect.cache_policies import NO_CACHE

from argen.config import load_config
from argen.errors import ArgenError, JudgeOutage
from argen.pipeline import STAGES
from tasks import stages as t

STAGE_TASKS = list(t.TASKS.values())


def test_every_stage_of_the_table_has_its_task():
    assert list(t.TASKS) == list(STAGES)
    assert [task.name for task in STAGE_TASKS] == list(STAGES)
    assert t.title("evaluate", {"label": "baseline", "model": "m"}) == "evaluate baseline"
    assert t.title("report", {"name": "line"}) == "report line"


def test_a_task_is_one_call_of_run_stage(tmp_path, monkeypatch):
    """The task runs `run_stage` with the stage's name and its inputs, and hands on the
    reference (run here through Prefect's own task call, without a server)."""
    import tasks.stages

    seen = []

    def run_stage(name, config, /, **inputs):
        seen.append((name, inputs))
        return tmp_path / name / "k1", True

    monkeypatch.setattr(tasks.stages, "run_stage", run_stage)
    config = load_config()
    result = t.TASKS["evaluate"].fn(config, {"model": "m", "scenarios": "s", "label": "x"})
    assert seen == [("evaluate", {"model": "m", "scenarios": "s", "label": "x"})]
    assert result == {
        "stage": "evaluate",
        "path": str(tmp_path / "evaluate" / "k1"),
        "key": "k1",
        "reused": True,
    }


@pytest.mark.parametrize("stage_task", STAGE_TASKS, ids=lambda task: task.name)
def test_stage_tasks_cache_nothing_and_retry(stage_task):
    """Prefect neither caches nor persists a stage's result: reuse is the library's alone."""
    assert stage_task.cache_policy is NO_CACHE
    assert stage_task.persist_result is False
    assert stage_task.retries == 3
    assert stage_task.retry_condition_fn is t.retry_unless_bad_input


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (JudgeOutage("judge down"), True),
        (OSError("disk hiccup"), True),
        (ArgenError("bad input"), False),
        (TimeoutError("Task run exceeded timeout of 5 second(s)"), False),
    ],
)
def test_retry_policy(error, retried):
    """Transient faults are retried; bad input and a stage past its time limit are not."""
    from prefect.states import Failed

    assert t.retry_unless_bad_input(None, None, Failed(data=error)) is retried


@pytest.mark.parametrize("reused", [False, True])
def test_stage_tasks_get_the_recipes_time_limit_and_say_whether_they_reused(tmp_path, reused):
    """`_run` gives the stage task the recipe's orchestration.stage_timeout_s and hands on the
    task's reference, which says whether the library reused the output."""
    seen = {}

    class Recorder:
        def with_options(self, **options):
            seen.update(options)
            return lambda config, *args: t.ref("curate", tmp_path / "curate" / "k1", reused)

    config = load_config("default", ["orchestration.stage_timeout_s=42"])
    result = t._run(Recorder(), "curate", config)
    assert seen == {"timeout_seconds": 42}
    assert result == {
        "stage": "curate",
        "path": str(tmp_path / "curate" / "k1"),
        "key": "k1",
        "reused": reused,
    }
