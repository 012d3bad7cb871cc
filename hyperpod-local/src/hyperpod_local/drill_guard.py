"""The Slurm guard's drills on a local cluster: HyperPod breaks Slurm (:mod:`hyperpod_local.breakage`), the guard on
the node repairs it (``training_runtime.guard``), and jobs are submitted while it does and after.

A drill measures the time from the write of the broken state to the guard's repair (its log line on the
controller), and keeps what ``sbatch`` answered right after the write and after the repair. Used by the local
tests, which assert on it, and by ``bench/guard_drills.py``, which reports the figures (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from hyperpod_local import breakage
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.guard.service import LOG_FILE
from training_runtime.metrics.guard import GUARD_TEXTFILE, HEARTBEAT
from training_runtime.metrics.layout import TEXTFILE_DIR

POLL_S = 0.2
REPAIR_TIMEOUT_S = 60.0
"""The guard's promise: a repair within a minute of the write."""


@dataclass(frozen=True)
class Submitted:
    """What ``sbatch`` answered: its exit code and the last line it printed."""

    code: int
    line: str

    @property
    def accepted(self) -> bool:
        return self.code == 0 and self.line.startswith("Submitted batch job")


@dataclass(frozen=True)
class GuardDrill:
    kind: str
    check: str
    broken_at: float
    repaired_at: float
    during: Submitted
    """``sbatch`` started right after the write (it may wait for slurmctld)."""
    after: Submitted

    @property
    def seconds(self) -> float:
        """From the write to the guard's repair."""
        return self.repaired_at - self.broken_at


def guard_events(
    cluster: ClusterHandle, node: str, event: str | None = None, since: float = 0.0
) -> list[dict[str, Any]]:
    """The guard's log lines on ``node`` (JSON, oldest first), of one ``event`` if given, from ``since`` on."""
    result = cluster.exec(node, ["cat", LOG_FILE], timeout=30)
    found = []
    for line in result.stdout.splitlines() if result.returncode == 0 else []:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if (event is None or record.get("event") == event) and float(record.get("ts", 0)) >= since:
            found.append(record)
    return found


def last_check(cluster: ClusterHandle, node: str) -> float:
    """When the guard on ``node`` last checked (its heartbeat metric; 0 when it has not written one)."""
    result = cluster.exec(node, ["cat", f"{TEXTFILE_DIR}/{GUARD_TEXTFILE}"], timeout=30)
    for line in result.stdout.splitlines() if result.returncode == 0 else []:
        if line.startswith(HEARTBEAT + " "):
            return float(line.split()[1])
    return 0.0


def wait_checked(cluster: ClusterHandle, node: str, since: float, timeout: float = REPAIR_TIMEOUT_S) -> None:
    """Until the guard on ``node`` has checked once after ``since``."""
    deadline = time.monotonic() + timeout
    while last_check(cluster, node) <= since:
        if time.monotonic() > deadline:
            raise LocalClusterError(f"node {node}: the Slurm guard did not check within {timeout:.0f} s")
        time.sleep(POLL_S)


def wait_repair(
    cluster: ClusterHandle, node: str, check: str, since: float, timeout: float = REPAIR_TIMEOUT_S
) -> float:
    """The time of the guard's first repair of ``check`` on ``node`` after ``since``; LocalClusterError after
    ``timeout`` seconds without one."""
    deadline = time.monotonic() + timeout
    while True:
        repairs = [e for e in guard_events(cluster, node, "guard_repair", since) if e.get("check") == check]
        if repairs:
            return float(repairs[0]["ts"])
        if time.monotonic() > deadline:
            seen = guard_events(cluster, node, since=since)
            raise LocalClusterError(f"node {node}: no repair of {check} within {timeout:.0f} s; the guard said: {seen}")
        time.sleep(POLL_S)


def sbatch(cluster: ClusterHandle, node: str) -> Submitted:
    result = cluster.exec(node, ["sbatch", "--wrap", "true"], timeout=120)
    submitted = [line for line in result.stdout.splitlines() if line.startswith("Submitted batch job")]
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    return Submitted(result.returncode, (submitted or errors or [""])[-1])


def drill(cluster: ClusterHandle, kind: str, check: str, submit_on: str | None = None) -> GuardDrill:
    """Break Slurm the ``kind`` way, submit a job at once and after the guard repaired ``check``."""
    controller = cluster.layout.controllers[0].name
    node = submit_on or controller
    broken_at = breakage.break_slurm(cluster, kind, cluster.state.variant.slurm or "")
    answers: list[Submitted] = []
    during = threading.Thread(target=lambda: answers.append(sbatch(cluster, node)))
    during.start()
    try:
        repaired_at = wait_repair(cluster, controller, check, broken_at)
    finally:
        during.join(150)
    after = sbatch(cluster, node)
    return GuardDrill(kind, check, broken_at, repaired_at, answers[0] if answers else Submitted(-1, ""), after)
