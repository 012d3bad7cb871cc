"""``reboot``, ``replace`` and ``delete``: the Batch*ClusterNodes APIs, on their documented terms.

What the API reference says, and what the commands do about it:

- BatchRebootClusterNodes and BatchReplaceClusterNodes take 1 to 25 ``NodeIds`` and 1 to 25 ``NodeLogicalIds``
  per request; BatchDeleteClusterNodes takes "a combined maximum of 50 identifiers". botocore enforces no list
  maximum on the client, so the commands split the nodes into calls of at most 25 (50 for delete) identifiers
  in all, and merge the answers: every node is reported Successful, or Failed with the service's code.
  Partial success is normal (each response has ``Successful`` and ``Failed`` lists).
- "For SageMaker HyperPod clusters using the Slurm workload manager, you cannot replace instances that are
  configured as Slurm controller nodes" (BatchReplaceClusterNodes, ``NodeIds``) and "you cannot remove
  instances that are configured as Slurm controller nodes" (BatchDeleteClusterNodes, ``NodeIds``). So
  ``replace`` and ``delete`` refuse a controller node with one line before any call. Reboot has no such rule
  (its page asks only to "ensure rebooting nodes will not disrupt critical cluster operations"): ``reboot``
  of a controller goes ahead, and the confirmation says that Slurm's controller will be down meanwhile.
- ``NodeLogicalIds`` (nodes still being provisioned, with no instance id yet) exist "only for clusters using
  Continuous as the NodeProvisioningMode"; such nodes are sent by their logical id.
- BatchAddClusterNodes (at most 5 groups and 50 nodes per call) is not used: ``scale`` sets a group's count.

Sources (API reference):
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_BatchRebootClusterNodes.html,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_BatchReplaceClusterNodes.html,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_BatchDeleteClusterNodes.html.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_cdk.aws.clients import ACCESS_DENIED, BAD_CREDENTIALS, THROTTLED, Aws, error_code, error_message
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.lookup import Cluster, Node, get_cluster, list_nodes, resolve_nodes
from hyperpod_cdk.ops.render import print_json, styled, table
from training_runtime.hyperpod_facts import DELETE_NODES_MAX, REBOOT_NODES_MAX, REPLACE_NODES_MAX

API_REFERENCE = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_{}.html"


@dataclass(frozen=True)
class Verb:
    """One Batch*ClusterNodes API as a command uses it."""

    api: str
    limit: int
    """Identifiers (NodeIds and NodeLogicalIds together) per call."""
    warning: str
    refuses_controllers: bool
    """The API reference says the call cannot act on Slurm controller nodes."""
    lowers_count: bool = False
    """The nodes leave the cluster: their groups' counts go down (and drift from a stack that owns them)."""

    @property
    def operation(self) -> str:
        """The boto3 method."""
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in self.api).lstrip("_")

    @property
    def source(self) -> str:
        return API_REFERENCE.format(self.api)


VERBS = {
    "reboot": Verb(
        "BatchRebootClusterNodes",
        REBOOT_NODES_MAX,
        "Soft-reboot (EC2 RebootInstances); Slurm jobs on them are killed.",
        refuses_controllers=False,
    ),
    "replace": Verb(
        "BatchReplaceClusterNodes",
        REPLACE_NODES_MAX,
        "Replace with new hardware: every volume of these nodes, root and secondary, is destroyed.",
        refuses_controllers=True,
    ),
    "delete": Verb(
        "BatchDeleteClusterNodes",
        DELETE_NODES_MAX,
        "Remove these nodes from the cluster: their volumes are destroyed and their groups' counts go down.",
        refuses_controllers=True,
        lowers_count=True,
    ),
}


def batches(nodes: Sequence[Node], size: int) -> list[list[Node]]:
    return [list(nodes[i : i + size]) for i in range(0, len(nodes), size)]


def request(cluster: str, batch: Sequence[Node]) -> dict[str, Any]:
    """One call's parameters: nodes with an instance id by ``NodeIds``, the others by ``NodeLogicalIds``."""
    params: dict[str, Any] = {"ClusterName": cluster}
    ids = [n.instance_id for n in batch if n.instance_id]
    logical = [n.logical_id for n in batch if not n.instance_id]
    if ids:
        params["NodeIds"] = ids
    if logical:
        params["NodeLogicalIds"] = logical
    return params


def reboot(args: argparse.Namespace, ctx: OpsContext) -> int:
    return _run("reboot", args, ctx)


def replace(args: argparse.Namespace, ctx: OpsContext) -> int:
    return _run("replace", args, ctx)


def delete(args: argparse.Namespace, ctx: OpsContext) -> int:
    return _run("delete", args, ctx)


def refuse_controllers(verb: str, cluster: Cluster, nodes: Sequence[Node]) -> None:
    """One line, before any call, when ``verb``'s API cannot act on Slurm controller nodes and one is named."""
    spec = VERBS[verb]
    controllers = cluster.controller_groups
    named = [n for n in nodes if n.group in controllers]
    if not spec.refuses_controllers or not named:
        return
    group = named[0].group
    which = ", ".join(n.instance_id or n.logical_id for n in named)
    raise OpsError(
        f"not sent: {which} in group {group} is a Slurm controller node ({controllers[group]}), and "
        f"{spec.api} cannot {verb} Slurm controller nodes ({spec.source}); leave it out",
        Exit.UNSUPPORTED,
    )


