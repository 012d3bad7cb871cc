"""files.HolderLock: the one non-blocking, holder-recording flock (bootstrap, PyTorch build, ssh keys)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from training_runtime import files
from training_runtime.errors import StepFailed
from training_runtime.files import HolderLock
from training_runtime.retry import NotReady, RetryPolicy

QUICK = RetryPolicy(attempts=None, base_s=0.01, cap_s=0.02, deadline_s=0.2)


def test_one_holder_at_a_time_and_the_holder_is_named(tmp_path: Path) -> None:
    first, second = HolderLock(tmp_path / "a.lock"), HolderLock(tmp_path / "a.lock")
    assert first.acquire()
    first.record("node-1 pid 42")
    assert not second.acquire()  # a separate open file description conflicts, even in one process
    with pytest.raises(NotReady, match=r"a\.lock is held \(node-1 pid 42\)"):
        second.take(QUICK, what="the test lock")
    assert second.holder() == "node-1 pid 42"
    first.release()
    second.take(QUICK, what="the test lock")  # free again: taken at once
    second.record("node-2")
    assert (tmp_path / "a.lock").read_text() == "node-2"  # the record replaces the old one
    with second:
        pass
    assert second.fd is None and first.acquire()  # leaving the block released it


def test_a_file_system_without_flock_fails_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(files.fcntl, "flock", no_flock)
    with pytest.raises(StepFailed, match=r"does not support flock\. Fix: mount FSx for Lustre with the flock option"):
        HolderLock(tmp_path / "b.lock").acquire()


def test_holder_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert HolderLock(tmp_path / "none.lock").holder() == ""
