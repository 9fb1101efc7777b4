"""Which failures are the user's to mend (exit 2, never retried) and which may pass."""

import errno
from collections import namedtuple

import pytest

from argen import errors
from argen.errors import ArgenError, JudgeOutage, machine_faults, retryable, short


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
def test_a_machine_fault_while_writing_is_a_users_error(tmp_path, code):
    message = f"cannot write {tmp_path / 'x'}"
    with pytest.raises(ArgenError, match=message) as caught, machine_faults(tmp_path):
        raise OSError(code, "fault", str(tmp_path / "x"))
    assert not retryable(caught.value) and not retryable(OSError(code, "fault"))


def test_a_write_failing_on_a_full_disk_without_an_errno_is_named(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(errors.shutil, "disk_usage", lambda path: usage(10, 10, 0))
    full = pytest.raises(ArgenError, match="no space left on the device")
    with full, machine_faults(tmp_path / "not" / "yet"):
        raise RuntimeError("PytorchStreamWriter failed writing file data/0")
    with pytest.raises(ValueError), machine_faults(tmp_path):  # not a write error: left alone
        raise ValueError("a bug")


def test_other_faults_pass_unchanged_and_may_be_retried(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(errors.shutil, "disk_usage", lambda path: usage(2**40, 0, 2**40))
    with pytest.raises(RuntimeError, match="boom"), machine_faults(tmp_path):
        raise RuntimeError("boom")
    assert retryable(JudgeOutage("down")) and retryable(ConnectionResetError())
    assert not retryable(ArgenError("bad")) and not retryable(TimeoutError())


def test_short_quotes_the_start_of_a_value():
    assert short("x" * 1000).endswith("...") and len(short("x" * 1000)) == 60
    assert short(7.0) == "7.0"
