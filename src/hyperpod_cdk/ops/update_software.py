"""``update-software``: UpdateClusterSoftware rolled through a Slurm cluster group by group, each group drained through
Slurm first and verified by a job on its nodes after; ``--resume`` continues an interrupted run.

What AWS says, and what the command does about it:

- "Updates the platform software of a SageMaker HyperPod cluster for security patching" and "The
  UpgradeClusterSoftware API call may impact your SageMaker HyperPod cluster uptime and availability. Plan
  accordingly to mitigate potential disruptions to your workloads"
  (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_UpdateClusterSoftware.html). The command plans for it:
  before a group is updated its Slurm nodes are drained (``scontrol update NodeName=... State=DRAIN``), its jobs
  finish, or at ``--drain-deadline`` those Slurm can requeue are requeued (``scontrol requeue``); a job that cannot
  be requeued stops the command (exit 6) rather than being killed, and ``--resume`` continues once it is gone.
- "Updating your cluster in batches is available only for HyperPod clusters integrated with Amazon EKS"
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-update.html): on Slurm the request's
  ``DeploymentConfig`` (batches, wait interval, rollback alarms) is not available, so ``--batch``, ``--batch-percent``,
  ``--wait-seconds`` and ``--rollback-alarm`` are refused with those words (:mod:`.software_plan`) and the update
  rolls by instance group: one UpdateClusterSoftware per group, naming it in ``InstanceGroups``.
- ``ImageId``: "HyperPodPublicAmiId", "CustomAmiId" or "default" (API reference); ``--image-id`` passes it on.
- The update is over when the group's ``SoftwareUpdateStatus`` (DescribeCluster; Pending -> InProgress ->
  Succeeded, or a rollback and Failed, per the API model) says so and every node of the group is Running; where
  the nodes report ``LastSoftwareUpdateTime`` (ListClusterNodes), each must be after the request. AWS does not
  document how soon the status changes after the call, hence the second check.
- Then a verification job runs on the group's updated nodes: they are reserved for root (``scontrol create
  reservation ... Flags=MAINT,IGNORE_JOBS``), resumed, and ``srun -N <n> -w <nodes>`` runs the node runtime's health
  checks (``python3 -m training_runtime.health --report``: GPU, DCGM, EFA, Neuron where the hardware exists, the
  shared file system, disk) on each, or ``hostname`` where the runtime is not installed. A failure drains the group's
  nodes again and stops the command (exit 1).

Slurm commands run on the controller through SSM (:mod:`.controller_shell`), as ``status --slurm`` reads Slurm.
Progress is recorded after every phase in ``~/.hyperpod-cdk/update-software/<cluster>.json``, so ``--resume`` never
updates a finished group again, nor sends a second UpdateClusterSoftware for a group whose update was accepted.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hyperpod_cdk.aws.clients import Aws, error_code
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops import slurm_state
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.controller_shell import ControllerShell
from hyperpod_cdk.ops.lookup import Cluster, Node, get_cluster, list_nodes, pick_node
from hyperpod_cdk.ops.render import print_json
from hyperpod_cdk.ops.software_plan import (
    DONE,
    JOB_FIELDS,
    Drain,
    Progress,
    drain_decision,
    order_groups,
    parse_duration,
    parse_jobs,
    progress_path,
    refuse_batches,
    save_progress,
    start_or_resume,
)
from training_runtime.paths import INSTALL_DIR
from training_runtime.scaler.slurm_view import parse_nodes
from training_runtime.slurm_text import SlurmTextError, format_option, node_name

DRAIN_REASON = "hyperpod-cdk update-software"
FAILED_REASON = "hyperpod-cdk update-software: verification failed"
JOBS = "squeue -h -w {nodes} -t RUNNING,COMPLETING,CONFIGURING,SUSPENDED -O " + shlex.quote(format_option(JOB_FIELDS))
"""The jobs on the drained nodes, one ``squeue -O`` line each of fields only Slurm writes (:data:`JOB_FIELDS`)."""
VERIFY = (
    f"sh -c 'if [ -d {INSTALL_DIR}/training_runtime ]; then PYTHONPATH={INSTALL_DIR} exec python3 -m "
    "training_runtime.health --report; else hostname; fi'"
)
"""What the verification job runs on each node: the runtime's health checks, read-only (``--report`` changes
nothing), exit 1 on a failed check."""
VERIFY_TIMEOUT_S = 900.0
FINISHED = {"Succeeded"}
FAILED_STATUS = {"Failed", "RollbackComplete", "RollbackInProgress"}


class Roll:
    """One run of the command: the cluster, its controller shell, the progress record and what to say."""

    def __init__(self, args: argparse.Namespace, ctx: OpsContext, aws: Aws, cluster: Cluster, path: Path) -> None:
        self.args, self.ctx, self.aws, self.cluster, self.path = args, ctx, aws, cluster, path
        self.deadline_s = parse_duration(args.drain_deadline, "--drain-deadline")
        self.progress: Progress
        self.shell: ControllerShell
        self.names: dict[str, list[str]] = {}

    def say(self, text: str) -> None:
        self.ctx.err.print(text)

    def phase(self, group: str, phase: str) -> None:
        self.progress.phases[group] = phase
        save_progress(self.path, self.progress)

    # --- one group ---------------------------------------------------------------------------------------------
    def group(self, group: str) -> Exit:
        names = self.names[group]
        nodes = node_list(names)
        if self.progress.phase(group) in ("pending", "draining"):
            self.phase(group, "draining")
            if names:
                self.shell.must(f"scontrol update NodeName={nodes} State=DRAIN Reason={shlex.quote(DRAIN_REASON)}")
                deadline = self.args.drain_deadline
                self.say(f"{group}: drained {','.join(names)}; waiting for their jobs (deadline {deadline})")
                stopped = self.wait_for_jobs(group, names)
                if stopped is not None:
                    return stopped
            else:
                self.say(f"{group}: its nodes are not Slurm nodes: nothing to drain")
            self.request(group)
        if self.progress.phase(group) == "updating":
            failed = self.wait_for_update(group)
            if failed is not None:
                return failed
            self.phase(group, "verifying")
        if self.progress.phase(group) == "verifying":
            if not names:
                self.wait_for_slurm(group)
            elif not self.verify(group, names):
                return Exit.FAILED
            self.phase(group, DONE)
            self.say(f"{group}: updated and verified")
        return Exit.OK

    def wait_for_jobs(self, group: str, names: list[str]) -> Exit | None:
        deadline = self.ctx.monotonic() + self.deadline_s
        while True:
            jobs = parse_jobs(self.shell.must(JOBS.format(nodes=node_list(names))))
            decision: Drain = drain_decision(jobs, self.ctx.monotonic(), deadline)
            if decision.action == "update":
                return None
            if decision.action == "requeue":
                self.shell.must(f"scontrol requeue {shlex.quote(','.join(decision.jobs))}")
                self.say(f"{group}: drain deadline passed: requeued job(s) {', '.join(decision.jobs)}")
            elif decision.action == "stop":
                self.progress.note = (
                    f"{group}: job(s) {', '.join(decision.jobs)} still run on {','.join(names)} after the drain "
                    "deadline and cannot be requeued (not batch jobs, or submitted with --no-requeue): let them finish "
                    "or cancel them, then run again with --resume"
                )
                save_progress(self.path, self.progress)
                self.say(self.progress.note)
                return Exit.PENDING
            self.ctx.sleep(self.args.poll)

    def request(self, group: str) -> None:
        from botocore.exceptions import ClientError

        since = self.ctx.now()
        params: dict[str, Any] = {"ClusterName": self.cluster.name, "InstanceGroups": [{"InstanceGroupName": group}]}
        if self.progress.image_id:
            params["ImageId"] = self.progress.image_id
        try:
            self.aws.sagemaker.update_cluster_software(**params)
        except ClientError as error:
            if error_code(error) != "ConflictException":
                raise
            self.say(f"{group}: an update is already in progress (ConflictException): waiting for it")
        self.progress.requested_at[group] = since
        self.phase(group, "updating")
        self.say(f"{group}: UpdateClusterSoftware accepted; re-imaging its nodes")

    def wait_for_update(self, group: str) -> Exit | None:
        since = self.progress.requested_at.get(group, 0.0)
        deadline = self.ctx.monotonic() + self.args.update_timeout
        seen_progress = False
        while True:
            described = get_cluster(self.aws.sagemaker, self.cluster.name).group(group)
            status = described.get("SoftwareUpdateStatus")
            seen_progress = seen_progress or status in ("Pending", "InProgress")
            summaries = [s for s in self.summaries() if s.get("InstanceGroupName") == group]
            if status in FAILED_STATUS:
                self.progress.note = f"{group}: the software update ended {status}: see `hyperpod-cdk status`"
                save_progress(self.path, self.progress)
                self.say(self.progress.note)
                return Exit.FAILED
            running = all((s.get("InstanceStatus") or {}).get("Status") == "Running" for s in summaries)
            times = [s.get("LastSoftwareUpdateTime") for s in summaries]
            if any(t is not None for t in times):
                updated = all(t is not None and t.timestamp() >= since - 5 for t in times)
            else:
                updated = status in FINISHED and seen_progress
            if running and updated:
                return None
            if self.ctx.monotonic() >= deadline:
                raise OpsError(
                    f"{group}: not updated after {self.args.update_timeout:.0f} s (SoftwareUpdateStatus {status}); "
                    "run again with --resume to keep waiting",
                    Exit.PENDING,
                )
            self.ctx.sleep(self.args.poll)

    def summaries(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in self.aws.sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=self.cluster.name):
            found.extend(page.get("ClusterNodeSummaries", []))
        return found

    def wait_for_slurm(self, group: str) -> None:
        """After a group without Slurm nodes (a controller or login group): until ``scontrol ping`` answers on the
        controller again (its session fails while the controller itself is re-imaged)."""
        deadline = self.ctx.monotonic() + self.args.update_timeout
        while True:
            try:
                if self.shell.run("scontrol ping").code == 0:
                    self.say(f"{group}: Slurm's controller answers again")
                    return
            except OpsError:
                pass
            if self.ctx.monotonic() >= deadline:
                raise OpsError(f"{group}: Slurm's controller does not answer; run again with --resume", Exit.PENDING)
            self.ctx.sleep(self.args.poll)

    def verify(self, group: str, names: list[str]) -> bool:
        nodes, reservation = node_list(names), shlex.quote(f"hyperpod-cdk-update-{group}")
        shown = ",".join(names)
        deadline = self.ctx.monotonic() + self.args.update_timeout
        while True:  # a re-imaged node's slurmd registers again once its lifecycle script has run
            records = {r.name: r for r in parse_nodes(self.shell.must("scontrol -o show nodes"))}
            if all(n in records and records[n].responding for n in names):
                break
            if self.ctx.monotonic() >= deadline:
                raise OpsError(f"{group}: {shown} did not answer Slurm again; run again with --resume", Exit.PENDING)
            self.ctx.sleep(self.args.poll)
        self.shell.run(f"scontrol delete ReservationName={reservation} >/dev/null 2>&1")
        self.shell.must(
            f"scontrol create reservation ReservationName={reservation} Nodes={nodes} StartTime=now Duration=60 "
            "Users=root Flags=MAINT,IGNORE_JOBS"
        )
        self.shell.must(f"scontrol update NodeName={nodes} State=RESUME")
        job = (
            f"srun --reservation={reservation} -J hyperpod-cdk-verify -N {len(names)} -w {nodes} --ntasks-per-node=1 "
            f"-t 15 {VERIFY}"
        )
        answer = self.shell.run(job, timeout=VERIFY_TIMEOUT_S)
        self.shell.run(f"scontrol delete ReservationName={reservation}")
        self.progress.verified[group] = list(names)
        if answer.code == 0:
            save_progress(self.path, self.progress)
            self.say(f"{group}: verification job passed on {shown}")
            return True
        self.shell.run(f"scontrol update NodeName={nodes} State=DRAIN Reason={shlex.quote(FAILED_REASON)}")
        last = (answer.output.strip() or "no output").splitlines()[-3:]
        self.progress.note = f"{group}: the verification job failed (exit {answer.code}): {' | '.join(last)}"
        save_progress(self.path, self.progress)
        self.say(f"{self.progress.note}; its nodes are drained again. Fix them, then run again with --resume")
        return False


def slurm_names(view: slurm_state.SlurmView, nodes: Sequence[Node], group: str) -> list[str]:
    records = view.records
    names = sorted(records[n.instance_id].name for n in nodes if n.group == group and n.instance_id in records)
    node_list(names)  # a name that is not a node name stops the command before it changes anything
    return names


def node_list(names: Sequence[str]) -> str:
    """``names`` as one argument of a command line on the controller (a quoted comma-separated list), each checked
    against the node name grammar first: every value this command puts into the session's shell line is quoted."""
    try:
        return shlex.quote(",".join(node_name(n) for n in names))
    except SlurmTextError as error:
        said = f"on the controller, Slurm listed a node update-software will not name: {error}"
        raise OpsError(said, Exit.FAILED) from None


