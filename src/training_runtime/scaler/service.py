"""The scaler's loop: observe (SageMaker, Slurm), resume what is in flight, decide (:mod:`.policy`), act, report.

One :meth:`Scaler.cycle` per ``interval_s``. Everything it touches is injected (the SageMaker client, the Slurm
commands, the clock, the state path), so the tests and the local cluster drive it the way a controller does.

Failures: a call that fails, SageMaker's or Slurm's, or the instance role's credentials the metadata service did
not give (kind ``credentials``), is recorded (state ``last_error``, a ``scaler_error`` log event, the heartbeat
and the metrics); the jobs it leaves waiting say so in their AdminComment, in words that point to the scaler's log
(the error itself, which may name the role and the account, stays in the log and the root-only state). New adds and
deletes wait for a capped exponential backoff (:func:`backoff_s`) and are retried; a cycle that runs clean once the
backoff is over clears the error. A pending job is never touched otherwise: Slurm keeps it queued, so no job is
lost. An add whose outcome is unknown (network error, restart) stays in flight, unsent, and is re-sent with the
same ClientToken; a delete whose outcome is unknown stays in flight and is settled by the listing
(:mod:`.deletes`). The heartbeat tag is written at most every ``tag_interval_s``, errors or not.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from training_runtime.log import log
from training_runtime.metrics.exposition import render, write_textfile
from training_runtime.metrics.scaler import SCALER_TEXTFILE, scaler_families
from training_runtime.node_names import IP_NAMES, address_of, slurm_name
from training_runtime.resources import ResourceConfig
from training_runtime.run import CommandError
from training_runtime.scaler import policy
from training_runtime.scaler.config import ScalerConfig
from training_runtime.scaler.deletes import Deletes, listed_by_id
from training_runtime.scaler.heartbeat import TAG_KEY, Heartbeat, format_heartbeat, group_lines
from training_runtime.scaler.job_submit import held_by_scaler
from training_runtime.scaler.policy import ADD, DELETE, AddNodes, Decision, ScaledGroup
from training_runtime.scaler.sagemaker import ApiError, Group, Node, SageMaker
from training_runtime.scaler.slurm_view import Slurm, to_policy_nodes
from training_runtime.scaler.state import Operation, load, save

BACKOFF_BASE_S = 30.0
BACKOFF_CAP_S = 900.0
RELEASED_REASON = "PartitionConfig"
"""How a job released in a partition with no node waits (Slurm's Job Reason Codes), counted as demand."""
TOKEN_TTL_S = 8 * 3600.0
"""BatchAddClusterNodes keeps a ClientToken for 8 hours: an add still unreflected after that is dropped (logged)."""


def backoff_s(failures: int, jitter: float) -> float:
    """Seconds before the next add after ``failures`` failures in a row (``jitter`` in [0.5, 1])."""
    return float(min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** max(0, min(failures - 1, 20))) * jitter)


def slurm_names(naming: str, listed: Sequence[Node], resources: Optional[ResourceConfig]) -> Dict[str, Tuple[str, str]]:
    """Slurm node name -> (instance group, instance id) for every listed instance, by the one naming rule
    (:func:`training_runtime.node_names.slurm_name`) over the controller's resource config, matched by InstanceId
    or by address (``PrivateDnsHostname``); an instance the resource config does not have yet is named from
    ``PrivateDnsHostname`` where the names are IP-based."""
    by_id = {n.instance_id: n for n in listed}
    by_address = {address_of(n.hostname or ""): n for n in listed if address_of(n.hostname or "")}
    out: Dict[str, Tuple[str, str]] = {}
    if resources is not None:
        for instance in resources.all_instances():  # by InstanceId, else by address (a file without ids)
            node = by_id.get(instance.instance_id or "") or by_address.get(instance.address)
            if node is not None:
                out[slurm_name(naming, instance.name, instance.address)] = (node.group, node.instance_id)
    known = {v[1] for v in out.values()}
    for node in listed:
        address = address_of(node.hostname or "")
        if node.instance_id not in known and naming == IP_NAMES and address is not None:
            out[slurm_name(naming, "", address)] = (node.group, node.instance_id)
    return out


