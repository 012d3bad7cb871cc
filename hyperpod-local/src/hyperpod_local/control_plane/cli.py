"""``hyperpod-local up --control-plane ...`` and ``hyperpod-local control-plane``: the emulated control plane
from the command line (docs/local-cluster.md, "Emulated control plane")."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from hyperpod_local.control_plane import local
from hyperpod_local.state import ClusterHandle, LocalClusterError

DEFAULT_LATENCY_S = 5.0
UNLIMITED = "unlimited"


def capacity(text: str) -> tuple[str, int | None]:
    """``TYPE=N`` (at most N instances of TYPE at once) or ``TYPE=unlimited``."""
    name, _, count = text.partition("=")
    if not name or not count or not (count.isdigit() or count == UNLIMITED):
        raise argparse.ArgumentTypeError(f"got {text!r}; expected TYPE=N or TYPE={UNLIMITED}, e.g. ml.g5.8xlarge=2")
    return name, None if count == UNLIMITED else int(count)


def add_knobs(parser: argparse.ArgumentParser, latency_default: float | None) -> None:
    parser.add_argument(
        "--launch-latency",
        type=float,
        default=latency_default,
        metavar="S",
        help="seconds a new node stays Pending before its instance boots (AWS: 15-25 minutes; "
        + (f"default {latency_default})" if latency_default is not None else "unchanged when not given)"),
    )
    parser.add_argument(
        "--capacity",
        type=capacity,
        action="append",
        default=[],
        metavar="TYPE=N",
        help=f"at most N instances of TYPE at once, launches beyond fail for capacity (TYPE={UNLIMITED}: no limit)",
    )


def add_up_arguments(up: argparse.ArgumentParser) -> None:
    up.add_argument(
        "--control-plane",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve the SageMaker HyperPod cluster API for this cluster, backed by its nodes (default: on for the "
        "hyperpod platform)",
    )
    add_knobs(up, DEFAULT_LATENCY_S)


def add_command(sub: Any, with_workdir: Any) -> None:
    command = with_workdir(
        sub.add_parser("control-plane", help="the emulated control plane: URL and credentials, knobs, start/stop")
    )
    command.add_argument(
        "--env", action="store_true", help="print `export AWS_...=...` lines for boto3 and hyperpod-cdk"
    )
    command.add_argument("--start", action="store_true", help="start it (a cluster brought up without it)")
    command.add_argument("--stop", action="store_true", help="stop it")
    command.add_argument("--json", action="store_true", help="print JSON")
    command.add_argument(
        "--secret",
        metavar="ARN",
        help="serve the secret ARN to the nodes' GetSecretValue, its value read from standard input (never argv)",
    )
    add_knobs(command, None)


def after_up(args: argparse.Namespace, cluster: ClusterHandle, say: Any) -> None:
    """Start the control plane after ``up`` when asked for (by default on the HyperPod platform)."""
    wanted = args.control_plane if args.control_plane is not None else cluster.state.variant.hyperpod
    if not wanted or args.no_bootstrap:
        return
    url = local.start(cluster, launch_latency=args.launch_latency, capacity=dict(args.capacity))
    say(
        f"control plane: {url} (nodes: {local.sagemaker_url(cluster.layout.subnet)}); for boto3 and hyperpod-cdk: "
        f'eval "$(hyperpod-local control-plane --env)"'
    )


def run(args: argparse.Namespace, cluster: ClusterHandle) -> int:
    if args.stop:
        local.stop(cluster)
        return 0
    if args.start:
        local.start(cluster)
    if args.secret:
        value = sys.stdin.read().rstrip("\n")
        if not value:
            raise LocalClusterError(f"--secret {args.secret}: no value on standard input")
        local.put_secret(cluster, args.secret, value)
    if args.launch_latency is not None:
        local.set_latency(cluster, args.launch_latency)
    for instance_type, count in args.capacity:
        local.set_capacity(cluster, instance_type, count)
    if not local.running(cluster):
        raise LocalClusterError("the control plane is not running: `hyperpod-local control-plane --start`")
    env = local.client_env(cluster)
    if args.env:
        for name, value in env.items():
            print(f"export {name}={shlex.quote(value)}")
        return 0
    settings = local.read_settings(local.directory(cluster) / "settings.json")
    report: dict[str, Any] = {
        "url": env["AWS_ENDPOINT_URL"],
        "nodes_url": local.sagemaker_url(cluster.layout.subnet),
        "launch_latency_s": settings.launch_latency,
        "retry_interval_s": settings.retry_interval,
        "capacity": settings.capacity,
    }
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for key, value in report.items():
            print(f"{key}: {value}")
    return 0
