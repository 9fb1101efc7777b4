"""Write outputs under a temporary name and rename when complete, so nothing partial looks done.

Temporary names carry their owner (boot, pid and process start time): leftovers of a process
that died are removed by the next writer in the same folder, and a live writer's never are.
Work folders that outlive a process on purpose (training's ``<out>.partial``) are owned through
a lock file instead, which the kernel releases when the owner dies.
"""

import errno
import fcntl
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from argen.errors import ArgenError

log = logging.getLogger(__name__)

STALE_AGE_S = 24 * 3600
"""A temporary whose owner cannot be checked (another machine, an older name) is stale after
this long untouched."""
TMP_MARK = ".tmp-"
_OWNED = re.compile(r"\..+\.tmp-([0-9a-f]{8})-(\d+)-(\d+)-\w+")
_UNOWNED = re.compile(r"\..+\.(tmp-[a-z0-9_]{8}|old-\d+)")
"""Names this module gave temporaries before they named their owner."""
LOCK_NAME = ".owner.lock"


@cache
def _boot_id() -> str:
    """This boot of this machine (pids and start times mean something only within one)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:8]
    except OSError:
        return "00000000"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot; None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces and brackets
    return None if fields[0] in "ZX" else fields[19]


def owner_tag() -> str:
    """``<boot>-<pid>-<start>``: names this process unambiguously on this machine."""
    return f"{_boot_id()}-{os.getpid()}-{_start_time(os.getpid()) or 0}"


def _owner_alive(name: str) -> bool | None:
    """Whether the process named in a temporary's name still runs; None when it cannot be told."""
    match = _OWNED.fullmatch(name)
    if not match or match.group(1) != _boot_id() or match.group(3) == "0":
        return None
    return _start_time(int(match.group(2))) == match.group(3)


def _remove(path: Path) -> None:
    """Delete a file or a folder (never following a link)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def sweep_stale(folder: Path) -> list[Path]:
    """Remove temporaries in `folder` left by dead processes (or, when the owner cannot be
    checked, untouched for STALE_AGE_S); returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for path in entries:
        if not _OWNED.fullmatch(path.name) and not _UNOWNED.fullmatch(path.name):
            continue  # not one of ours
        alive = _owner_alive(path.name)
        if alive is None:
            try:
                alive = time.time() - path.lstat().st_mtime < STALE_AGE_S
            except OSError:
                continue
        if not alive:
            log.warning("removing %s, left by a process that is gone", path)
            _remove(path)
            removed.append(path)
    return removed


def output_path(target: Path) -> Path:
    """`target` made absolute; an output may not replace the current directory or one above it."""
    target = Path(os.path.abspath(target))
    cwd = Path.cwd()
    if target == cwd or target in cwd.parents:
        raise ArgenError(
            f"output {target} is the current directory or contains it; name a new folder"
        )
    return target


def _tmp_prefix(target: Path) -> str:
    """Hidden, beside `target`, and naming its owner so a sweep can tell a dead one's."""
    return f".{target.name}{TMP_MARK}{owner_tag()}-"


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of `path` itself, None when absent: tells a replaced entry from the old."""
    try:
        stat = path.lstat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def _commit(tmp: Path, target: Path, before: tuple[int, int] | None) -> bool:
    """Rename `tmp` onto `target`. A target that was there when we started is replaced; one
    that appeared meanwhile is a concurrent finisher's complete output and is kept (False)."""
    while True:
        try:
            tmp.rename(target)
            return True
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        current = identity(target)
        if current is None:
            continue  # a replacer moved it aside a moment ago: try again
        if current != before:
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        aside = target.with_name(f"{_tmp_prefix(target)}old{uuid.uuid4().hex[:8]}")
        try:
            target.rename(aside)
        except FileNotFoundError:
            continue
        before = None  # from here on any target there is someone else's new output
        try:
            return _commit(tmp, target, before)
        finally:
            shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a fresh temporary directory beside `target`; on success it becomes `target`.

    An earlier `target` is replaced; if another writer finishes the same `target` while this
    one works, theirs is kept and ours discarded (outputs are keyed by content). On an
    exception the temporary directory is removed and `target` is left as it was.
    """
    target = output_path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(target.parent)
    before = identity(target)
    tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(target), dir=target.parent))
    try:
        tmp.chmod(0o755)
        yield tmp
        if not _commit(tmp, target, before):
            log.info("another run finished %s first; keeping its output", target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextmanager
def atomic_file(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success it is renamed onto `target`."""
    target = output_path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(target.parent)
    fd, name = tempfile.mkstemp(prefix=_tmp_prefix(target), dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)


def _lock(folder: Path, wait: bool) -> int | None:
    """An exclusive lock on `folder`'s lock file (an fd), held until closed or the process
    dies. With `wait` the folder is created and we wait for a live holder; without, None when
    it is held, gone or has no lock file (a folder owned_dir never made)."""
    while True:
        if wait:
            folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(folder / LOCK_NAME, os.O_RDWR | (os.O_CREAT if wait else 0), 0o644)
        except FileNotFoundError:
            if wait:
                continue  # swept away between mkdir and open
            return None  # not a work folder of ours (or gone)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                os.close(fd)
                return None
            log.info("another run is working in %s; waiting for it", folder)
            fcntl.flock(fd, fcntl.LOCK_EX)
        held = os.fstat(fd)
        if identity(folder / LOCK_NAME) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)  # the holder removed the folder before letting go: start again
        if not wait:
            return None


@contextmanager
def owned_dir(folder: Path) -> Iterator[Path]:
    """Hold `folder` (created if needed) as this process's work folder; a second process
    asking for the same folder waits until the first is done with it or dies."""
    fd = _lock(folder, wait=True)
    assert fd is not None  # with `wait`, _lock returns only once it holds the lock
    try:
        yield folder
    finally:
        os.close(fd)


def sweep_work_dirs(parent: Path, suffix: str, stale: Callable[[Path], bool]) -> list[Path]:
    """Remove the `*suffix` work folders in `parent` (made by owned_dir: others are never
    touched) that no live process holds and `stale` says are of no use; returns them."""
    removed = []
    for folder in sorted(parent.glob(f"*{suffix}")):
        if not folder.is_dir() or folder.is_symlink():
            continue
        fd = _lock(folder, wait=False)
        if fd is None:
            continue
        try:
            if stale(folder):
                log.warning("removing %s, a work folder nobody holds and nobody needs", folder)
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        finally:
            os.close(fd)
    return removed
