"""The stage tasks' Prefect settings, without a server: results cached as plain JSON."""

from pathlib import Path

import pytest

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
