"""``hyperpod-local``: a HyperPod Slurm cluster emulated on this machine (also ``hyperpod-cdk local``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from hyperpod_cdk.core.errors import ConfigurationError
from hyperpod_local import LocalCluster, LocalClusterError, NamespaceError, breakage
from hyperpod_local.control_plane import cli as control_plane_cli
from hyperpod_local.layout import DEFAULT_MAX_PER_GROUP, DEFAULT_MAX_WORKERS, DEFAULT_SUBNET
from hyperpod_local.namespaces import DEFAULT_PREFIX
from hyperpod_local.plan import DEFAULT_IDLE_TIMEOUT_S, UpOptions
from hyperpod_local.variant import DEFAULT_PLATFORM, PLATFORMS, SLURM_SUITES, Variant, VariantError
from training_runtime.node_names import NAMING_MODES
from training_runtime.render.slurm_conf import RenderError

DEBUG_HELP = "show the traceback of an unexpected error instead of the one-line message (it is also saved to a file)"


def main(argv: list[str] | None = None, prog: str = "hyperpod-local") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="A HyperPod Slurm cluster emulated on this machine (root).")
    add_commands(parser)
    return run(parser.parse_args(argv))


def hyperpod_cdk_local(argv: list[str]) -> int:
    """``hyperpod-cdk local ...``: the entry point this package declares in the group ``hyperpod_cdk.commands``."""
    return main(argv, prog="hyperpod-cdk local")


def add_commands(local: argparse.ArgumentParser) -> None:
    """The emulator's commands, on ``local``: its own parser (``hyperpod-local``) or ``hyperpod-cdk local``."""
    local.description = (
        "Nodes are Linux namespaces with an overlay root; the lifecycle scripts run on them as "
        "HyperPod runs them. The work directory (--workdir, $HYPERPOD_LOCAL_DIR, default "
        "/var/tmp/hyperpod-local) remembers the cluster."
    )
    local.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = local.add_subparsers(dest="local_command", required=True)

    def with_workdir(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--workdir", help="the cluster's work directory")
        # Also after the command (`up ... --debug`); SUPPRESS keeps a value given before it.
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
        return parser

    up = with_workdir(sub.add_parser("up", help="create the cluster and run the lifecycle scripts on every node"))
    source = up.add_mutually_exclusive_group()
    source.add_argument("--config", help="cluster config file (YAML or JSON; default: the default configuration)")
    source.add_argument(
        "--from", dest="assembly", metavar="CDK_OUT", help="a synthesized cloud assembly: run what its stack uploads"
    )
    up.add_argument("--stack", help="with --from: the stack (default: the one stack with a HyperPod cluster)")
    # The defaults are the Python API's (Variant, UpOptions), named once.
    up.add_argument(
        "--max-per-group",
        type=int,
        default=DEFAULT_MAX_PER_GROUP,
        help=f"nodes per compute group at most (default {DEFAULT_MAX_PER_GROUP})",
    )
    up.add_argument(
        "--max-workers",
        type=int,
        default=DEFAULT_MAX_WORKERS,
        help=f"compute nodes in all at most (default {DEFAULT_MAX_WORKERS})",
    )
    up.add_argument("--subnet", default=DEFAULT_SUBNET, help=f"the nodes' network (default {DEFAULT_SUBNET})")
    up.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"prefix of the netns names (default {DEFAULT_PREFIX})")
    up.add_argument("--no-bootstrap", action="store_true", help="stop once the nodes exist")
    up.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        help=f"seconds to wait for idle compute nodes (default {DEFAULT_IDLE_TIMEOUT_S:.0f})",
    )
    up.add_argument(
        "--platform",
        choices=PLATFORMS,
        default=DEFAULT_PLATFORM,
        help="hyperpod (default): HyperPod's part emulated - Slurm 24.11 under /opt/slurm on the node root file "
        "system `make setup` builds, HyperPod's slurm.conf and node names, srun --auto-resume and node replacement; "
        "generic: the host's Slurm, the runtime configures everything",
    )
    up.add_argument(
        "--node-names",
        choices=NAMING_MODES,
        help="Slurm node and host names: ip (ip-a-b-c-d; the hyperpod platform's default) or instance (the "
        "InstanceName, as cluster_agent.json's UseInstanceNames makes them; the generic platform's only naming)",
    )
    up.add_argument(
        "--stale-worker-copies",
        action="store_true",
        help="hyperpod platform: non-controller nodes get a stale resource_config.json still listing a group the "
        "controller's copy shows empty (a group with count 0 is needed)",
    )
    up.add_argument(
        "--no-automatic-topology",
        action="store_true",
        help="hyperpod platform: no topology.conf and no TopologyPlugin, as on a HyperPod AMI before 2026-04",
    )
    up.add_argument(
        "--slurm",
        choices=tuple(SLURM_SUITES),
        help="the Slurm major the nodes run, on the root file system `make setup` builds for it ("
        + ", ".join(f"{major}: Debian {suite}" for major, suite in SLURM_SUITES.items())
        + "); default: the platform's own (hyperpod: 24.11; generic: the host's root and Slurm)",
    )
    up.add_argument(
        "--preconfigured-ami",
        action="store_true",
        help="hyperpod platform: nodes are HyperPod's 2026 AMI with what it sets up itself (accounting, Enroot and "
        "Pyxis files, SSH keys, log rotation, a default user, Slurm 24.11 and 25.11 behind /opt/slurm); default: "
        "an older AMI without them",
    )
    control_plane_cli.add_up_arguments(up)
    control_plane_cli.add_command(sub, with_workdir)
    run = with_workdir(sub.add_parser("exec", help="run a command on a node: local exec NODE -- CMD..."))
    run.add_argument("--cwd", help="working directory on the node (default: this one if the node has it, else /)")
    run.add_argument("node")
    run.add_argument("cmd", nargs=argparse.REMAINDER)
    with_workdir(
        sub.add_parser("crash", help="hard power-off: kill every process of NODE, pull its cable")
    ).add_argument("node")
    boot = with_workdir(
        sub.add_parser("boot", help="power NODE on again as after a HyperPod reboot (no lifecycle script)")
    )
    boot.add_argument("node")
    boot.add_argument(
        "--bootstrap", action="store_true", help="also re-run the lifecycle script (HyperPod does not after a reboot)"
    )
    with_workdir(
        sub.add_parser("reboot", help="HyperPod's reboot of NODE: crash, then boot (no lifecycle script)")
    ).add_argument("node")
    rerun = with_workdir(sub.add_parser("bootstrap", help="re-run the lifecycle script on NODE"))
    rerun.add_argument("node")
    rerun.add_argument(
        "--restage", action="store_true", help="first copy the lifecycle scripts and runtime from this checkout"
    )
    with_workdir(
        sub.add_parser("replace", help="replace NODE as HyperPod does: a fresh instance, same name, lifecycle script")
    ).add_argument("node")
    breaking = with_workdir(
        sub.add_parser(
            "break",
            help="write Slurm's files broken the way HyperPod broke them in 2026 (the Slurm guard's drills), or with "
            "--heal the agent's normal ones again",
        )
    )
    breaking.add_argument("kind", nargs="?", choices=breakage.KINDS, help="the broken state (docs/local-cluster.md)")
    breaking.add_argument("--heal", action="store_true", help="write HyperPod's normal slurm.conf and topology again")
    status = with_workdir(sub.add_parser("status", help="nodes, addresses, alive, sinfo"))
    status.add_argument("--json", action="store_true", help="print JSON")
    down = with_workdir(sub.add_parser("down", help="remove every node; delete the work directory's content"))
    down.add_argument("--keep", action="store_true", help="keep node disks, logs and the shared directory")