def update_software(args: argparse.Namespace, ctx: OpsContext) -> int:
    refuse_batches(args)
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    everyone = list_nodes(aws.sagemaker, cluster.name)
    view = slurm_state.read(args, ctx, cluster, everyone)
    if view.note:
        raise OpsError(f"cannot read Slurm's nodes on the controller: {view.note}", Exit.FAILED)
    all_groups = [str(g.get("InstanceGroupName")) for g in cluster.groups]
    slurm_groups = {n.group for n in everyone if n.instance_id in view.records}
    path = progress_path(ctx.home, cluster.name)
    roll = Roll(args, ctx, aws, cluster, path)
    groups = order_groups(all_groups, slurm_groups, args.groups)
    roll.progress = start_or_resume(path, cluster.name, groups, args.image_id, args.resume, bool(args.groups))
    roll.progress.note = ""  # why the interrupted run stopped: this run says its own
    roll.names = {g: slurm_names(view, everyone, g) for g in roll.progress.groups}
    todo = [g for g in roll.progress.groups if roll.progress.phase(g) != DONE]
    if args.dry_run or not _confirmed(args, ctx, cluster, roll, todo):
        _report(args, ctx, roll, Exit.OK if args.dry_run else Exit.DECLINED, dry_run=args.dry_run)
        return Exit.OK if args.dry_run else Exit.DECLINED
    save_progress(path, roll.progress)
    controller = pick_node(cluster, everyone, None, None)
    roll.shell = ControllerShell(args, ctx, cluster.ssm_target(controller))
    outcome = Exit.OK
    for group in roll.progress.groups:
        if roll.progress.phase(group) == DONE:
            ctx.err.print(f"{group}: already updated and verified (recorded in {path}): skipped")
            continue
        outcome = roll.group(group)
        if outcome != Exit.OK:
            break
    _report(args, ctx, roll, outcome)
    return outcome


