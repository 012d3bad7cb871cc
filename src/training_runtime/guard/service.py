"""The guard's loop: check, repair what the table says to repair, report the rest, then wait for the next change.

:class:`Guard` is one check of the node (:meth:`Guard.check`): it applies the repairs the table allows on this role
(:func:`training_runtime.guard.table.repairs`), sends the controller's repaired files out with ``scontrol
reconfigure`` (slurmctld re-reads them and pushes them to configless nodes; retried while it fails), logs every
repair and every change of what it reports (one JSON line each, :func:`training_runtime.log.log`), and writes its
metrics (:mod:`training_runtime.metrics.guard`). A file it has repaired :data:`~training_runtime.guard.table.
FIGHT_LIMIT` times within an hour is not repaired again that hour: something rewrites it on purpose.

:func:`serve` runs it for the node's life: a check at start, then one :data:`SETTLE_S` seconds after the watched
directories last changed (:mod:`training_runtime.guard.watch`: HyperPod's agent writes slurm.conf and the topology
file one after the other; the guard acts on the pair, not the half), and one every :data:`RECHECK_S` seconds
whatever happened (a missed event costs at most that).
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Tuple

from training_runtime.guard.checks import Finding, Layout, inspect, watched
from training_runtime.guard.table import CHECKS, CONTROLLER, FIGHT, FIGHT_LIMIT, FIGHT_WINDOW_S, repairs
from training_runtime.guard.tree import Tree
from training_runtime.guard.watch import Watcher
from training_runtime.log import log
from training_runtime.metrics.exposition import render, write_textfile
from training_runtime.metrics.guard import GUARD_TEXTFILE, guard_families
from training_runtime.run import CommandError, Runner

PID_FILE = "/run/hyperpod-cdk-slurm-guard.pid"
LOG_FILE = "/var/log/hyperpod-cdk/slurm-guard.log"
"""Where the guard logs without systemd (with systemd: the journal of its unit)."""
PROCESS_NAME = "hpcdk-guard"
"""The guard's ``/proc/<pid>/comm`` (what :mod:`training_runtime.services` checks its pid file against)."""
SETTLE_S = 1.0
"""Quiet seconds after a change before the guard checks (a writer's files land together)."""
MAX_SETTLE_S = 15.0
"""A directory that never goes quiet is checked after this long anyway."""
RECHECK_S = 60.0
"""A full check this often even without an event: the guard's 60-second promise holds if a change went unseen."""
RETRY_S = 10.0
"""While a push (``scontrol reconfigure``) failed: how soon it is tried again."""
PUSH_TIMEOUT_S = 60.0

Log = Callable[..., None]