def run(args: argparse.Namespace) -> int:
    """Run the command ``args`` name (parsed by a parser :func:`add_commands` set up)."""

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        if args.local_command == "up":
            cluster = LocalCluster.up(args.config, args.workdir, up_variant(args), up_options(args), progress=say)
            control_plane_cli.after_up(args, cluster, say)
            _print_status(cluster.status())
            return 0
        cluster = LocalCluster.open(args.workdir)
        if args.local_command == "control-plane":
            return control_plane_cli.run(args, cluster)
        if args.local_command == "exec":
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            if not cmd:
                say("error: give the command after the node: hyperpod-local exec NODE -- CMD...")
                return 2
            cwd = args.cwd
            if cwd is None:
                here = os.getcwd()
                probe = cluster.exec(args.node, ["test", "-d", here], timeout=30)
                cwd = here if probe.returncode == 0 else "/"
            return cluster.exec(args.node, cmd, cwd=cwd, capture=False, timeout=None).returncode
        if args.local_command == "crash":
            cluster.crash(args.node)
            say(f"node {args.node} crashed (processes killed, cable pulled; its disk is kept)")
            return 0
        if args.local_command == "reboot":
            cluster.reboot(args.node)
            say(f"node {args.node} rebooted (same disk; the lifecycle script was not re-run)")
            return 0
        if args.local_command in ("boot", "bootstrap"):
            if args.local_command == "boot":
                result = cluster.boot(args.node, bootstrap=args.bootstrap)
                say(f"node {args.node} booted")
            else:
                if args.restage:
                    cluster.restage()
                result = cluster.bootstrap(args.node)
            if result is None:
                return 0
            code, output = result
            sys.stdout.write(output)
            if code != 0:
                say(f"error: the lifecycle script failed on {args.node} (exit {code})")
            return 0 if code == 0 else 1
        if args.local_command == "replace":
            code, output = cluster.replace(args.node)
            sys.stdout.write(output)
            if code != 0:
                say(f"error: the lifecycle script failed on the replacement of {args.node} (exit {code})")
                return 1
            say(f"node {args.node} replaced (a fresh disk, its lifecycle script run)")
            return 0
        if args.local_command == "break":
            if args.heal == (args.kind is not None):
                say("error: give a kind to write, or --heal, not both: hyperpod-local break KIND | --heal")
                return 2
            if args.heal:
                breakage.heal(cluster)
                say("HyperPod's slurm.conf and topology files written the normal way again")
                return 0
            breakage.break_slurm(cluster, args.kind, cluster.state.variant.slurm or "")
            say(f"{args.kind} written on cluster {cluster.layout.cluster_name}; slurmctld asked to re-read it")
            return 0
        if args.local_command == "status":
            report = cluster.status()
            if args.json:
                json.dump(report, sys.stdout, indent=2)
                sys.stdout.write("\n")
            else:
                _print_status(report)
            return 0
        cluster.down(keep=args.keep)
        say(
            f"cluster {cluster.layout.cluster_name} is down"
            + (f"; files kept in {cluster.workdir}" if args.keep else "")
        )
        return 0
    except (ConfigurationError, LocalClusterError, NamespaceError, VariantError) as error:
        say(f"error: {error}")
        return 1
    except Exception as error:  # a bug: one line and where its traceback is; --debug raises it
        if getattr(args, "debug", False):
            raise
        saved = _save_traceback(args.local_command)
        say(unexpected_error(error, args.local_command, saved))
        return 1


