"""The emulator's host-side daemons (agent, Prometheus server) are stopped and reaped: a long-lived caller such
as a test session or a drill must not keep zombies of them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hyperpod_local.procs import terminate


def test_a_daemon_this_process_started_is_stopped_and_reaped() -> None:
    daemon = subprocess.Popen(["sleep", "60"], start_new_session=True)
    pid = daemon.pid
    del daemon  # as the emulator keeps only the pid file, not the Popen object
    terminate(pid, lambda: Path(f"/proc/{pid}").exists(), timeout=5)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie left


def test_a_daemon_another_process_started_is_waited_for_until_it_is_gone() -> None:
    # The shell starts sleep and exits: sleep is not our child, so terminate can only watch it go.
    out = subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True, check=True)
    pid = int(out.stdout)
    terminate(pid, lambda: Path(f"/proc/{pid}").exists(), timeout=10)
    assert not Path(f"/proc/{pid}").exists()
