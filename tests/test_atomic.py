"""Atomic outputs under real concurrency, and the sweep of what dead writers left behind."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from argen.atomic import (
    STALE_AGE_S,
    atomic_dir,
    owned_dir,
    sweep_stale,
    sweep_work_dirs,
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


WRITER = """
import sys, time
from pathlib import Path
from argen.atomic import atomic_dir, atomic_file
with atomic_dir(Path(sys.argv[1])) as tmp, atomic_file(Path(sys.argv[2])) as tmp_file:
    (tmp / "part").write_text("half")
    print(tmp, tmp_file, flush=True)
    time.sleep(120)
"""


def start_writer(folder, name):
    """A real process inside atomic_dir and atomic_file; returns it and its temporaries."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder / name), str(folder / f"{name}.json")],
        stdout=subprocess.PIPE,
        text=True,
    )
    paths = proc.stdout.readline().split()
    assert len(paths) == 2, "the writer did not start"
    return proc, [folder / os.path.basename(p) for p in paths]


def test_a_dead_writers_temporaries_are_swept_and_a_live_ones_kept(tmp_path):
    dead, dead_tmps = start_writer(tmp_path, "x")
    live, live_tmps = start_writer(tmp_path, "y")
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        assert all(p.exists() for p in dead_tmps + live_tmps)
        with atomic_dir(tmp_path / "z") as tmp:  # any writer in the folder sweeps
            (tmp / "done").write_text("ok")
        assert not any(p.exists() for p in dead_tmps), "a dead writer's temporaries remain"
        assert all(p.exists() for p in live_tmps), "a live writer's temporary was removed"
    finally:
        live.kill()
        live.wait()


def test_temporaries_whose_owner_cannot_be_told_are_swept_only_when_old(tmp_path):
    old = tmp_path / ".x.tmp-k2j4abcd"  # a name from before owners were recorded
    old.mkdir()
    foreign = tmp_path / ".y.json.tmp-0badb00f-1-2-zz"  # another machine's or boot's
    foreign.write_text("{}")
    recent = tmp_path / ".z.tmp-q9w8e7r6"
    recent.mkdir()
    theirs = [tmp_path / ".notes.tmp-backup", tmp_path / "x.tmp-k2j4abcd", tmp_path / "y.partial"]
    for path in theirs:
        path.write_text("someone else's")
    long_ago = time.time() - STALE_AGE_S - 60
    for path in (old, foreign, *theirs):
        os.utime(path, (long_ago, long_ago))
    assert sorted(sweep_stale(tmp_path)) == sorted([old, foreign])
    assert recent.exists() and all(p.exists() for p in theirs), "not ours to remove"


HOLDER = """
import sys, time
from pathlib import Path
from argen.atomic import owned_dir
with owned_dir(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


def test_work_folders_are_swept_only_when_nobody_holds_them_and_they_are_stale(tmp_path):
    held, unheld_stale, unheld_needed = (tmp_path / f"{n}.partial" for n in "abc")
    for folder in (unheld_stale, unheld_needed):
        with owned_dir(folder):
            pass  # a run that stopped
    not_ours = tmp_path / "notes.partial"
    not_ours.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(held)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        removed = sweep_work_dirs(tmp_path, ".partial", lambda f: f != unheld_needed)
        assert removed == [unheld_stale]
        assert held.is_dir() and unheld_needed.is_dir()
    finally:
        holder.kill()
        holder.wait()
    assert sweep_work_dirs(tmp_path, ".partial", lambda f: f != unheld_needed) == [held]
    assert not_ours.is_dir() and not list(not_ours.iterdir()), "a folder owned_dir never made"


def test_a_second_owner_waits_for_the_first(tmp_path):
    folder = tmp_path / "w.partial"
    order = []
    with owned_dir(folder):
        waiter = threading.Thread(target=lambda: _hold_briefly(folder, order))
        waiter.start()
        time.sleep(0.5)
        order.append("first done")
        shutil.rmtree(folder)  # as a finished training removes its work folder
    waiter.join(10)
    assert order == ["first done", "second holds"]
    assert (folder / ".owner.lock").is_file()  # the second got a folder of its own


def _hold_briefly(folder, order) -> None:
    """Take `folder` and note when we got it."""
    with owned_dir(folder):
        order.append("second holds")
