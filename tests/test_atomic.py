"""Atomic outputs under real concurrency, and the sweep of what dead writers left behind."""

import threading
from pathlib import Path

import pytest

from argen.atomic import (
    atomic_dir,
)
from argen.errors import ArgenError

FILES = ("a.txt", "b.txt", "manifest.json")


def race(target, writers: int, trial: int) -> list[BaseException]:
    """`writers` threads finish the same output at the same moment; returns their errors."""
    barrier = threading.Barrier(writers)
    errors = []

    def write(me: int) -> None:
        try:
            with atomic_dir(target) as tmp:
                for name in FILES:
                    (tmp / name).write_text(f"{trial}-{me}")
                barrier.wait()  # every writer is complete: all commit together
        except BaseException as exc:  # noqa: BLE001 (the test reports whatever escapes)
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def one_complete_output(target, trial: int) -> None:
    """The target holds exactly one writer's files, all of them, and nothing is left beside."""
    contents = {(target / name).read_text() for name in FILES}
    assert len(contents) == 1 and contents.pop().startswith(f"{trial}-")
    assert sorted(p.name for p in target.iterdir()) == sorted(FILES)
    assert [p.name for p in target.parent.iterdir()] == [target.name], "a temporary was left"


def test_concurrent_finishers_of_one_output_all_succeed(tmp_path):
    for trial in range(150):
        target = tmp_path / f"t{trial}" / "out"
        assert race(target, 4, trial) == []
        one_complete_output(target, trial)


def test_concurrent_replacers_of_an_earlier_output_all_succeed(tmp_path):
    for trial in range(100):
        target = tmp_path / f"t{trial}" / "out"
        target.mkdir(parents=True)
        (target / "stale.txt").write_text("an earlier, incomplete output")
        assert race(target, 3, trial) == []
        one_complete_output(target, trial)


def test_a_failed_writer_leaves_the_earlier_output_and_no_temporary(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("first")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("second")
        raise RuntimeError("stage failed")
    assert (target / "a.txt").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_the_current_directory_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    work = tmp_path / "here"
    work.mkdir()
    monkeypatch.chdir(work)
    for target in (Path("."), Path(".."), work):
        with pytest.raises(ArgenError, match="current directory"), atomic_dir(target):
            pass
    assert [p.name for p in tmp_path.iterdir()] == ["here"] and not list(work.iterdir())
