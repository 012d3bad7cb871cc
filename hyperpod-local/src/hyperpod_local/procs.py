"""Host processes: starting, stopping (and reaping) the emulator's daemons (the agent, the control plane, the
Prometheus server), and reading a process's children and state from /proc (a node's PID 1 and its launcher)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hyperpod_local.paths import subprocess_env


def spawn_module(module: str, workdir: Path, log_file: Path) -> subprocess.Popen[bytes]:
    """Start the daemon ``module`` of the cluster in ``workdir`` (``python -m hyperpod_local.processes MODULE
    --workdir WORKDIR``: :mod:`hyperpod_local.processes`) in its own session, so a terminal's signals do not reach
    it, appending its output to ``log_file``. Its command line carries ``module`` and ``workdir``."""
    with log_file.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "hyperpod_local.processes", module, "--workdir", str(workdir)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=subprocess_env(),
        )


def terminate(pid: int, running: Callable[[], bool], timeout: float) -> None:
    """SIGTERM ``pid`` and wait until ``running()`` is false, reaping it when this process started it (a
    long-lived caller, such as a test session or a drill, would otherwise keep one zombie per cluster)."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # started by another process (e.g. an earlier `up`): it reaps it
            if not running():
                return
        time.sleep(0.05)


def reap(pid: int, timeout: float) -> None:
    """Wait up to ``timeout`` for ``pid`` to exit and reap it, when it is this process's child (another
    process's child is reaped by that process or the host's init)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            return
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int:
    return int(stat_fields(pid)[19])


def is_zombie(pid: int) -> bool:
    try:
        return stat_fields(pid)[0] in ("Z", "X")
    except OSError:
        return True