class Guard:
    """One node's guard: its role, its files and how it reaches Slurm."""

    def __init__(
        self,
        role: str,
        tree: Tree,
        layout: Layout,
        runner: Runner,
        scontrol: str,
        metrics_dir: Optional[str],
        version: Optional[Tuple[int, int]] = None,
        clock: Callable[[], float] = time.time,
        say: Log = log,
    ) -> None:
        self.role, self.tree, self.layout, self.runner = role, tree, layout, runner
        self.scontrol, self.metrics_dir, self.version = scontrol, metrics_dir, version
        self.clock, self.say = clock, say
        self.repairs: Dict[str, int] = {}
        self.problems: Dict[str, str] = {}
        self.writes: Dict[str, List[float]] = {}
        """path -> when the guard repaired it (its own refreshes left out): the fight limit's count."""
        self.push_pending = False
        self._metrics_failed = False

    def directories(self) -> List[str]:
        return [self.tree.host(d) for d in watched(self.role, self.tree, self.layout)]

    def given_up(self, path: str, now: float) -> bool:
        recent = [t for t in self.writes.get(path, []) if now - t < FIGHT_WINDOW_S]
        self.writes[path] = recent
        return len(recent) >= FIGHT_LIMIT

    def check(self) -> List[Finding]:
        """Inspect the node's files once, repair and report; returns what was found."""
        now = self.clock()
        found = inspect(self.role, self.tree, self.layout, self.version)
        problems: Dict[str, str] = {}
        written: Dict[str, str] = {}
        for finding in found:
            if finding.content is None or not repairs(finding.check, self.role):
                problems[finding.check] = finding.detail
                continue
            if finding.path not in written and self.tree.read(finding.path) == finding.content:
                continue  # nothing to write: a repair that changes nothing is none (and starts no loop of events)
            if finding.path not in written and not finding.refresh and self.given_up(finding.path, now):
                problems[finding.check] = finding.detail
                problems[FIGHT] = "{} repaired {} times within the hour; left as it is".format(
                    finding.path, FIGHT_LIMIT
                )
                continue
            if finding.path not in written:
                self.tree.write(finding.path, finding.content)
                written[finding.path] = finding.content
                if not finding.refresh:
                    self.writes.setdefault(finding.path, []).append(now)
            self.repairs[finding.check] = self.repairs.get(finding.check, 0) + 1
            self.say(
                "guard_repair", check=finding.check, path=finding.path, detail=finding.detail, refresh=finding.refresh
            )
            self.push_pending = self.push_pending or self.role == CONTROLLER
        if self.push_pending:
            self.push()
        self.report(problems)
        self.write_metrics(now)
        return found

    def push(self) -> None:
        """``scontrol reconfigure``: slurmctld re-reads its files and sends them to configless nodes."""
        try:
            result = self.runner.run([self.scontrol, "reconfigure"], check=False, timeout=PUSH_TIMEOUT_S)
            ok, output = result.ok, (result.stderr or result.stdout).strip()
        except CommandError as error:  # it ran past its timeout, or scontrol is not there
            ok, output = False, str(error)
        if ok:
            self.push_pending = False
            self.say("guard_push", command="scontrol reconfigure")
        else:
            self.say("guard_push_failed", output=output[-500:], retry_s=RETRY_S)

    def report(self, problems: Dict[str, str]) -> None:
        """Log each breakage found or gone since the last check (not every check: the metric holds the state)."""
        for check, detail in sorted(problems.items()):
            if self.problems.get(check) != detail:
                self.say("guard_problem", check=check, detail=detail)
        for check in sorted(set(self.problems) - set(problems)):
            self.say("guard_clear", check=check)
        self.problems = problems

    def write_metrics(self, now: float) -> None:
        if self.metrics_dir is None:
            return
        text = render(guard_families(CHECKS, self.repairs, self.problems, now))
        try:
            write_textfile(self.metrics_dir, GUARD_TEXTFILE, text)
        except OSError as error:
            if not self._metrics_failed:
                self.say("guard_metrics_failed", directory=self.metrics_dir, error=str(error))
            self._metrics_failed = True


def serve(
    guard: Guard,
    watcher: Watcher,
    settle_s: float = SETTLE_S,
    recheck_s: float = RECHECK_S,
    clock: Callable[[], float] = time.monotonic,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Check, then check again after each settled change and every ``recheck_s`` seconds, until ``stop()``."""
    guard.check()
    watcher.watch(guard.directories())
    due = clock() + recheck_s
    while not stop():
        timeout = max(due - clock(), 0.0)
        if guard.push_pending:
            timeout = min(timeout, RETRY_S)
        changed = watcher.wait(timeout)
        if not changed and clock() < due and not guard.push_pending:
            continue  # woken by an entry that does not matter (a job's spool directory beside the conf-cache)
        if changed:
            settled_by = clock() + MAX_SETTLE_S
            while watcher.wait(min(settle_s, max(settled_by - clock(), 0.0))) and clock() < settled_by:
                pass
        guard.check()
        watcher.watch(guard.directories())
        if not changed:
            due = clock() + recheck_s
