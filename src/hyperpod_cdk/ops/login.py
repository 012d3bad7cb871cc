"""``login drain NODE`` and ``login undrain NODE``: take a login node of the login pool out of the load balancer's
rotation, or put it back, without touching its open sessions.

The node's own ``login drain`` (root, :mod:`training_runtime.login_pool.cli`, installed as
:data:`training_runtime.steps.login_pool.POOL_PROGRAM`) writes or removes its drain marker; its health endpoint then
answers 503 (or 200 again) and the target group stops (or starts again) sending it new connections after its
unhealthy (healthy) threshold of checks (docs/login-pool-node.md). It runs through SSM Session Manager as the
controller's commands do (:class:`~hyperpod_cdk.ops.controller_shell.ControllerShell`, the node's
``sagemaker-cluster:`` target, ``AWS-StartNonInteractiveCommand``). ``NODE`` is looked up in ListClusterNodes first
(an instance id, a Slurm hostname or an address); the command sent is one of two fixed strings, never built from it.
"""

from __future__ import annotations

import argparse
import json

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.controller_shell import ControllerShell
from hyperpod_cdk.ops.lookup import get_cluster, list_nodes, resolve_nodes
from hyperpod_cdk.ops.render import to_json

TIMEOUT_S = 60.0


def node_command(action: str) -> str:
    """What runs on the node, as root: the runtime's ``login drain`` or ``login undrain`` (fixed strings)."""
    from training_runtime.steps.login_pool import POOL_PROGRAM

    if action not in ("drain", "undrain"):
        raise ValueError(action)
    return f"sudo -n {POOL_PROGRAM} {action}"


def drain(args: argparse.Namespace, ctx: OpsContext) -> int:
    return _run("drain", args, ctx)


def undrain(args: argparse.Namespace, ctx: OpsContext) -> int:
    return _run("undrain", args, ctx)


def _run(action: str, args: argparse.Namespace, ctx: OpsContext) -> int:
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    (node,) = resolve_nodes(list_nodes(aws.sagemaker, cluster.name), [args.node], cluster.name)
    if node.group in cluster.controller_groups:
        raise OpsError(
            f"{args.node} is in group {node.group}, a Slurm controller group: only login nodes of a login pool drain",
            Exit.UNSUPPORTED,
        )
    shell = ControllerShell(args, ctx, cluster.ssm_target(node), timeout=TIMEOUT_S)
    answer = shell.run(node_command(action))
    lines = [line for line in answer.output.splitlines() if line.startswith("{")]
    said = json.loads(lines[-1]) if lines else None
    if answer.code != 0 or said is None:
        last = (answer.output.strip() or "no output").splitlines()[-1]
        raise OpsError(
            f"`login {action}` on {node.instance_id} exited {answer.code}: {last} (is it a login node of a cluster "
            "with login_pool?)",
            Exit.FAILED,
        )
    result = {"cluster": cluster.name, "node": node.instance_id, "group": node.group, **said}
    if args.json:
        ctx.write(to_json(result))
    else:
        state = "drained: no new sessions" if action == "drain" else "back in the pool: takes new sessions"
        change = "" if said.get("changed") else " (it already was)"
        ctx.write(f"{node.instance_id} ({node.hostname or node.group}) {state}{change}")
    return Exit.OK