def _run(verb: str, args: argparse.Namespace, ctx: OpsContext) -> int:
    spec = VERBS[verb]
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    listed = list_nodes(aws.sagemaker, cluster.name, logical_ids=cluster.continuous)
    nodes = resolve_nodes(listed, args.nodes, cluster.name)
    refuse_controllers(verb, cluster, nodes)
    if spec.lowers_count and not _may_lower_counts(args, ctx, aws, cluster, nodes):
        return Exit.UNSUPPORTED
    plan = batches(nodes, spec.limit)
    if args.dry_run:
        calls = [{"operation": spec.api, **request(cluster.name, b)} for b in plan]
        if args.json:
            print_json(ctx, {"dry_run": True, "calls": calls, "nodes": [n.as_json() for n in nodes]})
        else:
            ctx.out.print(
                f"Dry run: {verb} {len(nodes)} node(s) of {cluster.name} in {len(plan)} call(s) of {spec.api}"
            )
            for number, call in enumerate(calls, 1):
                named = [*call.get("NodeIds", []), *call.get("NodeLogicalIds", [])]
                ctx.out.print(f"  call {number}: {' '.join(named)}")
        return Exit.OK
    if not args.yes:
        names = ", ".join(f"{n.instance_id or n.logical_id} ({n.hostname or n.group})" for n in nodes[:10])
        more = f" and {len(nodes) - 10} more" if len(nodes) > 10 else ""
        ctx.err.print(spec.warning)
        if any(n.group in cluster.controller_groups for n in nodes):
            ctx.err.print("This includes the Slurm controller: the scheduler is down until it is back.")
        if not ctx.confirm(f"{verb} {len(nodes)} node(s) of cluster {cluster.name}: {names}{more}?"):
            ctx.err.print("nothing changed (pass --yes to skip the question)")
            return Exit.DECLINED
    results = _call_all(aws, spec, cluster, plan)
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


def _call_all(aws: Aws, spec: Verb, cluster: Cluster, plan: Sequence[Sequence[Node]]) -> list[dict[str, Any]]:
    """Every call of the plan; one result per node, in the order the nodes were named."""
    from botocore.exceptions import ClientError

    call = getattr(aws.sagemaker, spec.operation)
    results: list[dict[str, Any]] = []
    for batch in plan:
        by_id = {n.instance_id: n for n in batch if n.instance_id}
        by_logical = {n.logical_id: n for n in batch if not n.instance_id}
        answered: dict[Node, dict[str, Any]] = {}
        try:
            response = call(**request(cluster.name, batch))
        except ClientError as error:
            code = error_code(error)
            if code in ACCESS_DENIED | BAD_CREDENTIALS | THROTTLED:
                raise
            results += [_result(n, "Failed", code, error_message(error)) for n in batch]
            continue
        for key, known in (("Successful", by_id), ("SuccessfulNodeLogicalIds", by_logical)):
            for ref in response.get(key, []):
                if ref in known:
                    answered[known[ref]] = _result(known[ref], "Successful")
        for key, field, known in (("Failed", "NodeId", by_id), ("FailedNodeLogicalIds", "NodeLogicalId", by_logical)):
            for failure in response.get(key, []):
                node = known.get(failure.get(field, ""))
                if node is not None:
                    # BatchDeleteClusterNodes names the code ``Code``, the others ``ErrorCode``.
                    code = failure.get("ErrorCode") or failure.get("Code") or ""
                    answered[node] = _result(node, "Failed", code, failure.get("Message", ""))
        results += [
            answered.get(n) or _result(n, "Failed", "NoAnswer", "the service did not report this node") for n in batch
        ]
    return results


def _may_lower_counts(
    args: argparse.Namespace, ctx: OpsContext, aws: Aws, cluster: Cluster, nodes: Sequence[Node]
) -> bool:
    """Deleting nodes lowers their groups' counts; a stack that owns the counts would set them back on the next
    deploy (as for ``scale``). Refuses, naming the config change, unless ``--allow-drift``."""
    from hyperpod_cdk.ops.scale import owning_stack

    stack = owning_stack(aws.sagemaker, cluster)
    if stack is None:
        return True
    changes = []
    for group, removed in Counter(n.group for n in nodes).items():
        count = int(cluster.group(group).get("TargetCount") or 0)
        changes.append(f"`count: {max(count - removed, 0)}` on the instance group named {group} (was {count})")
    text = "in the cluster config, set " + "; ".join(changes) + ", then deploy"
    if args.allow_drift:
        ctx.err.print(f"Stack {stack} owns these counts; keep it in step: {text}.")
        return True
    if args.json:
        print_json(ctx, {"cluster": cluster.name, "stack": stack, "refused": True, "config_change": text})
    else:
        ctx.err.print(
            f"not deleting: stack {stack} owns the counts of these groups, and deleting nodes lowers them; the next "
            f"deploy would add nodes back.\nChange it there instead: {text}.\n"
            "(--allow-drift deletes now anyway; make the same change before the next deploy.)"
        )
    return False


def _result(node: Node, result: str, code: str = "", message: str = "") -> dict[str, Any]:
    return {
        "instance_id": node.instance_id,
        "logical_id": node.logical_id or None,
        "hostname": node.hostname,
        "group": node.group,
        "result": "Successful" if result == "Successful" else "Failed",
        "error_code": code,
        "message": message,
    }
