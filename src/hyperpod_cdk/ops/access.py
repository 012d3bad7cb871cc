"""``connect``, ``port-forward`` and ``ssh-config``: SSM Session Manager to a node, never an open port (and, with a
login pool, ``ssh-config``'s block for the pool's name: :mod:`hyperpod_cdk.ops.pool_ssh`).

The commands build ``aws ssm start-session`` argument lists and hand them to the context's executor; the AWS
CLI v2 and its Session Manager plugin do the session.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import tempfile
from pathlib import Path

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.lookup import Cluster, Node, get_cluster, list_nodes, pick_node
from hyperpod_cdk.ops.pool_ssh import pool_alias, pool_block, pool_host_name
from hyperpod_cdk.ops.render import print_json
from training_runtime.option_types import TCP_PORTS

SSH_DOCUMENT = "AWS-StartSSHSession"
PORT_DOCUMENT = "AWS-StartPortForwardingSession"
PORTS = re.compile(r"^(\d{1,5}):(\d{1,5})$")


def _target(args: argparse.Namespace, ctx: OpsContext) -> tuple[Cluster, Node]:
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    nodes = list_nodes(aws.sagemaker, cluster.name)
    return cluster, pick_node(cluster, nodes, args.group, args.node)


def _cli_options(args: argparse.Namespace) -> list[str]:
    """--region/--profile given to us go on to the aws CLI; otherwise it reads the same environment we do."""
    options: list[str] = []
    if args.region:
        options += ["--region", args.region]
    if args.profile:
        options += ["--profile", args.profile]
    return options


def start_session_argv(target: str, args: argparse.Namespace, *extra: str) -> list[str]:
    return ["aws", "ssm", "start-session", "--target", target, *extra, *_cli_options(args)]


def _launch(args: argparse.Namespace, ctx: OpsContext, cluster: Cluster, node: Node, argv: list[str]) -> int:
    if args.json:
        print_json(
            ctx,
            {"cluster": cluster.name, "node": node.as_json(), "target": cluster.ssm_target(node), "argv": argv},
        )
        return Exit.OK
    if args.print:
        ctx.write(shlex.join(argv))
        return Exit.OK
    ctx.err.print(f"{node.group} {node.instance_id} ({node.hostname or 'no hostname yet'}) via SSM")
    return ctx.execute(argv)


def connect(args: argparse.Namespace, ctx: OpsContext) -> int:
    cluster, node = _target(args, ctx)
    return _launch(args, ctx, cluster, node, start_session_argv(cluster.ssm_target(node), args))


def port_forward(args: argparse.Namespace, ctx: OpsContext) -> int:
    match = PORTS.fullmatch(args.ports)
    if not match or not all(int(p) in TCP_PORTS for p in match.groups()):
        raise OpsError(
            f"ports {args.ports!r}: give LOCAL:REMOTE, two port numbers {TCP_PORTS[0]}-{TCP_PORTS[-1]} "
            "(e.g. 8888:8888)",
            Exit.USAGE,
        )
    local, remote = match.groups()
    cluster, node = _target(args, ctx)
    parameters = json.dumps({"portNumber": [remote], "localPortNumber": [local]}, separators=(",", ":"))
    argv = start_session_argv(
        cluster.ssm_target(node), args, "--document-name", PORT_DOCUMENT, "--parameters", parameters
    )
    if not args.json and not args.print:
        ctx.err.print(f"http://localhost:{local} reaches port {remote} on {node.instance_id}; Ctrl-C ends it")
    return _launch(args, ctx, cluster, node, argv)


def ssh_block(alias: str, target: str, args: argparse.Namespace) -> str:
    """The Host block; ssh runs the ProxyCommand, which opens an SSM session to the node's sshd."""
    session = shlex.join(
        start_session_argv(target, args, "--document-name", SSH_DOCUMENT, "--parameters", "portNumber=%p")
    )
    lines = [f"# BEGIN hyperpod-cdk {alias}", f"Host {alias}", f"    User {args.user}"]
    if args.identity_file:
        lines.append(f"    IdentityFile {args.identity_file}")
    lines += [f"    ProxyCommand sh -c {shlex.quote(session)}", f"# END hyperpod-cdk {alias}"]
    return "\n".join(lines) + "\n"


def merge_block(existing: str, alias: str, block: str) -> str:
    """``existing`` with this alias's block replaced in place, or appended; every other line kept as it was."""
    begin, end = f"# BEGIN hyperpod-cdk {alias}\n", f"# END hyperpod-cdk {alias}\n"
    start = existing.find(begin)
    if start >= 0:
        stop = existing.find(end, start)
        if stop < 0:
            raise OpsError(f"the ssh config has {begin.strip()!r} without {end.strip()!r}: fix it by hand", Exit.FAILED)
        return existing[:start] + block + existing[stop + len(end) :]
    if existing and not existing.endswith("\n"):
        existing += "\n"
    return existing + ("\n" if existing else "") + block


def ssh_config(args: argparse.Namespace, ctx: OpsContext) -> int:
    cluster, node = _target(args, ctx)
    alias = args.host or (f"{cluster.name}-{args.group}" if args.group else cluster.name)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", alias):
        raise OpsError(f"--host {alias!r}: use letters, digits, '.', '_' and '-'", Exit.USAGE)
    block = ssh_block(alias, cluster.ssm_target(node), args)
    pool_name = pool_host_name(args, ctx, cluster.name)
    pool = pool_block(cluster.name, pool_name, args) if pool_name is not None else None
    path = Path(args.file) if args.file else ctx.home / ".ssh" / "config"
    if args.print or args.json:
        if args.json:
            found = {"host": alias, "file": str(path), "block": block, "node": node.as_json()}
            pooled = {"host": pool_alias(cluster.name), "host_name": pool_name, "block": pool}
            print_json(ctx, {**found, "pool": pooled if pool is not None else None})
        else:
            ctx.write(block + (pool or ""))
        return Exit.OK
    text = merge_block(path.read_text() if path.exists() else "", alias, block)
    if pool is not None:
        text = merge_block(text, pool_alias(cluster.name), pool)
    _write_private(path, text)
    ctx.out.print(f"{path}: Host {alias} reaches {node.group} {node.instance_id} through SSM; try `ssh {alias}`")
    ctx.out.print("The block names the node's instance id: run ssh-config again after the node is replaced.")
    if pool is not None:
        ctx.out.print(
            f"{path}: Host {pool_alias(cluster.name)} reaches the login pool {pool_name} on port 22; every login node "
            "shows the pool's one host key"
        )
    return Exit.OK


def _write_private(path: Path, text: str) -> None:
    """Writes atomically; a new file (and ~/.ssh) is readable by its owner only, as ssh wants."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config.")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
