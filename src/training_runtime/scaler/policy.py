"""The scaler's decisions: pure functions of what it observed (no I/O, no clock; ``now`` is an input).

Inputs are plain dataclasses so a trace-driven simulation (``bench/``) can drive :func:`decide` exactly as the
service does. One call of :func:`decide` looks at every scaled group and returns a :class:`Decision`:

- **scale out**: jobs pending *for resources* (:data:`RESOURCE_REASONS`) in a group's partition need more nodes
  than the group has idle or on the way → first undrain nodes the scaler itself drained, then add nodes
  (``BatchAddClusterNodes``), never taking the group's target above ``max`` and never counting twice nodes an
  add already in flight asked for (:func:`planned_target`);
- **scale in**: nodes idle for ``idle_minutes`` with no job → drained with :data:`DRAIN_REASON_START`, never taking
  the group below ``min`` counting nodes already leaving (drained by the scaler or in a delete in flight);
  a node the scaler drained that is now DRAINED (idle, no job) → deleted (``BatchDeleteClusterNodes``); one where
  a job landed anyway → undrained.

Only groups built by :func:`scaled_groups` are touched: compute groups with ``scaling``. Controller and login
groups never are (``BatchDeleteClusterNodes`` cannot delete controllers at all, API_BatchDeleteClusterNodes);
training-plan groups never carry ``scaling`` (the config rule refuses it), so they are not scaled either.

AWS: ``BatchAddClusterNodes`` ("only supported for clusters using Continuous" provisioning; ``IncrementTargetCountBy``
1..50, at most 5 groups and 50 nodes per call) and ``BatchDeleteClusterNodes`` (at most 50 ids) in the SageMaker API
reference (API_BatchAddClusterNodes.html, API_BatchDeleteClusterNodes.html).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from training_runtime.groups import COMPUTE, GroupSpec
from training_runtime.health.results import REASON_PREFIX
from training_runtime.hyperpod_facts import ADD_GROUPS_MAX, DELETE_NODES_MAX
from training_runtime.scaling import MAX_NODES_PER_CALL, ScalingSpec

DRAIN_REASON_START = REASON_PREFIX + "scaler:"
"""Every drain reason the scaler sets starts so; a node drained with another reason (health checks, an admin,
HyperPod's ``Action:``) is never undrained or deleted by the scaler."""

RESOURCE_REASONS = (
    "Resources",
    "Priority",
    "PartitionNodeLimit",
    "PartitionConfig",
    "NodeDown",
    "ReqNodeNotAvail",
    "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_partitions",
)
"""Pending reasons that more nodes in the job's partition can clear (Slurm, "Job Reason Codes",
https://slurm.schedmd.com/job_reason_codes.html): ``Resources`` (the resources requested are not available),
``Priority`` (higher-priority jobs wait for the same partition: they all need nodes), ``PartitionNodeLimit``
(the job needs more nodes than the partition has now, or its nodes are DOWN/DRAINED), ``PartitionConfig``
("Requested partition configuration not available now": how Slurm 24.11 keeps a job waiting in a partition
with no nodes at all — a group at 0 — once it was accepted, docs/scaler.md "A group at 0"),
``NodeDown``/``ReqNodeNotAvail``/the long "Nodes required…" text (required nodes down or drained). A reason is
matched on its first word (squeue prints ``ReqNodeNotAvail, UnavailableNodes:…``). Every other reason
(``Dependency``, ``BeginTime``, ``JobHeld*``, ``AssocGrp*``, ``QOS*``, ``PartitionDown``, ``BadConstraints``, …)
is a limit more nodes cannot lift: such jobs never scale a group out."""

ADD, DELETE = "add", "delete"


def drain_reason(idle_minutes: int) -> str:
    """The one reason the scaler drains an idle node with."""
    return "{} idle {}m".format(DRAIN_REASON_START, idle_minutes)


def is_scaler_reason(reason: Optional[str]) -> bool:
    return bool(reason) and str(reason).startswith(DRAIN_REASON_START)


def for_resources(reason: str) -> bool:
    """A pending reason more nodes can clear (:data:`RESOURCE_REASONS`)."""
    first = reason.strip().split(",")[0].split(" ")[0].strip("()")
    return first in RESOURCE_REASONS or reason.strip() in RESOURCE_REASONS


@dataclass(frozen=True)
class ScaledGroup:
    """One scaled instance group as observed: its spec and HyperPod's counts (DescribeCluster)."""

    name: str
    partition: str
    scaling: ScalingSpec
    current_count: int
    """``InstanceGroups[].CurrentCount``: instances running."""
    target_count: int
    """``InstanceGroups[].TargetCount``: what HyperPod is converging to (Continuous keeps trying)."""


@dataclass(frozen=True)
class SlurmNode:
    """One Slurm node of a listed instance: its group comes from ListClusterNodes + the naming rule."""

    name: str
    group: str
    state: str
    """The base state, lower case: ``idle``, ``allocated``, ``mixed``, ``completing``, ``down``, ``unknown``…"""
    drain: bool = False
    """The DRAIN flag (``drained`` is ``idle`` + drain, ``draining`` is busy + drain)."""
    reason: Optional[str] = None
    jobs: int = 0
    """Jobs running on the node (0 for an idle node)."""
    idle_since: Optional[float] = None
    """When the node last became idle (epoch seconds); None: unknown or busy."""
    responding: bool = True

    @property
    def drained_by_scaler(self) -> bool:
        return self.drain and is_scaler_reason(self.reason)

    @property
    def busy(self) -> bool:
        return self.jobs > 0 or self.state in ("allocated", "mixed", "completing")


@dataclass(frozen=True)
class PendingJob:
    job_id: str
    partitions: Tuple[str, ...]
    """The partitions the job may run in, in the order it named them."""
    nodes: int
    reason: str


@dataclass(frozen=True)
class InFlight:
    """An operation the scaler sent (or is about to send) and has not seen completed (persisted, :mod:`.state`)."""

    kind: str
    group: str
    count: int
    token: str
    base_target: int = 0
    """For an add: the group's TargetCount when it was decided (done once TargetCount >= base + count)."""
    nodes: Tuple[str, ...] = ()
    """For a delete: the Slurm node names."""


@dataclass(frozen=True)
class AddNodes:
    group: str
    count: int
    base_target: int
    jobs: Tuple[str, ...]


@dataclass(frozen=True)
class DeleteNode:
    group: str
    node: str


@dataclass(frozen=True)
class Decision:
    add: Tuple[AddNodes, ...] = ()
    undrain: Tuple[str, ...] = ()
    drain: Tuple[str, ...] = ()
    delete: Tuple[DeleteNode, ...] = ()
    blocked: Mapping[str, str] = field(default_factory=dict)
    """Job id → why the scaler cannot give it nodes now (shown as the job's comment)."""

    @property
    def empty(self) -> bool:
        return not (self.add or self.undrain or self.drain or self.delete)


def scaled_groups(groups: Iterable[GroupSpec]) -> List[GroupSpec]:
    """The groups the scaler may touch: compute groups with ``scaling`` and a partition (never controller/login)."""
    return [g for g in groups if g.role == COMPUTE and g.scaling is not None and g.partition]


def starting_up(node: SlurmNode) -> bool:
    """A node Slurm lists that is not up yet: no job, not drained, and UNKNOWN/DOWN or not responding."""
    return node.jobs == 0 and not node.drain and (not node.responding or node.state in ("unknown", "down"))


def planned_target(group: ScaledGroup, in_flight: Sequence[InFlight]) -> int:
    """The target the group is heading to: TargetCount, or higher where an add in flight is not reflected yet
    (each add counts once: once TargetCount shows it, the max is TargetCount itself)."""
    target = group.target_count
    for op in in_flight:
        if op.kind == ADD and op.group == group.name:
            target = max(target, op.base_target + op.count)
    return target


def _job_group(job: PendingJob, by_partition: Mapping[str, str]) -> Optional[str]:
    for partition in job.partitions:
        if partition in by_partition:
            return by_partition[partition]
    return None


def _leaving(group: str, nodes: Sequence[SlurmNode], in_flight: Sequence[InFlight]) -> Set[str]:
    """Names of the group's listed nodes already on their way out (each counted once)."""
    listed = {n.name for n in nodes if n.group == group}
    out = {n.name for n in nodes if n.group == group and n.drained_by_scaler}
    for op in in_flight:
        if op.kind == DELETE and op.group == group:
            out.update(name for name in op.nodes if name in listed)
    return out


def _scale_out(
    group: ScaledGroup, jobs: Sequence[PendingJob], nodes: Sequence[SlurmNode], in_flight: Sequence[InFlight]
) -> Tuple[Optional[AddNodes], List[str], Dict[str, str]]:
    blocked: Dict[str, str] = {}
    demand = sum(job.nodes for job in jobs)
    if demand == 0:
        return None, [], blocked
    deleting = {name for op in in_flight if op.kind == DELETE for name in op.nodes}
    mine = [n for n in nodes if n.group == group.name]
    idle = [n for n in mine if n.state == "idle" and not n.drain and n.responding and n.jobs == 0]
    target = planned_target(group, in_flight)
    # On the way: nodes HyperPod has not put in Slurm yet, and nodes Slurm lists that have not come up (slurmd not
    # registered yet: UNKNOWN/DOWN or not responding; a failed one HyperPod's recovery replaces); none is
    # counted twice, or a job would get a second add while its nodes boot.
    starting = [n for n in mine if starting_up(n)]
    coming = max(0, target - len(mine)) + len(starting)
    shortfall = demand - len(idle) - coming
    if shortfall <= 0:
        return None, [], blocked
    reclaim = sorted(n.name for n in mine if n.drained_by_scaler and n.name not in deleting and not n.busy)
    undrain = reclaim[:shortfall]
    shortfall -= len(undrain)
    room = max(0, group.scaling.max - target)
    count = min(shortfall, room)
    if count < shortfall:
        for job in jobs:
            if job.nodes > group.scaling.max:
                why = "needs {} nodes; group {} scales to at most {}".format(job.nodes, group.name, group.scaling.max)
            else:
                why = "group {} is at its max of {} nodes".format(group.name, group.scaling.max)
            blocked[job.job_id] = why
    add = AddNodes(group.name, count, target, tuple(j.job_id for j in jobs)) if count > 0 else None
    return add, undrain, blocked


def _scale_in(
    group: ScaledGroup,
    demand: int,
    nodes: Sequence[SlurmNode],
    in_flight: Sequence[InFlight],
    now: float,
    minute_s: float = 60.0,
) -> Tuple[List[str], List[DeleteNode], List[str]]:
    """(nodes to drain, nodes to delete, drained nodes to give back: deleting them would go below ``min``)."""
    mine = [n for n in nodes if n.group == group.name]
    leaving = _leaving(group.name, nodes, in_flight)
    deleting = {name for op in in_flight if op.kind == DELETE for name in op.nodes}
    ready = sorted(
        n.name for n in mine if n.drained_by_scaler and n.state == "idle" and n.jobs == 0 and n.name not in deleting
    )
    being_deleted = len([n for n in mine if n.name in deleting])
    deletable = max(0, group.current_count - being_deleted - group.scaling.min)
    deletes = [DeleteNode(group.name, name) for name in ready[:deletable]]
    give_back = ready[deletable:]
    idle_for = group.scaling.idle_minutes * minute_s
    candidates = sorted(
        (
            n
            for n in mine
            if n.state == "idle"
            and not n.drain
            and n.jobs == 0
            and n.responding
            and n.idle_since is not None
            and now - n.idle_since >= idle_for
            and n.name not in leaving
        ),
        key=lambda n: (n.idle_since, n.name),
    )
    idle_free = len([n for n in mine if n.state == "idle" and not n.drain and n.jobs == 0])
    keep_for_jobs = max(0, demand - (idle_free - len(candidates)))
    staying = group.current_count - len(leaving)
    room = max(0, staying - group.scaling.min)
    count = max(0, min(len(candidates) - keep_for_jobs, room))
    return [n.name for n in candidates[:count]], deletes, give_back


def decide(
    groups: Sequence[ScaledGroup],
    nodes: Sequence[SlurmNode],
    jobs: Sequence[PendingJob],
    in_flight: Sequence[InFlight],
    now: float,
    minute_s: float = 60.0,
) -> Decision:
    """Every scaled group's actions for this observation (see the module docstring for the rules); ``minute_s``:
    the seconds in one of ``idle_minutes`` (60; the local cluster's drills shorten it)."""
    by_partition = {g.partition: g.name for g in groups}
    waiting: Dict[str, List[PendingJob]] = {g.name: [] for g in groups}
    for job in jobs:
        name = _job_group(job, by_partition)
        if name is not None and for_resources(job.reason):
            waiting[name].append(job)
    adds: List[AddNodes] = []
    undrain: List[str] = []
    drain: List[str] = []
    delete: List[DeleteNode] = []
    blocked: Dict[str, str] = {}
    for group in groups:
        add, back, why = _scale_out(group, waiting[group.name], nodes, in_flight)
        if add is not None:
            adds.append(add)
        undrain.extend(back)
        blocked.update(why)
        demand = sum(j.nodes for j in waiting[group.name])
        out, gone, kept = _scale_in(group, demand, nodes, in_flight, now, minute_s)
        drain.extend(out)
        delete.extend(d for d in gone if d.node not in back)
        undrain.extend(name for name in kept if name not in undrain)
    busy_ours = [n.name for n in nodes if n.drained_by_scaler and n.busy and n.group in waiting]
    undrain.extend(name for name in busy_ours if name not in undrain)
    return Decision(tuple(adds), tuple(undrain), tuple(drain), tuple(delete), blocked)


def batch_adds(adds: Sequence[AddNodes]) -> List[List[AddNodes]]:
    """Split adds into BatchAddClusterNodes calls: <= 50 nodes and <= 5 groups per call (a group above 50 is
    split into several entries, each with its own ``base_target``)."""
    pieces: List[AddNodes] = []
    for add in adds:
        done = 0
        while done < add.count:
            step = min(MAX_NODES_PER_CALL, add.count - done)
            pieces.append(AddNodes(add.group, step, add.base_target + done, add.jobs))
            done += step
    calls: List[List[AddNodes]] = []
    current: List[AddNodes] = []
    for piece in pieces:
        total = sum(p.count for p in current)
        groups = {p.group for p in current}
        fits = total + piece.count <= MAX_NODES_PER_CALL and (piece.group in groups or len(groups) < ADD_GROUPS_MAX)
        if current and (not fits or piece.group in groups):
            calls.append(current)
            current = []
        current.append(piece)
    if current:
        calls.append(current)
    return calls


def batch_deletes(deletes: Sequence[DeleteNode]) -> List[List[DeleteNode]]:
    """BatchDeleteClusterNodes calls of at most :data:`DELETE_NODES_MAX` node ids each."""
    return [list(deletes[i : i + DELETE_NODES_MAX]) for i in range(0, len(deletes), DELETE_NODES_MAX)]


def client_token(cluster: str, call: Sequence[AddNodes], attempt: int = 0) -> str:
    """The call's ClientToken, derived from the decision alone (cluster, groups, base targets, counts, jobs) and
    the persisted failure count: the same decision after a restart yields the same token, so HyperPod treats a
    resend as the same request; a decision made again after HyperPod refused it gets a new one (AWS does not say
    whether a token that met an error is replayed)."""
    digest = hashlib.sha256("{}|{}".format(cluster, attempt).encode() if attempt else cluster.encode())
    for add in sorted(call, key=lambda a: (a.group, a.base_target)):
        text = "|{}|{}|{}|{}".format(add.group, add.base_target, add.count, ",".join(sorted(add.jobs)))
        digest.update(text.encode())
    return "hpcdk-" + digest.hexdigest()[:32]


def delete_token(cluster: str, call: Sequence[DeleteNode]) -> str:
    """A stable id for a delete in the persisted state (BatchDeleteClusterNodes takes no ClientToken)."""
    digest = hashlib.sha256(cluster.encode())
    for item in sorted(call, key=lambda d: d.node):
        digest.update("|{}|{}".format(item.group, item.node).encode())
    return "del-" + digest.hexdigest()[:32]
