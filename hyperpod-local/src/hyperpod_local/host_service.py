"""One host-side service of a local cluster (agent, control plane, Prometheus, metadata service): start, stop, pid.

A :class:`HostService` is a daemon of the emulator on the host: it runs in a session of its own (a terminal's
signals do not reach it), appends its output to a log in its directory, and is known by a pid file there. The
pid counts only while ``/proc/<pid>/cmdline`` still names the service (:attr:`HostService.identity`), so a
stale pid file or a reused pid is "not running". Before it starts, its addresses go on the switch's bridge (the
plan: :mod:`hyperpod_local.bridge`); :meth:`HostService.start` waits until its ``ready`` check holds, and stops
it and raises :class:`HostServiceError` with its log's tail when it exits or the check times out.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hyperpod_local.bridge import BRIDGE
from hyperpod_local.paths import subprocess_env
from hyperpod_local.procs import terminate
from hyperpod_local.state import LocalClusterError

PID_FILE = "pid"


class HostServiceError(LocalClusterError):
    """A host service did not start; the message names it and has its log's last lines."""


def module_argv(module: str, workdir: Path) -> tuple[str, ...]:
    """The emulator's own daemon ``module`` of the cluster in ``workdir``, with this interpreter: ``python -m
    hyperpod_local.processes MODULE --workdir WORKDIR`` (:mod:`hyperpod_local.processes` opens the engine for it)."""
    return (sys.executable, "-m", "hyperpod_local.processes", module, "--workdir", str(workdir))


def in_netns(netns: str, argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` run inside network namespace ``netns`` (``ip netns exec`` execs it: the pid stays the service's)."""
    return ("ip", "netns", "exec", netns, *argv)


@dataclass(frozen=True)
class HostService:
    name: str
    """In messages: "the control plane"."""
    directory: Path
    """Its pid file and log."""
    argv: tuple[str, ...]
    identity: tuple[str, ...]
    """Strings its process's command line contains (e.g. its module and the cluster's work directory)."""
    log_name: str = "service.log"
    switch: str | None = None
    """The switch namespace whose bridge gets :attr:`addresses` (``a.b.c.d/nn``) before the service starts."""
    addresses: tuple[str, ...] = ()
    ready: Callable[[], bool] | None = None
    """True once it serves; None: ready once its process runs the service's program."""
    ready_timeout: float = 20.0
    ready_poll: float = 0.1

    @property
    def log(self) -> Path:
        return self.directory / self.log_name

    def pid(self) -> int | None:
        """The running service's pid, or None (no pid file, or that process is gone or is another program)."""
        try:
            pid = int((self.directory / PID_FILE).read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError):
            return None
        return pid if cmdline and all(part in cmdline for part in self.identity) else None

    def running(self) -> bool:
        return self.pid() is not None

    def start(self) -> int:
        """Start the service unless it runs; returns its pid once it is ready."""
        found = self.pid()
        if found is not None:
            return found
        self.directory.mkdir(parents=True, exist_ok=True)
        for address in self.addresses:
            assert self.switch is not None, "addresses need the switch namespace"
            argv = ["ip", "-n", self.switch, "addr", "replace", address, "dev", BRIDGE]
            subprocess.run(argv, check=True)
        with self.log.open("ab") as log:
            process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=subprocess_env(),
            )
        (self.directory / PID_FILE).write_text(f"{process.pid}\n")
        deadline = time.monotonic() + self.ready_timeout
        # Its command line first: the kernel lets Popen return before it has set the new program's arguments, so
        # for a moment /proc/<pid>/cmdline is empty and the service would not count as running.
        while self.pid() != process.pid or (self.ready is not None and not self.ready()):
            if process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log.read_text(errors="replace").strip().splitlines()[-3:]
                raise HostServiceError(
                    f"{self.name} did not start within {self.ready_timeout:.0f} s: {' | '.join(tail)} (log: {self.log})"
                )
            time.sleep(self.ready_poll)
        return process.pid

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the service and wait until it is gone (reaped when this process started it)."""
        pid = self.pid()
        if pid is not None:
            terminate(pid, self.running, timeout)
        (self.directory / PID_FILE).unlink(missing_ok=True)
