"""``status`` and ``wait``: DescribeCluster and ListClusterNodes, as tables, JSON and a live progress display.

A cluster with Continuous node provisioning "stays InService while it scales": its status says nothing about
whether the groups have their nodes. So for such a cluster both commands compare each group's ``CurrentCount``
with its ``TargetCount`` and read the group's ``ActiveOperations`` (``Scaling: 1`` while a scaling operation
runs), and ``status`` lists the cluster's operations in progress (ListClusterOperations). Each group's
``ImageVersionStatus`` (UpToDate, UpdateAvailable, SecurityUpdateRequired, EndOfLife) is shown too.

Sources (API reference): DescribeCluster / ClusterInstanceGroupDetails
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceGroupDetails.html),
ListClusterOperations (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ListClusterOperations.html);
continuous provisioning for Slurm
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-scaling-slurm.html).

Where the cluster runs the capacity scaler (docs/scaler.md), its heartbeat is the cluster tag
``hyperpod-cdk:scaler`` (ListTags, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ListTags.html),
parsed by the runtime's one parser (:func:`training_runtime.scaler.heartbeat.parse_heartbeat`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from hyperpod_cdk.aws.clients import ACCESS_DENIED, Aws, error_code, error_message
from hyperpod_cdk.aws.errors import Exit
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.lookup import Cluster, Node, get_cluster, list_nodes, log_stream
from hyperpod_cdk.ops.render import node_table, print_json, styled, table, when
from hyperpod_cdk.ops.security import for_running, running_lines
from hyperpod_cdk.ops.slurm_state import SlurmView
from hyperpod_cdk.ops.slurm_state import read as read_slurm
from training_runtime.scaler.heartbeat import TAG_KEY, describe, parse_heartbeat

SETTLED_BAD = {"Failed"}
CHANGING = {"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting"}
BAD_GROUP = {"Degraded", "Failed"}
BAD_NODE = {"Failure", "NotFound"}
STALE_IMAGE = {"SecurityUpdateRequired", "EndOfLife"}
SCALER_STALE_S = 900.0
"""A scaler heartbeat older than this is shown as stale (the service tags at most every 5 minutes, errors or not)."""


def scaler_heartbeat(sagemaker: Any, cluster: Cluster, now: Callable[[], float] = time.time) -> dict[str, Any] | None:
    """The scaler's heartbeat tag, parsed: None where the cluster has none (no scaler); a ``note`` where it cannot
    be read (ListTags refused, a value that is not a heartbeat)."""
    from botocore.exceptions import ClientError

    try:
        tags: dict[str, str] = {}
        for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=cluster.arn):
            tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    except ClientError as error:
        return {"note": f"ListTags: {error_code(error)}: {error_message(error)}"}
    value = tags.get(TAG_KEY)
    if value is None:
        return None
    try:
        beat = parse_heartbeat(value)
    except ValueError as error:
        return {"value": value, "note": str(error)}
    age = now() - beat.at
    return {
        "value": value,
        "status": beat.status,
        "age_s": round(age),
        "stale": age > SCALER_STALE_S,
        "pending_nodes": beat.pending,
        "error": beat.error,
        "groups": [{"name": g.name, "target": g.target, "min": g.min, "max": g.max} for g in beat.groups],
        "line": describe(beat, now()),
    }


def scaling(cluster: Cluster) -> list[str]:
    """The groups of a Continuous cluster that do not have their nodes yet: fewer than TargetCount, or a
    scaling operation active. Empty for other clusters (their status is Updating while they scale)."""
    if not cluster.continuous:
        return []
    return [
        str(g.get("InstanceGroupName"))
        for g in cluster.groups
        if int(g.get("CurrentCount") or 0) < int(g.get("TargetCount") or 0)
        or any((g.get("ActiveOperations") or {}).values())
    ]


def outcome(cluster: Cluster) -> Exit:
    """0 InService with every group healthy and complete; 1 Failed, or a group Degraded/Failed once nothing is
    changing (on a Continuous cluster, which stays InService, a Failed group at once); 6 still changing, a
    Continuous cluster's scaling included."""
    if cluster.status in SETTLED_BAD or (
        cluster.continuous and any(g.get("Status") == "Failed" for g in cluster.groups)
    ):
        return Exit.FAILED
    if cluster.status in CHANGING or scaling(cluster):
        return Exit.PENDING
    if any(g.get("Status") in BAD_GROUP for g in cluster.groups):
        return Exit.FAILED
    return Exit.OK


def settled(cluster: Cluster) -> bool:
    """What ``wait`` waits for: Failed, or InService with (on a Continuous cluster) every group complete or
    a group Failed."""
    if cluster.status in SETTLED_BAD:
        return True
    if cluster.status != "InService":
        return False
    return not scaling(cluster) or any(g.get("Status") == "Failed" for g in cluster.groups)


