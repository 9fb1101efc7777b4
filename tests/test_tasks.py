"""The stage tasks' Prefect settings, without a server: results cached as plain JSON."""

from pathlib import Path

import pytest

from argen.errors import ArgenError, JudgeOutage
from tasks import stages as t

STAGE_TASKS = [t.curate_task, t.evaluate_task, t.train_task, t.merge_task, t.report_task]


@pytest.mark.parametrize("stage_task", STAGE_TASKS, ids=lambda task: task.name)
def test_stage_results_are_cached_as_plain_json(stage_task):
    """Every stage task persists its result with a JSON serializer that has no object hooks."""
    serializer = stage_task.result_serializer
    assert stage_task.persist_result is True
    assert serializer is not None and serializer.type == "json"
    result = t.ref("curate", Path("/tmp/art/curate/abc123"))
    blob = serializer.dumps(result)
    assert blob == b'{"stage": "curate", "path": "/tmp/art/curate/abc123", "key": "abc123"}'
    assert serializer.loads(blob) == result


def test_a_result_that_is_not_plain_json_is_refused():
    """Objects are not smuggled into the cache (Prefect's default JSON hooks would encode them)."""
    with pytest.raises(TypeError):
        t.RESULT_SERIALIZER.dumps({"path": Path("/tmp/x")})
    tagged = b'{"__class__": "pathlib.PosixPath", "data": "/tmp/x"}'
    assert t.RESULT_SERIALIZER.loads(tagged) == {"__class__": "pathlib.PosixPath", "data": "/tmp/x"}


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


def test_stage_tasks_get_the_recipes_time_limit(monkeypatch):
    """`_run` gives the stage task the recipe's orchestration.stage_timeout_s."""
    from argen.config import load_config

    seen = {}

    class Recorder:
        def with_options(self, **options):
            seen.update(options)
            return lambda **parameters: t.ref(parameters["stage"], Path(parameters["out"]))

    config = load_config("default", ["orchestration.stage_timeout_s=42"])
    result = t._run(Recorder(), "curate", Path("/nonexistent/curate/k1"), config=config)
    assert seen == {"refresh_cache": True, "timeout_seconds": 42}
    assert result["reused"] is False and result["key"] == "k1"
