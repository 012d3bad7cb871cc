"""``status`` and ``wait``: DescribeCluster and ListClusterNodes, as tables, JSON and a live progress display."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.lookup import Cluster, Node, get_cluster, list_nodes, log_stream
from hyperpod_cdk.ops.render import node_table, print_json, styled, table

SETTLED_BAD = {"Failed"}
CHANGING = {"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting"}
BAD_GROUP = {"Degraded", "Failed"}
BAD_NODE = {"Failure", "NotFound"}


def outcome(cluster: Cluster) -> Exit:
    """0 InService with every group healthy; 1 Failed or a group Degraded/Failed; 6 still changing."""
    if cluster.status in SETTLED_BAD:
        return Exit.FAILED
    if cluster.status in CHANGING:
        return Exit.PENDING
    if any(g.get("Status") in BAD_GROUP for g in cluster.groups):
        return Exit.FAILED
    return Exit.OK


def group_rows(cluster: Cluster) -> list[dict[str, Any]]:
    return [
        {
            "name": g.get("InstanceGroupName"),
            "instance_type": g.get("InstanceType")
            or ",".join((g.get("InstanceRequirements") or {}).get("InstanceTypes", [])),
            "slurm_node_type": (g.get("SlurmConfig") or {}).get("NodeType"),
            "current_count": g.get("CurrentCount"),
            "target_count": g.get("TargetCount"),
            "status": g.get("Status"),
        }
        for g in cluster.groups
    ]


def report(cluster: Cluster, nodes: Sequence[Node]) -> dict[str, Any]:
    return {
        "cluster": cluster.name,
        "arn": cluster.arn,
        "status": cluster.status,
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
    nodes = list_nodes(aws.sagemaker, cluster.name, args.group)
    code = outcome(cluster)
    if args.json:
        print_json(ctx, {**report(cluster, nodes), "exit_status": int(code)})
        return code
    ctx.out.print(f"Cluster [bold]{cluster.name}[/bold]: {styled(cluster.status)}  ({cluster.arn})")
    if cluster.failure_message:
        ctx.out.print(f"[red]Failure:[/red] {cluster.failure_message}")
    ctx.out.print(
        table(
            "Instance groups",
            ["Group", "Type", "Slurm", "Current/Target", "Status"],
            [
                [
                    str(row["name"]),
                    str(row["instance_type"] or ""),
                    str(row["slurm_node_type"] or ""),
                    f"{row['current_count']}/{row['target_count']}",
                    styled(str(row["status"] or "")),
                ]
                for row in group_rows(cluster)
            ],
        )
    )
    ctx.out.print(node_table(nodes))
    return code


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
            nodes = list_nodes(aws.sagemaker, cluster.name)
            progress.update(headline, description=f"cluster {cluster.name}: {cluster.status}")
            for group in cluster.groups:
                name = str(group.get("InstanceGroupName"))
                ready = sum(1 for n in nodes if n.group == name and n.status == "Running")
                total = int(group.get("TargetCount") or 0)
                if name not in tasks:
                    tasks[name] = progress.add_task(f"  {name} ready", total=total)
                progress.update(tasks[name], completed=ready, total=total)
            if cluster.status == "InService" or cluster.status in SETTLED_BAD:
                break
            if ctx.monotonic() >= deadline:
                break
            ctx.sleep(args.interval)
    waited = round(ctx.monotonic() - started, 1)
    if cluster.status == "InService":
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
