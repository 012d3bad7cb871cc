"""``python3 -m training_runtime.guard``: the Slurm guard of one HyperPod node (the bootstrap installs it as a
service, ``runtime.slurm.guard``; ``--once --dry-run`` says what it would do, changing nothing)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Sequence, Tuple

from training_runtime.background import daemonize, name_process
from training_runtime.guard.checks import Layout, inspect
from training_runtime.guard.conf import split_version
from training_runtime.guard.service import LOG_FILE, PID_FILE, PROCESS_NAME, RECHECK_S, SETTLE_S, Guard, serve
from training_runtime.guard.table import ALL_ROLES, repairs
from training_runtime.guard.tree import Tree
from training_runtime.guard.watch import StatPoll, watcher
from training_runtime.hyperpod_facts import SLURM_PREFIX, SLURMD_CONF_CACHE
from training_runtime.log import log
from training_runtime.metrics.layout import TEXTFILE_DIR
from training_runtime.run import CommandError, Runner

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def slurm_version(runner: Runner, scontrol: str) -> Optional[Tuple[int, int]]:
    """The node's Slurm (major, minor) from ``scontrol --version``, once at start; None when it does not answer."""
    try:
        result = runner.run([scontrol, "--version"], check=False, timeout=30)
    except CommandError:
        return None
    return split_version(result.stdout) if result.ok else None


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m training_runtime.guard", description=__doc__.split("\n")[0])
    parser.add_argument("--role", required=True, choices=ALL_ROLES, help="this node's role")
    parser.add_argument("--conf-dir", default=SLURM_PREFIX + "/etc", help="HyperPod's Slurm configuration directory")
    parser.add_argument("--cache-dir", default=SLURMD_CONF_CACHE, help="a configless slurmd's copy of it")
    parser.add_argument("--scontrol", default=SLURM_PREFIX + "/bin/scontrol", help="Slurm's scontrol")
    parser.add_argument("--metrics-dir", default=TEXTFILE_DIR, help="node_exporter's textfile directory")
    parser.add_argument("--settle", type=float, default=SETTLE_S, help="quiet seconds before a check")
    parser.add_argument("--recheck", type=float, default=RECHECK_S, help="seconds between checks without events")
    parser.add_argument("--once", action="store_true", help="check once and exit")
    parser.add_argument("--dry-run", action="store_true", help="with --once: print what is broken, change nothing")
    parser.add_argument("--daemon", action="store_true", help="run in the background (nodes without systemd)")
    parser.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv))
    os.environ.setdefault("PATH", SYSTEM_PATH)
    tree, layout, runner = Tree(str(args.root)), Layout(args.conf_dir, args.cache_dir), Runner()
    version = slurm_version(runner, args.scontrol)
    if args.dry_run:
        for finding in inspect(args.role, tree, layout, version):
            repair = "repairs" if finding.content is not None and repairs(finding.check, args.role) else "reports"
            log("guard_finding", check=finding.check, path=finding.path, detail=finding.detail, guard=repair)
        return 0
    metrics_dir = str(args.root / args.metrics_dir.lstrip("/"))
    guard = Guard(args.role, tree, layout, runner, args.scontrol, metrics_dir, version)
    if args.once:
        guard.check()
        return 0
    if args.daemon:
        daemonize(args.root / PID_FILE.lstrip("/"), args.root / LOG_FILE.lstrip("/"), PROCESS_NAME)
    else:
        name_process(PROCESS_NAME)
    try:
        watch = watcher()
        watch.watch(guard.directories())
    except OSError as error:  # no inotify here, or the watch limit reached: poll instead
        log("guard_watch_fallback", error=str(error))
        watch = StatPoll()
    log("guard_start", role=args.role, watch=watch.kind, slurm=".".join(map(str, version)) if version else None)
    serve(guard, watch, settle_s=args.settle, recheck_s=args.recheck)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