def operations(sagemaker: Any, cluster: Cluster) -> tuple[list[dict[str, Any]], str | None]:
    """A Continuous cluster's operations in progress (ListClusterOperations), or none and why not.

    Only Continuous clusters are asked: the operations the call reports (scaling, on-demand deep health checks)
    are Continuous-provisioning features on Slurm (sagemaker-hyperpod-scaling-slurm,
    sagemaker-hyperpod-resiliency-slurm-deep-health-checks); other clusters show scaling as ``Updating``. The
    call is newer than the rest (botocore 1.44) and an IAM policy written before it may not allow it, so a
    refusal is a note, not a failure."""
    from botocore.exceptions import ClientError

    if not cluster.continuous:
        return [], None
    found: list[dict[str, Any]] = []
    try:
        for page in sagemaker.get_paginator("list_cluster_operations").paginate(
            ClusterName=cluster.name, Status="InProgress"
        ):
            found.extend(page.get("ClusterOperationSummaries", []))
    except ClientError as error:
        code = error_code(error)
        if code in ACCESS_DENIED or code in ("ValidationException", "UnknownOperationException"):
            return [], f"ListClusterOperations: {code}: {error_message(error)}"
        raise
    return found, None


def group_rows(cluster: Cluster) -> list[dict[str, Any]]:
    return [
        {
            "name": g.get("InstanceGroupName"),
            "instance_type": g.get("InstanceType")
            or ",".join((g.get("InstanceRequirements") or {}).get("InstanceTypes", [])),
            "slurm_node_type": (g.get("SlurmConfig") or {}).get("NodeType"),
            "current_count": g.get("CurrentCount"),
            "target_count": g.get("TargetCount"),
            "min_count": g.get("MinCount"),
            "status": g.get("Status"),
            "active_operations": g.get("ActiveOperations") or {},
            "image_version_status": g.get("ImageVersionStatus"),
            "image_release_version": g.get("CurrentImageReleaseVersion"),
        }
        for g in cluster.groups
    ]


def report(cluster: Cluster, nodes: Sequence[Node]) -> dict[str, Any]:
    return {
        "cluster": cluster.name,
        "arn": cluster.arn,
        "status": cluster.status,
        "node_provisioning_mode": cluster.raw.get("NodeProvisioningMode"),
        "scaling_groups": scaling(cluster),
        "failure_message": cluster.failure_message or None,
        "log_group": cluster.log_group,
        "groups": group_rows(cluster),
        "nodes": [n.as_json() for n in nodes],
    }


def status(args: argparse.Namespace, ctx: OpsContext) -> int:
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    if args.group:
        cluster.group(args.group)
    nodes = list_nodes(aws.sagemaker, cluster.name, args.group, logical_ids=cluster.continuous)
    running, note = operations(aws.sagemaker, cluster)
    scaler = scaler_heartbeat(aws.sagemaker, cluster)
    slurm = _slurm(args, ctx, aws, cluster, nodes) if args.slurm else None
    code = outcome(cluster)
    if args.json:
        extra = {"operations": running, "operations_note": note, "scaler": scaler, "exit_status": int(code)}
        found = report(cluster, nodes)
        if slurm is not None:
            found["nodes"] = [{**row, "slurm": slurm.as_json(n)} for row, n in zip(found["nodes"], nodes, strict=True)]
            extra["slurm_note"] = slurm.note
            extra["slurm_security"] = for_running(slurm.versions())
        print_json(ctx, {**found, **extra})
        return code
    mode = "  [Continuous provisioning]" if cluster.continuous else ""
    ctx.out.print(f"Cluster [bold]{cluster.name}[/bold]: {styled(cluster.status)}{mode}  ({cluster.arn})")
    if cluster.failure_message:
        ctx.out.print(f"[red]Failure:[/red] {cluster.failure_message}")
    ctx.out.print(
        table(
            "Instance groups",
            ["Group", "Type", "Slurm", "Current/Target", "Status", "Operations", "Image"],
            [
                [
                    str(row["name"]),
                    str(row["instance_type"] or ""),
                    str(row["slurm_node_type"] or ""),
                    f"{row['current_count']}/{row['target_count']}",
                    styled(str(row["status"] or "")),
                    ", ".join(f"{k} {v}" for k, v in row["active_operations"].items()),
                    " ".join(str(row[k]) for k in ("image_version_status", "image_release_version") if row[k]),
                ]
                for row in group_rows(cluster)
            ],
        )
    )
    short = scaling(cluster)
    if short:
        ctx.out.print(
            f"[yellow]Scaling:[/yellow] {', '.join(short)} (Continuous provisioning keeps the cluster InService "
            "while its groups scale: compare Current/Target)"
        )
    if running:
        ctx.out.print(
            table(
                "Operations in progress",
                ["Operation", "Type", "Status", "Since"],
                [
                    [
                        str(o.get("OperationId", "")),
                        str(o.get("Type", "")),
                        str(o.get("Status", "")),
                        when(o.get("CreationTime")),
                    ]
                    for o in running
                ],
            )
        )
    if note:
        ctx.out.print(f"(operations not listed: {note})")
    if scaler is not None:
        line = scaler.get("line") or f"{scaler.get('value', '')} ({scaler['note']})"
        colour = "red" if scaler.get("stale") or scaler.get("status") == "error" else "green"
        flag = " [red]STALE[/red]" if scaler.get("stale") else ""
        ctx.out.print(f"[{colour}]Scaler:[/{colour}] {line}{flag}")
    stale = [str(r["name"]) for r in group_rows(cluster) if r["image_version_status"] in STALE_IMAGE]
    if stale:
        ctx.out.print(
            f"[yellow]Image:[/yellow] {', '.join(stale)} run an AMI that needs an update "
            f"(`hyperpod-cdk update-software {cluster.name} --groups {','.join(stale)}`, or the groups' "
            "scheduled_update)"
        )
    ctx.out.print(node_table(nodes, slurm=slurm.cell if slurm is not None else None))
    if slurm is not None and slurm.note:
        ctx.out.print(f"[yellow]Slurm state not shown:[/yellow] {slurm.note}")
    if slurm is not None:
        for line in running_lines(for_running(slurm.versions())):
            ctx.out.print(line, markup=False)
    return code