class Scaler(Deletes):
    def __init__(
        self,
        config: ScalerConfig,
        sagemaker: SageMaker,
        slurm: Slurm,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = lambda: random.uniform(0.5, 1.0),
        resources: Optional[Callable[[], Optional[ResourceConfig]]] = None,
    ) -> None:
        self.config = config
        self.sagemaker = sagemaker
        self.slurm = slurm
        self.clock = clock
        self.jitter = jitter
        self.resources = resources or self._read_resources
        self.state_path = Path(config.state_path)
        self.state = load(self.state_path)
        self.commented: Dict[str, str] = {}
        self.last_tag: Optional[float] = None
        """When the heartbeat tag was last tried (None: not yet)."""
        self.failed_now = False
        """A call failed in this cycle."""

    def _read_resources(self) -> Optional[ResourceConfig]:
        try:
            return ResourceConfig.load(Path(self.config.resource_config))
        except Exception as error:  # a resource config being rewritten: name by hostname this cycle
            log("scaler_warning", message="resource config unreadable: {}".format(error))
            return None

    def _save(self) -> None:
        save(self.state_path, self.state)

    def _fail(self, error: Exception, what: str, now: float) -> None:
        kind = error.kind if isinstance(error, ApiError) else "slurm" if isinstance(error, CommandError) else "error"
        self.failed_now = True
        self.state.failures += 1
        self.state.next_try = now + backoff_s(self.state.failures, self.jitter())
        self.state.last_error = {"kind": kind, "message": "{}: {}".format(what, error)[:500], "at": now}
        log("scaler_error", what=what, kind=kind, error=str(error), retry_at=round(self.state.next_try, 1))

    def _observe(self) -> Tuple[List[ScaledGroup], Dict[str, Group], Dict[str, Tuple[str, str]], List[Node]]:
        _, groups = self.sagemaker.describe_cluster(self.config.cluster_name)
        by_name = {g.name: g for g in groups}
        scaled = []
        for spec in self.config.groups:
            group = by_name.get(spec.name)
            if group is None or group.training_plan:
                continue  # not in the cluster (any more), or bound to a training plan: never scaled
            scaled.append(ScaledGroup(spec.name, spec.partition, spec.scaling, group.current, group.target))
        listed = self.sagemaker.list_cluster_nodes(self.config.cluster_name)
        names = slurm_names(self.config.naming, listed, self.resources())
        return scaled, by_name, names, listed

    def _resume(self, groups: Mapping[str, Group], listed: Sequence[Node], now: float) -> None:
        """Drop what completed; re-send what may not have reached HyperPod (same ClientToken)."""
        by_id = listed_by_id(listed)
        keep: List[Operation] = []
        for op in self.state.in_flight:
            group = groups.get(op.group)
            if op.kind == ADD:
                if group is None or group.target >= op.base_target + op.count:
                    log("scaler_add_reflected", group=op.group, count=op.count, token=op.token)
                    continue
                if now - op.started > TOKEN_TTL_S:
                    log("scaler_add_expired", group=op.group, count=op.count, token=op.token, target=group.target)
                    continue
                if not op.sent:
                    if now < self.state.next_try:
                        keep.append(op)
                        continue
                    try:
                        self.sagemaker.batch_add(
                            self.config.cluster_name, [AddNodes(op.group, op.count, op.base_target, ())], op.token
                        )
                        op.sent = True
                        log("scaler_add_resent", group=op.group, count=op.count, token=op.token)
                    except ApiError as error:
                        self._fail(error, "BatchAddClusterNodes", now)
                        if error.kind not in ("network", "throttling", "server"):
                            continue  # HyperPod refused it: forget it, the policy decides again after the backoff
                keep.append(op)
            else:
                settled = self._settle_delete(op, by_id, now)
                if settled is not None:
                    keep.append(settled)
        self.state.in_flight = keep

    def _with_idle_seen(self, nodes: List[policy.SlurmNode], now: float) -> List[policy.SlurmNode]:
        """Where Slurm gives no LastBusyTime, the time the scaler first saw the node idle (persisted)."""
        seen = self.state.idle_seen
        idle_now = {n.name for n in nodes if n.state == "idle" and n.jobs == 0}
        for name in list(seen):
            if name not in idle_now:
                del seen[name]
        out = []
        for n in nodes:
            if n.name in idle_now:
                seen.setdefault(n.name, now)
                if n.idle_since is None:
                    n = policy.SlurmNode(
                        n.name, n.group, n.state, n.drain, n.reason, n.jobs, seen[n.name], n.responding
                    )
            out.append(n)
        return out

    def _act(self, decision: Decision, names: Mapping[str, Tuple[str, str]], now: float) -> None:
        for name in decision.undrain:
            self.slurm.resume(name)
            self.state.totals["undrained"] += 1
            log("scaler_undrain", node=name)
        for name in decision.drain:
            group = names[name][0]
            idle = next(g.scaling.idle_minutes for g in self.config.groups if g.name == group)
            self.slurm.drain(name, policy.drain_reason(idle))
            self.state.totals["drained"] += 1
            log("scaler_drain", node=name, group=group)
        if decision.delete and now >= self.state.next_try:
            confirmed = [d for d in decision.delete if self.slurm.confirmed_drained(d.node)]
            for call in policy.batch_deletes(confirmed):
                self._delete(call, names, now)
        if decision.add and now >= self.state.next_try:
            for batch in policy.batch_adds(decision.add):
                self._add(batch, now)

    def _add(self, batch: List[AddNodes], now: float) -> None:
        token = policy.client_token(self.config.cluster_name, batch, self.state.failures)
        ops = [Operation(ADD, a.group, a.count, token, base_target=a.base_target, started=now) for a in batch]
        self.state.in_flight.extend(ops)
        self._save()  # before the call: a restart finds the token
        try:
            self.sagemaker.batch_add(self.config.cluster_name, batch, token)
        except ApiError as error:
            self._fail(error, "BatchAddClusterNodes", now)
            if error.kind not in ("network", "throttling", "server"):
                self.state.in_flight = [op for op in self.state.in_flight if op not in ops]
            self._save()
            return
        for op in ops:
            op.sent = True
            self.state.totals["requested"] += op.count
            log("scaler_add", group=op.group, count=op.count, base_target=op.base_target, token=token)
        self.state.failures = 0
        self.state.last_error = None
        self._save()

    def _release_held(
        self, jobs: Sequence[policy.PendingJob], scaled: Sequence[ScaledGroup]
    ) -> List[policy.PendingJob]:
        """Release each job the job_submit script held for a scaled group at 0 (its AdminComment mark,
        :func:`~training_runtime.scaler.job_submit.held_by_scaler`) and count it as demand at once: released, it
        waits with ``PartitionConfig`` until the nodes come. A job held without the mark (its user's, an admin's)
        is left held and never counted."""
        partitions = {g.partition for g in scaled}
        out: List[policy.PendingJob] = []
        for job in jobs:
            ours = job.reason.startswith("JobHeld") and any(p in partitions for p in job.partitions)
            if ours and held_by_scaler(self.slurm.admin_comment(job.job_id)):
                try:
                    self.slurm.release(job.job_id)
                except CommandError as failure:  # Slurm 24.11 releases it and exits 1 (a partition at 0)
                    log("scaler_warning", message="release of job {}: {}".format(job.job_id, failure))
                log("scaler_release", job=job.job_id, partitions=list(job.partitions))
                job = policy.PendingJob(job.job_id, job.partitions, job.nodes, RELEASED_REASON)
            out.append(job)
        return out

    def _comment(
        self, jobs: Sequence[policy.PendingJob], decision: Decision, scaled: Sequence[ScaledGroup]
    ) -> Set[str]:
        """Tell each waiting job why (AdminComment); only when the text changes."""
        error = self.state.last_error
        by_partition = {g.partition: g for g in scaled}
        told: Set[str] = set()
        for job in jobs:
            group = next((by_partition[p] for p in job.partitions if p in by_partition), None)
            if group is None or not policy.for_resources(job.reason):
                continue
            if job.job_id in decision.blocked:
                text = decision.blocked[job.job_id]
            elif error:
                text = "scaling {} failed ({}), retrying; an administrator finds why in the scaler's log".format(
                    group.name, error["kind"]
                )
            elif group.current_count < group.target_count:
                text = "HyperPod is launching nodes in {}: {} of {} running".format(
                    group.name, group.current_count, group.target_count
                )
            else:
                text = "adding nodes to {}".format(group.name)
            text = "{} {}".format(policy.DRAIN_REASON_START, text)
            told.add(job.job_id)
            if self.commented.get(job.job_id) != text:
                try:
                    self.slurm.comment(job.job_id, text)
                except CommandError as failure:
                    # Never a reason to stop scaling. Slurm 24.11 sets the comment of a job in a partition with
                    # no node yet exits 1 ("Requested partition configuration not available now"): a group at 0.
                    log("scaler_warning", message="AdminComment of job {}: {}".format(job.job_id, failure))
                self.commented[job.job_id] = text
        self.commented = {k: v for k, v in self.commented.items() if k in told}
        return told

    def cycle(self) -> Heartbeat:
        now = self.clock()
        self.failed_now = False
        try:
            scaled, groups, names, listed = self._observe()
            self._resume(groups, listed, now)
            self._save()
            nodes = self._with_idle_seen(to_policy_nodes(self.slurm.nodes(), {k: v[0] for k, v in names.items()}), now)
            jobs = self._release_held(self.slurm.pending(), scaled)
            flights = [op.in_flight() for op in self.state.in_flight]
            decision = policy.decide(scaled, nodes, jobs, flights, now, minute_s=self.config.minute_s)
            self._act(decision, names, now)
            if not self.failed_now and now >= self.state.next_try and self.state.last_error is not None:
                log("scaler_recovered", error=self.state.last_error.get("kind"))
                self.state.failures, self.state.last_error = 0, None
            self._comment(jobs, decision, scaled)
        except (ApiError, CommandError, OSError) as error:
            self._fail(error, "cycle", now)
            self._save()
            return self._report(now, [], [], Decision())
        self._save()
        return self._report(now, scaled, jobs, decision)

    def _report(
        self, now: float, scaled: Sequence[ScaledGroup], jobs: Sequence[policy.PendingJob], decision: Decision
    ) -> Heartbeat:
        by_partition = {g.partition: g.name for g in scaled}
        pending: Dict[str, int] = {}
        for job in jobs:
            group = next((by_partition[p] for p in job.partitions if p in by_partition), None)
            if group is not None and policy.for_resources(job.reason):
                pending[group] = pending.get(group, 0) + job.nodes
        error = self.state.last_error["kind"] if self.state.last_error else None
        flights = [o.in_flight() for o in self.state.in_flight]
        launching = any(g.current_count < policy.planned_target(g, flights) for g in scaled)
        status = "error" if error else "waiting" if decision.blocked or launching else "ok"
        lines = [(g.name, policy.planned_target(g, flights), g.scaling.min, g.scaling.max) for g in scaled]
        beat = Heartbeat(status, now, group_lines(lines), sum(pending.values()), error)
        value = format_heartbeat(beat)
        path = Path(self.config.heartbeat_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
        in_flight = {k: sum(1 for op in self.state.in_flight if op.kind == k) for k in (ADD, DELETE)}
        counts = {g.name: (g.current_count, g.target_count, g.scaling.min, g.scaling.max) for g in scaled}
        families = scaler_families(self.state.totals, in_flight, counts, pending, error, now)
        try:
            write_textfile(self.config.metrics_dir, SCALER_TEXTFILE, render(families))
        except OSError as failure:
            log("scaler_warning", message="metrics not written: {}".format(failure))
        if self.last_tag is None or now - self.last_tag >= self.config.tag_interval_s:
            self.last_tag = now  # tried: the next one waits the interval, even while calls fail
            try:
                self.sagemaker.add_tags(self.config.cluster_arn, {TAG_KEY: value})
            except ApiError as failure:
                log("scaler_warning", message="heartbeat tag not written: {}".format(failure))
        log("scaler_cycle", heartbeat=value)
        return beat

    def run(self, sleep: Callable[[float], None] = time.sleep, cycles: Optional[int] = None) -> None:
        done = 0
        while cycles is None or done < cycles:
            started = self.clock()
            try:
                self.cycle()
            except Exception as error:  # never let one bad cycle stop the service; the next one starts afresh
                log("scaler_error", what="cycle", kind="bug", error="{}: {}".format(type(error).__name__, error))
            done += 1
            if cycles is None or done < cycles:
                sleep(max(0.0, self.config.interval_s - (self.clock() - started)))
