"""ArGen's two exception types: a problem the user must fix, and a judge outage that may pass.

They are siblings, not parent and child, so that code retrying a fault never has to rely on the
order of its ``except`` clauses to keep a user's error from being retried. A fault of the user's
machine that no retry mends (a full disk, a read-only or forbidden folder) becomes an
`ArgenError` where a stage writes (`machine_faults`); `retryable` is the one retry rule.
"""

import errno
import reprlib
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ArgenError(Exception):
    """A problem with the user's input or configuration; the message names what is wrong."""


class JudgeOutage(Exception):
    """Too many judgements failed (an outage or rate limit): a fault that may pass on retry."""


def short(value: object, limit: int = 60) -> str:
    """A value's repr cut to `limit` characters: what a message about a bad value quotes, so a
    huge value (a long `--set`, YAML aliases expanded, a damaged file) never makes a huge one.
    `reprlib` stops after a few items per level, so a nested value is never expanded whole."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 80


MACHINE_FAULTS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}
"""OS errors a retry does not mend: the user must free space or fix permissions."""
NEARLY_FULL = 64 * 2**20
"""Free bytes under which a failed write is taken for a full disk (torch and safetensors report
one without its errno)."""


def machine_fault(exc: BaseException, folder: Path) -> ArgenError | None:
    """The `ArgenError` for `exc` when it is a fault of the machine writing under `folder` (a
    full disk, no permission); None when it is something else."""
    reason = MACHINE_FAULTS.get(getattr(exc, "errno", None) or -1)
    writing = isinstance(exc, OSError | RuntimeError) or "Safetensor" in type(exc).__name__
    if reason is None and writing:
        try:
            full = shutil.disk_usage(_existing(folder)).free < NEARLY_FULL
        except OSError:
            full = False
        reason = MACHINE_FAULTS[errno.ENOSPC] if full else None
    if reason is None:
        return None
    where = getattr(exc, "filename", None) or folder
    return ArgenError(f"cannot write {where}: {reason} ({short(str(exc), 120)})")


@contextmanager
def machine_faults(folder: Path) -> Iterator[None]:
    """Turn a full disk or a permission fault while writing under `folder` into an
    `ArgenError` (exit 2, not retried); any other exception passes unchanged."""
    try:
        yield
    except Exception as exc:
        error = machine_fault(exc, folder)
        if error is None:
            raise
        raise error from exc


def retryable(exc: BaseException) -> bool:
    """Whether a failed stage may succeed when run again: a judge outage or a passing I/O
    fault may; a user's error, a machine fault and a stage past its time limit never do."""
    if isinstance(exc, ArgenError | TimeoutError):
        return False
    return getattr(exc, "errno", None) not in MACHINE_FAULTS


def _existing(path: Path) -> Path:
    """`path` or its nearest existing parent."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
