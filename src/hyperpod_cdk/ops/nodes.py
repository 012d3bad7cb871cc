"""``reboot`` and ``replace``: BatchRebootClusterNodes / BatchReplaceClusterNodes, per-node results.

The APIs take at most 25 node ids per call and answer per node (partial success is normal), so the command
splits the nodes into batches and reports every node: Successful, or Failed with the service's code.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from hyperpod_cdk.aws.clients import ACCESS_DENIED, BAD_CREDENTIALS, THROTTLED, Aws, error_code, error_message
from hyperpod_cdk.aws.errors import Exit
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.lookup import Node, get_cluster, list_nodes, resolve_nodes
from hyperpod_cdk.ops.render import print_json, styled, table

BATCH_LIMIT = 25
"""NodeIds per BatchReboot/BatchReplaceClusterNodes call (the API's list maximum)."""

VERBS = {
    "reboot": ("batch_reboot_cluster_nodes", "Soft-reboot (EC2 RebootInstances); Slurm jobs on them are killed."),
    "replace": (
        "batch_replace_cluster_nodes",
        "Replace with new hardware: every volume of these nodes, root and secondary, is destroyed.",
    ),
}


def batches(nodes: Sequence[Node], size: int = BATCH_LIMIT) -> list[list[Node]]:
    return [list(nodes[i : i + size]) for i in range(0, len(nodes), size)]


def reboot(args: argparse.Namespace, ctx: OpsContext) -> int:
    return _run("reboot", args, ctx)


def replace(args: argparse.Namespace, ctx: OpsContext) -> int:
    return _run("replace", args, ctx)


def _run(verb: str, args: argparse.Namespace, ctx: OpsContext) -> int:
    from botocore.exceptions import ClientError

    operation, warning = VERBS[verb]
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    nodes = resolve_nodes(list_nodes(aws.sagemaker, cluster.name), args.nodes, cluster.name)
    plan = batches(nodes)
    if args.dry_run:
        calls = [
            {"operation": operation, "ClusterName": cluster.name, "NodeIds": [n.instance_id for n in b]} for b in plan
        ]
        if args.json:
            print_json(ctx, {"dry_run": True, "calls": calls, "nodes": [n.as_json() for n in nodes]})
        else:
            ctx.out.print(
                f"Dry run: {verb} {len(nodes)} node(s) of {cluster.name} in {len(plan)} call(s) of {operation}"
            )
            for number, call in enumerate(calls, 1):
                ctx.out.print(f"  call {number}: NodeIds={' '.join(call['NodeIds'])}")
        return Exit.OK
    if not args.yes:
        names = ", ".join(f"{n.instance_id} ({n.hostname or n.group})" for n in nodes[:10])
        more = f" and {len(nodes) - 10} more" if len(nodes) > 10 else ""
        ctx.err.print(warning)
        if not ctx.confirm(f"{verb} {len(nodes)} node(s) of cluster {cluster.name}: {names}{more}?"):
            ctx.err.print("nothing changed (pass --yes to skip the question)")
            return Exit.DECLINED
    results: list[dict[str, Any]] = []
    call = getattr(aws.sagemaker, operation)
    for batch in plan:
        by_id = {n.instance_id: n for n in batch}
        try:
            response = call(ClusterName=cluster.name, NodeIds=list(by_id))
        except ClientError as error:
            code = error_code(error)
            if code in ACCESS_DENIED | BAD_CREDENTIALS | THROTTLED:
                raise
            results += [_result(n, "Failed", code, error_message(error)) for n in batch]
            continue
        for node_id in response.get("Successful", []):
            if node_id in by_id:
                results.append(_result(by_id.pop(node_id), "Successful"))
        for failure in response.get("Failed", []):
            node = by_id.pop(failure.get("NodeId", ""), None)
            if node is not None:
                results.append(_result(node, "Failed", failure.get("ErrorCode", ""), failure.get("Message", "")))
        results += [_result(n, "Failed", "NoAnswer", "the service did not report this node") for n in by_id.values()]
    failed = [r for r in results if r["result"] != "Successful"]
    outcome = Exit.FAILED if failed else Exit.OK
    if args.json:
        print_json(ctx, {"cluster": cluster.name, "action": verb, "results": results, "exit_status": int(outcome)})
        return outcome
    ctx.out.print(
        table(
            f"{verb} on {cluster.name}",
            ["Instance", "Slurm hostname", "Group", "Result", "Error", "Message"],
            [
                [r["instance_id"], r["hostname"], r["group"], styled(r["result"]), r["error_code"], r["message"]]
                for r in results
            ],
        )
    )
    ctx.out.print(f"{len(results) - len(failed)} of {len(results)} node(s) accepted; {len(failed)} failed")
    return outcome


def _result(node: Node, result: str, code: str = "", message: str = "") -> dict[str, Any]:
    return {
        "instance_id": node.instance_id,
        "hostname": node.hostname,
        "group": node.group,
        "result": "Successful" if result == "Successful" else "Failed",
        "error_code": code,
        "message": message,
    }
