"""The discrete-event core of bench/scaler_sim.py: one Slurm partition on one HyperPod instance group.

What it models, and how it simplifies:

- **Nodes** are whole and exclusive (a job gets ``nodes`` nodes to itself, as GPU jobs on HyperPod do). A node is
  ``launching`` (asked for, not yet in Slurm), ``idle``, ``allocated``, ``draining`` (drained with a job still on
  it), ``drained`` or ``deleting`` (``BatchDeleteClusterNodes`` called, not yet gone). It counts as billed from
  the ``BatchAddClusterNodes`` call until it is gone: an upper bound, since AWS bills a continuous-provisioning
  instance from its lifecycle script's start, somewhere inside the launch, until it starts terminating
  (research §5, ``sagemaker-hyperpod-scaling-slurm``); AWS does not say how the launch time splits.
- **Launches**: each :meth:`Cluster.add` is one call, one batch: all its nodes join Slurm together after one draw
  of the launch latency (uniform between the bounds given: AWS's 15-25 minutes per instance batch, research §5).
  Capacity never runs out here. A deletion takes ``delete_seconds`` (AWS publishes no figure).
- **Slurm's scheduler**, simplified: after every event (submission, job end, node joining, scaler action) one
  pass runs FIFO by submission (one partition, equal priorities, so Slurm's multifactor order is submission order)
  and then EASY backfill: the first job that does not fit gets a reservation at the earliest time enough nodes
  free up by the running jobs' time limits; later jobs start only if they fit now and end (by their limit) before
  it or leave it enough nodes. Real Slurm backfills every ``bf_interval`` (30 s) and reserves for many jobs
  (``bf_max_job_test``); a job no current node count can run (the group is still growing) gets no reservation.
- Jobs run exactly their runtime; nodes do not fail.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scaler_trace import Job

LAUNCHING, IDLE, ALLOCATED, DRAINING, DRAINED, DELETING = (
    "launching",
    "idle",
    "allocated",
    "draining",
    "drained",
    "deleting",
)
IN_SLURM = (IDLE, ALLOCATED, DRAINING, DRAINED)

# Event kinds, in the order they are handled when they fall on the same second.
_END, _GONE, _READY, _SUBMIT, _POLL = range(5)


@dataclass
class Node:
    name: str
    state: str
    requested: float
    since: float
    """When the node entered its current state (for ``idle``: idle since)."""
    job: int | None = None
    gone: float | None = None
    ready: float | None = None
    """When it joined Slurm (None while launching)."""
    idle_since: float | None = None
    """When the node last became idle (joined Slurm or its job ended); kept while it is drained."""


@dataclass
class Run:
    """What happened to one job."""

    job: Job
    start: float | None = None
    nodes: tuple[str, ...] = ()


class UnsafeAction(RuntimeError):
    """A controller asked for something the scaler must never do (delete a node with a job, go above max)."""


@dataclass
class Cluster:
    """The partition's state and the actions a controller may take (the instance group's API calls, scontrol)."""

    launch_bounds: tuple[float, float]
    delete_seconds: float
    rng: random.Random
    now: float = 0.0
    nodes: dict[str, Node] = field(default_factory=dict)
    runs: dict[int, Run] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)
    running: set[int] = field(default_factory=set)
    calls: list[tuple[float, str, int]] = field(default_factory=list)
    """(time, "add" | "delete", node count) of every API call."""
    _events: list[tuple[float, int, int, object]] = field(default_factory=list)
    _seq: int = 0

    def push(self, when: float, kind: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._events, (when, kind, self._seq, payload))

    def live(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.gone is None]

    def count(self, *states: str) -> int:
        return sum(1 for n in self.nodes.values() if n.gone is None and n.state in states)

    # ---- controller actions -------------------------------------------------------------------------------
    def add(self, count: int) -> list[str]:
        """One ``BatchAddClusterNodes`` call: ``count`` nodes join together after one launch-latency draw."""
        if count <= 0:
            return []
        ready = self.now + self.rng.uniform(*self.launch_bounds)
        names = []
        for _ in range(count):
            name = f"node-{len(self.nodes) + 1:04d}"
            self.nodes[name] = Node(name, LAUNCHING, self.now, self.now)
            names.append(name)
        self.calls.append((self.now, "add", count))
        self.push(ready, _READY, names)
        return names

    def drain(self, names: Iterable[str]) -> None:
        for name in names:
            node = self.nodes[name]
            if node.state in (IDLE, ALLOCATED):
                node.state, node.since = (DRAINED if node.state == IDLE else DRAINING), self.now

    def resume(self, names: Iterable[str]) -> None:
        for name in names:
            node = self.nodes[name]
            if node.state == DRAINED:
                node.state, node.since = IDLE, self.now
            elif node.state == DRAINING:
                node.state, node.since = ALLOCATED, self.now

    def delete(self, names: Iterable[str]) -> None:
        """One ``BatchDeleteClusterNodes`` call; the node leaves Slurm now and is gone after ``delete_seconds``."""
        names = list(names)
        for name in names:
            node = self.nodes[name]
            if node.job is not None or node.state not in (IDLE, DRAINED):
                raise UnsafeAction(f"delete of {name} in state {node.state} (job {node.job})")
            node.state, node.since = DELETING, self.now
            self.push(self.now + self.delete_seconds, _GONE, name)
        if names:
            self.calls.append((self.now, "delete", len(names)))

    def pending_reason(self, job_id: int) -> str:
        """Slurm's reason for a pending job: ``PartitionNodeLimit`` when more nodes than the partition can give
        (idle or allocated), ``Resources`` for the first job in line, ``Priority`` behind it."""
        if self.runs[job_id].job.nodes > self.count(IDLE, ALLOCATED):
            return "PartitionNodeLimit"
        return "Resources" if self.pending and self.pending[0] == job_id else "Priority"

    # ---- Slurm ----------------------------------------------------------------------------------------------
    def _start(self, run: Run, free: list[Node]) -> None:
        chosen = free[: run.job.nodes]
        del free[: run.job.nodes]
        for node in chosen:
            node.state, node.since, node.job, node.idle_since = ALLOCATED, self.now, run.job.id, None
        run.start, run.nodes = self.now, tuple(n.name for n in chosen)
        self.pending.remove(run.job.id)
        self.running.add(run.job.id)
        self.push(self.now + run.job.runtime, _END, run.job.id)

    def _shadow(self, need: int, free: int) -> tuple[float, int] | None:
        """When ``need`` nodes are free if running jobs end at their limits, and the nodes spare then."""
        ends = sorted(
            (run.start + run.job.limit, sum(1 for n in run.nodes if self.nodes[n].state == ALLOCATED))
            for run in (self.runs[i] for i in self.running)
            if run.start is not None
        )
        for when, nodes in ends:
            free += nodes
            if free >= need:
                return when, free - need
        return None

    def schedule(self) -> None:
        """FIFO, then EASY backfill behind the first job that does not fit (see the module docstring)."""
        free = sorted((n for n in self.live() if n.state == IDLE), key=lambda n: n.name)
        reservation: tuple[float, int] | None = None
        blocked = False
        for job_id in list(self.pending):
            run = self.runs[job_id]
            need = run.job.nodes
            if need > len(free):
                if not blocked:
                    blocked = True
                    reservation = self._shadow(need, len(free))
                continue
            if not blocked or reservation is None or self.now + run.job.limit <= reservation[0]:
                self._start(run, free)
            elif need <= reservation[1]:
                reservation = (reservation[0], reservation[1] - need)
                self._start(run, free)

    # ---- events --------------------------------------------------------------------------------------------
    def _handle(self, kind: int, payload: object) -> None:
        if kind == _SUBMIT:
            assert isinstance(payload, Job)
            self.runs[payload.id] = Run(payload)
            self.pending.append(payload.id)
        elif kind == _END:
            assert isinstance(payload, int)
            self.running.discard(payload)
            for name in self.runs[payload].nodes:
                node = self.nodes[name]
                node.job, node.since, node.idle_since = None, self.now, self.now
                node.state = DRAINED if node.state == DRAINING else IDLE
        elif kind == _READY:
            assert isinstance(payload, list)
            for name in payload:
                node = self.nodes[name]
                node.state, node.since, node.idle_since, node.ready = IDLE, self.now, self.now, self.now
        elif kind == _GONE:
            assert isinstance(payload, str)
            self.nodes[payload].gone = self.now


Controller = Callable[[Cluster], None]
"""Called every ``poll_seconds`` with the cluster (its ``now`` set); acts through add/drain/resume/delete."""


def simulate(
    jobs: Iterable[Job],
    until: float,
    *,
    initial_nodes: int,
    controller: Controller | None = None,
    poll_seconds: float = 60.0,
    launch_bounds: tuple[float, float] = (15 * 60.0, 25 * 60.0),
    delete_seconds: float = 300.0,
    seed: int = 0,
) -> Cluster:
    """Run the jobs on a group of ``initial_nodes`` nodes (in Slurm at time 0) until ``until``."""
    cluster = Cluster(launch_bounds, delete_seconds, random.Random(seed))
    for i in range(initial_nodes):
        name = f"node-{i + 1:04d}"
        cluster.nodes[name] = Node(name, IDLE, 0.0, 0.0, ready=0.0, idle_since=0.0)
    for job in jobs:
        cluster.push(job.submit, _SUBMIT, job)
    if controller is not None:
        cluster.push(0.0, _POLL, None)
    while cluster._events and cluster._events[0][0] < until:
        when, kind, _, payload = heapq.heappop(cluster._events)
        cluster.now = when
        if kind == _POLL:
            controller_ = controller
            assert controller_ is not None
            controller_(cluster)
            cluster.push(when + poll_seconds, _POLL, None)
        else:
            cluster._handle(kind, payload)
        cluster.schedule()
    cluster.now = until
    return cluster


def billed_seconds(cluster: Cluster, start: float, end: float) -> float:
    """Node-seconds billed in [start, end): each node from its request until it is gone (or ``end``)."""
    total = 0.0
    for node in cluster.nodes.values():
        gone = end if node.gone is None else node.gone
        total += max(0.0, min(gone, end) - max(node.requested, start))
    return total


def launching_seconds(cluster: Cluster, start: float, end: float) -> float:
    """The part of :func:`billed_seconds` spent launching (from the request until the node joins Slurm)."""
    total = 0.0
    for node in cluster.nodes.values():
        joined = end if node.ready is None else node.ready
        total += max(0.0, min(joined, end) - max(node.requested, start))
    return total


def busy_seconds(cluster: Cluster, start: float, end: float) -> float:
    """Node-seconds of running jobs in [start, end)."""
    total = 0.0
    for run in cluster.runs.values():
        if run.start is not None:
            stop = run.start + run.job.runtime
            total += run.job.nodes * max(0.0, min(stop, end) - max(run.start, start))
    return total