def _slurm(args: argparse.Namespace, ctx: OpsContext, aws: Aws, cluster: Cluster, nodes: list[Node]) -> SlurmView:
    """``--slurm``: read on the controller (the whole node list, so a ``--group`` view still finds it)."""
    everyone = list_nodes(aws.sagemaker, cluster.name) if args.group else nodes
    return read_slurm(args, ctx, cluster, everyone)


def wait(args: argparse.Namespace, ctx: OpsContext) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    aws = Aws(ctx.session(args.profile, args.region))
    started = ctx.monotonic()
    deadline = started + args.timeout
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=ctx.err, disable=args.json) as progress:
        tasks: dict[str, Any] = {}
        headline = progress.add_task("cluster: ?", total=None)
        while True:
            cluster = get_cluster(aws.sagemaker, args.cluster)
            nodes = list_nodes(aws.sagemaker, cluster.name, logical_ids=cluster.continuous)
            progress.update(headline, description=f"cluster {cluster.name}: {cluster.status}")
            for group in cluster.groups:
                name = str(group.get("InstanceGroupName"))
                ready = sum(1 for n in nodes if n.group == name and n.status == "Running")
                total = int(group.get("TargetCount") or 0)
                if name not in tasks:
                    tasks[name] = progress.add_task(f"  {name} ready", total=total)
                progress.update(tasks[name], completed=ready, total=total)
            if settled(cluster) or ctx.monotonic() >= deadline:
                break
            ctx.sleep(args.interval)
    waited = round(ctx.monotonic() - started, 1)
    if cluster.status == "InService" and settled(cluster):
        code = outcome(cluster)
        if args.json:
            print_json(ctx, {**report(cluster, nodes), "waited_s": waited, "exit_status": int(code)})
        else:
            ctx.out.print(f"Cluster {cluster.name} is {styled('InService')} after {waited:.0f} s")
            if code != Exit.OK:
                ctx.out.print("[yellow]but a group is Degraded or Failed: run `hyperpod-cdk status`[/yellow]")
        return code
    if cluster.status in SETTLED_BAD:
        return _failed(args, ctx, cluster, nodes, waited)
    if args.json:
        print_json(ctx, {**report(cluster, nodes), "waited_s": waited, "timed_out": True, "exit_status": 6})
    elif cluster.status == "InService":
        counts = ", ".join(
            f"{g.get('InstanceGroupName')} {g.get('CurrentCount')}/{g.get('TargetCount')}"
            for g in cluster.groups
            if str(g.get("InstanceGroupName")) in scaling(cluster)
        )
        ctx.err.print(
            f"timed out after {waited:.0f} s: cluster {cluster.name} is InService but still scaling ({counts}); "
            "Continuous provisioning keeps retrying: `hyperpod-cdk events` says why"
        )
    else:
        ctx.err.print(f"timed out after {waited:.0f} s: cluster {cluster.name} is still {cluster.status}")
    return Exit.PENDING


def _failed(args: argparse.Namespace, ctx: OpsContext, cluster: Cluster, nodes: Sequence[Node], waited: float) -> int:
    failing = [n for n in nodes if n.status in BAD_NODE or n.status != "Running"]
    streams = [
        {**n.as_json(), "log_group": cluster.log_group, "log_stream": log_stream("lifecycle", n)} for n in failing
    ]
    if args.json:
        print_json(ctx, {**report(cluster, nodes), "waited_s": waited, "failing_nodes": streams, "exit_status": 1})
        return Exit.FAILED
    ctx.out.print(f"Cluster {cluster.name} is {styled(cluster.status)}: {cluster.failure_message or '(no message)'}")
    if failing:
        ctx.out.print(
            table(
                f"Failing nodes (log group {cluster.log_group})",
                ["Instance", "Group", "Status", "Message", "Lifecycle log stream"],
                [[n.instance_id, n.group, styled(n.status), n.message, log_stream("lifecycle", n)] for n in failing],
            )
        )
        ctx.out.print(f"Read them with: hyperpod-cdk logs {cluster.name} --node {failing[0].instance_id}")
    return Exit.FAILED