def unexpected_error(error: Exception, command: str, saved: Path | None) -> str:
    """The one line ``hyperpod-local COMMAND`` prints for an error it did not expect. A :class:`RenderError` names
    each field the renderer refused, its value and the fix; it means the emulator built a file's inputs wrong from a
    config the rules accepted, so it is reported as a bug, like any other unexpected error."""
    if isinstance(error, RenderError):
        what = f"{str(error).splitlines()[0].split(' (')[0]}: {'; '.join(error.problems)}"
        whose = "a bug in hyperpod-local (or a rule `hyperpod-cdk validate` lacks)"
    else:
        what = f"{type(error).__name__}: {' '.join(str(error).split()) or '(no message)'}"
        whose = "a bug in hyperpod-local"
    where = f"the traceback is in {saved}" if saved is not None else "the traceback could not be saved"
    return f"error: hyperpod-local {command} failed unexpectedly: {what}. This is {whose}: {where}; --debug shows it"


def _save_traceback(command: str) -> Path | None:
    """The current exception's traceback in a new file under the temporary directory (it outlives ``down``)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    try:
        descriptor, name = tempfile.mkstemp(prefix=f"hyperpod-local-{command}-{stamp}-", suffix=".traceback")
        with os.fdopen(descriptor, "w") as handle:
            handle.write(traceback.format_exc())
    except OSError:
        return None
    return Path(name)


def up_variant(args: argparse.Namespace) -> Variant:
    """The variant ``up``'s options ask for (checked: a :class:`VariantError` names a wrong one)."""
    return Variant(
        platform=args.platform,
        node_names=args.node_names,
        slurm=args.slurm,
        automatic_topology=not args.no_automatic_topology,
        preconfigured_ami=args.preconfigured_ami,
        stale_worker_copies=args.stale_worker_copies,
    )


def up_options(args: argparse.Namespace) -> UpOptions:
    return UpOptions(
        assembly=args.assembly,
        stack=args.stack,
        max_per_group=args.max_per_group,
        max_workers=args.max_workers,
        subnet=args.subnet,
        prefix=args.prefix,
        bootstrap=not args.no_bootstrap,
        idle_timeout=args.timeout,
    )


def _print_status(report: dict[str, Any]) -> None:
    print(
        f"cluster {report['cluster']} ({report['mode']}, {report['platform']} platform, "
        f"Slurm {report['slurm'] or 'of the host'}), "
        f"work directory {report['workdir']}"
    )
    print(f"shared directory {report['shared']}")
    for name, counts in report["capped"].items():
        print(f"group {name}: {counts['local']} of {counts['config']} instances run locally")
    print(f"{'NODE':<28} {'SLURM NAME':<16} {'ROLE':<11} {'ADDRESS':<15} {'STATE':<6} HARDWARE")
    for node in report["nodes"]:
        state = "up" if node["alive"] else "down"
        print(
            f"{node['name']:<28} {node['slurm_name']:<16} {node['role']:<11} {node['ip']:<15} {state:<6} "
            f"{node['hardware']}"
        )
    sinfo = report["sinfo"]
    if report.get("prometheus"):
        print(f"Prometheus: {report['prometheus']}")
    if report.get("control_plane"):
        print(f'control plane: {report["control_plane"]} (eval "$(hyperpod-local control-plane --env)")')
    if sinfo is None:
        print("sinfo: (not available: Slurm is not running on the controller)")
    elif not sinfo.strip():
        print("sinfo: (no Slurm node: every compute group is at 0)")
    else:
        print("sinfo: ")
    if sinfo:
        print(sinfo.rstrip())


if __name__ == "__main__":
    sys.exit(main())
