"""Stopping the host-side daemons the emulator starts (the agent, the Prometheus server)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable


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
