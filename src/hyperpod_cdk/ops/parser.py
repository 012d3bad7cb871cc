"""The operator commands' arguments, and the dispatch that loads a command's module only when it runs."""

from __future__ import annotations

import argparse
import importlib
import sys

from hyperpod_cdk.aws.errors import Exit, OpsError
from training_runtime.hyperpod_facts import DELETE_NODES_MAX, REBOOT_NODES_MAX, REPLACE_NODES_MAX

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (`hyperpod-cdk --help` stays light)

if TYPE_CHECKING:  # `hyperpod-cdk --help` builds these parsers: the context (subprocess, dataclasses) loads on run
    from typing import Any

    from hyperpod_cdk.ops.context import OpsContext

COST_GROUPINGS = ("account", "user", "partition", "job")
"""``cost --by`` (training_runtime.cost_report.GROUPINGS, not imported: ``--help`` stays light)."""
NODE_REF = "instance id (i-...) or Slurm hostname (ip-a-b-c-d)"
EXIT_NOTE = "Exit status: see docs/operations.md (0 ok, 1 failed, 3 not found, 4 credentials/access, 5 unsupported)."


def _command(commands: Any, name: str, handler: str, help_text: str, description: str = "") -> Any:
    parser = commands.add_parser(name, help=help_text, description=f"{description or help_text}. {EXIT_NOTE}")
    parser.set_defaults(operator=handler)
    parser.add_argument("--region", help="AWS Region (default: AWS_REGION or the profile's)")
    parser.add_argument("--profile", help="AWS profile (default: AWS_PROFILE)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return parser


def _cluster(parser: Any) -> Any:
    parser.add_argument("cluster", help="HyperPod cluster name (the stack's ClusterName output)")
    return parser


def register(commands: Any) -> None:
    """Adds the operator commands to ``hyperpod-cdk``'s sub-command parsers."""
    status = _cluster(_command(commands, "status", "status:status", "cluster status, groups and nodes"))
    status.add_argument("--group", help="only the nodes of this instance group")
    status.add_argument(
        "--slurm",
        action="store_true",
        help="also each node's Slurm state and the Slurm releases running, each judged by the security table, read "
        "on the controller through SSM (`scontrol -o show nodes; scontrol --version`; needs the Session Manager "
        "plugin and ssm:StartSession)",
    )

    wait = _cluster(
        _command(
            commands,
            "wait",
            "status:wait",
            "wait until the cluster is InService (a Continuous cluster: every group at its target) or Failed",
        )
    )
    wait.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait at most (default 3600)")
    wait.add_argument("--interval", type=float, default=15.0, help="seconds between polls (default 15)")

    connect = _cluster(
        _command(
            commands,
            "connect",
            "access:connect",
            "open a shell on a node through SSM Session Manager (the controller by default)",
        )
    )
    _node_choice(connect)
    connect.add_argument("--print", action="store_true", help="print the aws ssm command instead of running it")

    ssh = _cluster(
        _command(
            commands,
            "ssh-config",
            "access:ssh_config",
            "write a ~/.ssh/config Host block that reaches a node through SSM (no open port), and one for the login "
            "pool's name when the stack has a login pool",
        )
    )
    _node_choice(ssh)
    ssh.add_argument("--host", help="the Host alias (default: the cluster name, plus -GROUP for --group)")
    ssh.add_argument("--user", default="ubuntu", help="login user (default ubuntu)")
    ssh.add_argument("--identity-file", help="IdentityFile for the block")
    ssh.add_argument("--file", help="ssh config file to edit (default ~/.ssh/config)")
    ssh.add_argument("--print", action="store_true", help="print the block instead of writing it")
    ssh.add_argument(
        "--stack", help="the cluster's stack, read for the login pool's name (default: hyperpod-<cluster>)"
    )

    forward = _cluster(
        _command(
            commands,
            "port-forward",
            "access:port_forward",
            "forward a local port to a port on a node through SSM (Jupyter, TensorBoard)",
        )
    )
    _node_choice(forward)
    forward.add_argument("ports", metavar="LOCAL:REMOTE", help="e.g. 8888:8888")
    forward.add_argument("--print", action="store_true", help="print the aws ssm command instead of running it")

    logs = _cluster(
        _command(commands, "logs", "logs:logs", "lifecycle-script or health-agent output from CloudWatch Logs")
    )
    logs.add_argument("--node", help=f"only this node: {NODE_REF}")
    logs.add_argument("--group", help="only this instance group")
    logs.add_argument(
        "--source",
        choices=["lifecycle", "health", "all"],
        default="lifecycle",
        help="lifecycle scripts (LifecycleConfig/...), the health agent (SagemakerHealthMonitoringAgent/...) or all",
    )
    logs.add_argument("--since", default=None, help="only events newer than this: 30m, 2h, 1d (default: all)")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing new events until Ctrl-C")
    logs.add_argument("--interval", type=float, default=5.0, help="seconds between polls with --follow")

    for verb, what, limit in (
        ("reboot", "soft-reboot nodes", REBOOT_NODES_MAX),
        ("replace", "replace nodes (new hardware, volumes lost; not the Slurm controller)", REPLACE_NODES_MAX),
        ("delete", "remove nodes from the cluster (volumes lost; not the Slurm controller)", DELETE_NODES_MAX),
    ):
        batch = _cluster(_command(commands, verb, f"nodes:{verb}", f"{what}: calls of at most {limit}"))
        batch.add_argument("nodes", nargs="+", metavar="NODE", help=NODE_REF)
        batch.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
        batch.add_argument("--dry-run", action="store_true", help="show the calls; change nothing")
        if verb == "delete":
            batch.add_argument(
                "--allow-drift",
                action="store_true",
                help="delete nodes of a cluster that a CloudFormation stack owns anyway (the next deploy adds them "
                "back unless the config's counts change too)",
            )

    scale = _cluster(_command(commands, "scale", "scale:scale", "set one instance group's count with UpdateCluster"))
    scale.add_argument("group", help="instance group name")
    scale.add_argument("count", type=int, help="the new instance count")
    scale.add_argument("--config", help="the cluster's config file: the command names the line to change in it")
    scale.add_argument(
        "--allow-drift",
        action="store_true",
        help="scale a cluster that a CloudFormation stack owns anyway (the next deploy reverts it "
        "unless the config changes too)",
    )
    scale.add_argument("--dry-run", action="store_true", help="show the call; change nothing")

    software = _cluster(
        _command(
            commands,
            "update-software",
            "update_software:update_software",
            "UpdateClusterSoftware group by group: drain each group through Slurm, update it, verify it with a job",
            "Rolls a software (AMI) update through a Slurm cluster one instance group at a time: drains the group's "
            "Slurm nodes, waits for their jobs (requeues the requeueable ones at --drain-deadline), calls "
            "UpdateClusterSoftware for the group, waits for it, and runs a verification job on the updated nodes. "
            "Progress is kept in ~/.hyperpod-cdk/update-software/CLUSTER.json; --resume continues an interrupted run",
        )
    )
    software.add_argument(
        "--groups",
        help="the groups to update, in this order, comma-separated (default: every "
        "group with Slurm nodes; controller and login groups only when named)",
    )
    software.add_argument(
        "--drain-deadline",
        default="2h",
        help="how long to wait for a drained group's jobs before requeueing them: 90s, 30m, 2h (default 2h)",
    )
    software.add_argument("--image-id", help="ImageId: an AMI id, or default (HyperPod's latest image)")
    software.add_argument("--resume", action="store_true", help="continue the interrupted update of this cluster")
    software.add_argument("--poll", type=float, default=30.0, help="seconds between polls (default 30)")
    software.add_argument(
        "--update-timeout",
        type=float,
        default=10800.0,
        help="seconds to wait for one group's update and its nodes' return to Slurm (default 10800)",
    )
    software.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    software.add_argument("--dry-run", action="store_true", help="show the groups and nodes; change nothing")
    eks_only = " (refused: on Slurm AWS offers no updates in batches)"
    software.add_argument("--batch", type=int, help="DeploymentConfig MaximumBatchSize, instances" + eks_only)
    software.add_argument("--batch-percent", type=int, help="MaximumBatchSize, CAPACITY_PERCENTAGE" + eks_only)
    software.add_argument("--wait-seconds", type=int, help="DeploymentConfig WaitIntervalInSeconds" + eks_only)
    software.add_argument(
        "--rollback-alarm", action="append", metavar="NAME", help="AutoRollbackConfiguration alarm" + eks_only
    )

    events = _cluster(
        _command(commands, "events", "events:events", "cluster events (clusters with Continuous provisioning)")
    )
    events.add_argument("--node", help=f"only this node: {NODE_REF}")
    events.add_argument("--group", help="only this instance group")
    events.add_argument("--since", help="only events newer than this: 30m, 2h, 1d")
    events.add_argument("--limit", type=int, default=100, help="at most this many events (default 100)")

    plan = _command(
        commands,
        "plan",
        "plan:plan",
        "what deploying CONFIG would change on the running cluster: each change's update policy, and drift",
        "Compares CONFIG with the deployed stack's template and parameters file, DescribeCluster and "
        "ListClusterNodes (or --previous FILE, offline); exit status 1 when a change blocks the deploy",
    )
    plan.add_argument("config", help="the cluster config file to deploy")
    plan.add_argument("--previous", metavar="FILE", help="compare with this config (the deployed one), offline")
    plan.add_argument("--stack", help="the deployed stack's name (default: hyperpod-<cluster_name>)")
    plan.add_argument(
        "--context-file",
        default="cdk.context.json",
        help="CDK's context file, whose recorded counts synth writes for scaled groups (default: cdk.context.json)",
    )

    job = _command(
        commands,
        "training-job-config",
        "training_job:training_job_config",
        "a SageMaker training job's VpcConfig and FSx input from the stack's outputs",
    )
    job.add_argument("stack", help="the CloudFormation stack name of the TrainingClusterStack")
    job.add_argument("--directory", default="/", help="directory on the file system for the channel (default /)")
    job.add_argument("--channel", default="training", help="input channel name (default training)")
    job.add_argument("--access-mode", choices=["ro", "rw"], default="ro", help="file system access (default ro)")
    job.add_argument("--python", action="store_true", help="print only the Python snippet")

    spend = _cluster(
        _command(
            commands,
            "cost",
            "cost:cost",
            "spend in money from Slurm accounting (through SSM on the controller), idle cost and budgets left",
        )
    )
    spend.add_argument(
        "--since", help="window start: ISO date or time, UTC (2026-11-01), or an age (7d). Default: this month"
    )
    spend.add_argument("--until", help="window end: ISO date or time, UTC, or an age (1h). Default: now")
    spend.add_argument("--by", choices=COST_GROUPINGS, default="account", help="group spend by this (default account)")

    _jobs(commands)
    _login(commands)

    rest = commands.add_parser(
        "rest",
        help="the cluster's REST API: rotate-key writes a new signing key and has the controller load it",
        description=f"The REST API's signing key (docs/rest-api.md). {EXIT_NOTE}",
    )
    rest_actions = rest.add_subparsers(dest="action", required=True)
    rotate = rest_actions.add_parser(
        "rotate-key",
        help="a new key from Secrets Manager (AWSCURRENT), loaded on the controller through SSM at once",
        description="Secrets Manager generates a new key as the secret's AWSCURRENT version; the controller installs "
        f"it through an SSM session (its timer would within five minutes). {EXIT_NOTE}",
    )
    rotate.set_defaults(operator="rest_key:rotate_key")
    _cluster(rotate)
    rotate.add_argument("--stack", help="the cluster's stack (default: hyperpod-<cluster>)")
    rotate.add_argument("--region", help="AWS Region (default: AWS_REGION or the profile's)")
    rotate.add_argument("--profile", help="AWS profile (default: AWS_PROFILE)")
    rotate.add_argument("--json", action="store_true", help="print JSON")
    rotate.add_argument("--no-refresh", action="store_true", help="leave the controller to its five-minute timer")
    rotate.add_argument("--dry-run", action="store_true", help="name the secret; change nothing")


def _jobs(commands: Any) -> None:
    """``jobs submit|list|show|cancel`` (hyperpod_cdk.ops.jobs): each action takes the cluster and the options."""
    jobs = commands.add_parser(
        "jobs",
        help="submit, list, show and cancel Slurm jobs through the cluster's REST API (rest_api in the config)",
        description="Slurm jobs over HTTPS: the endpoint from the stack's outputs, a token minted for your AWS "
        f"identity's Slurm user (docs/rest-api.md). {EXIT_NOTE}",
    )
    actions = jobs.add_subparsers(dest="action", required=True)
    for action, help_text in (
        ("submit", "submit a batch script (a file, - for stdin, or --wrap COMMAND)"),
        ("list", "every job slurmctld knows"),
        ("show", "one job, as slurmrestd describes it"),
        ("cancel", "cancel a job, or send it a signal"),
    ):
        parser = actions.add_parser(action, help=help_text, description=f"{help_text}. {EXIT_NOTE}")
        parser.set_defaults(operator="jobs:jobs")
        _cluster(parser)
        parser.add_argument("--stack", help="the cluster's stack (default: hyperpod-<cluster>)")
        parser.add_argument("--region", help="AWS Region (default: AWS_REGION or the profile's)")
        parser.add_argument("--profile", help="AWS profile (default: AWS_PROFILE)")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument("--ca-bundle", help="CA certificates to verify the API with (default: the system's)")
        if action in ("show", "cancel"):
            parser.add_argument("job_id", help="the Slurm job id")
        if action == "cancel":
            parser.add_argument("--signal", help="send this signal (e.g. SIGUSR1) instead of cancelling")
        if action == "submit":
            parser.add_argument("script", nargs="?", help="the batch script (starts with #!); - or none: stdin")
            parser.add_argument("--wrap", help="submit this command in a #!/bin/bash script instead")
            parser.add_argument("--name", help="job name")
            parser.add_argument("--partition", "-p", help="partition (default: Slurm's default partition)")
            parser.add_argument("--nodes", "-N", help="node count or range")
            parser.add_argument("--time", "-t", type=int, help="time limit in minutes")
            parser.add_argument("--cwd", help="working directory on the nodes")
            parser.add_argument("--account", "-A", help="Slurm account (default: the user's default)")
            parser.add_argument("--output", "-o", help="stdout file on the nodes")
            parser.add_argument("--env", action="append", metavar="NAME=VALUE", help="the job's environment")


def _login(commands: Any) -> None:
    """``login drain|undrain NODE`` (hyperpod_cdk.ops.login): a login pool's node out of (back into) rotation."""
    login = commands.add_parser(
        "login",
        help="a login pool's nodes: drain one (no new sessions, open ones go on) or undrain it, through SSM",
        description=f"The login pool behind the load balancer (docs/login-pool-node.md). {EXIT_NOTE}",
    )
    actions = login.add_subparsers(dest="action", required=True)
    for action, help_text in (
        ("drain", "the load balancer sends the node no new sessions (its health check fails); open sessions go on"),
        ("undrain", "the node takes new sessions again once its health check passes"),
    ):
        parser = _cluster(_command(actions, action, f"login:{action}", help_text))
        parser.add_argument("node", metavar="NODE", help=NODE_REF)


def _node_choice(parser: Any) -> None:
    parser.add_argument("--group", help="the first Running node of this group")
    parser.add_argument("--node", help=NODE_REF)


def run(args: argparse.Namespace, context: OpsContext | None = None) -> int:
    """Runs the operator command ``args`` names; prints one line and returns its status on a known failure."""
    from hyperpod_cdk.aws.clients import aws_errors

    if context is None:
        from hyperpod_cdk.ops.context import OpsContext

        context = OpsContext()
    ctx = context
    module_name, function = str(args.operator).split(":")
    module = importlib.import_module(f"hyperpod_cdk.ops.{module_name}")
    try:
        with aws_errors():
            return int(getattr(module, function)(args, ctx))
    except OpsError as error:
        (ctx.stderr or sys.stderr).write(f"error: {error}\n")
        return int(error.code)
    except KeyboardInterrupt:
        (ctx.stderr or sys.stderr).write("interrupted\n")
        return int(Exit.INTERRUPTED)


def main(argv: list[str] | None = None, context: OpsContext | None = None) -> int:
    """The operator commands alone (what ``hyperpod-cdk`` runs for them); tests pass their own context."""
    parser = argparse.ArgumentParser(prog="hyperpod-cdk")
    register(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv), context)