def _confirmed(args: argparse.Namespace, ctx: OpsContext, cluster: Cluster, roll: Roll, todo: list[str]) -> bool:
    if args.yes or args.dry_run:
        return True
    count = sum(len(roll.names[g]) for g in todo)
    controllers = [g for g in todo if g in cluster.controller_groups]
    if controllers:
        ctx.err.print(
            f"{', '.join(controllers)} runs slurmctld: its root volume holds slurmctld's state (with one controller) "
            "and a local accounting database (/var/lib/mysql); both are lost unless they live on /fsx or in an "
            "external database. Slurm is unavailable while it is re-imaged."
        )
    ctx.err.print(
        "UpdateClusterSoftware re-images the root volume of every node of each group (data on root volumes is lost); "
        'AWS: it "may impact your SageMaker HyperPod cluster uptime and availability".'
    )
    return ctx.confirm(f"update groups {', '.join(todo)} of {cluster.name} ({count} Slurm node(s)), one at a time?")


def _report(args: argparse.Namespace, ctx: OpsContext, roll: Roll, outcome: Exit, dry_run: bool = False) -> None:
    progress = roll.progress
    rows: list[dict[str, Any]] = [
        {
            "group": g,
            "phase": progress.phase(g),
            "slurm_nodes": roll.names.get(g, []),
            "verified_on": progress.verified.get(g),
        }
        for g in progress.groups
    ]
    if args.json:
        print_json(
            ctx,
            {
                "cluster": progress.cluster,
                "dry_run": dry_run,
                "image_id": progress.image_id,
                "groups": rows,
                "note": progress.note or None,
                "progress_file": str(roll.path),
                "exit_status": int(outcome),
            },
        )
        return
    title = "Dry run: would update" if dry_run else "update-software"
    ctx.out.print(f"{title} {progress.cluster}, group by group:")
    for group in progress.groups:
        names = ", ".join(roll.names.get(group, [])) or "no Slurm nodes"
        ctx.out.print(f"  {group}: {progress.phase(group)} ({names})")
    if progress.note:
        ctx.out.print(progress.note)
