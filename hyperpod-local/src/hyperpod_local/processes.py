"""The emulator's host daemons' entry points: ``python -m hyperpod_local.processes DAEMON --workdir W``.

A daemon of a running cluster needs the whole engine (the agent reboots and replaces nodes; the control plane's
backend launches and terminates them), and the engine starts the daemons; so the engine is opened here, where
nothing imports it back (``tests/test_import_cycles.py``), and handed to the daemon's own module with the opener
it needs. Each daemon is named by its module (:data:`DAEMONS`), so its command line (``/proc/PID/cmdline``)
carries that name, which its pid check looks for; :func:`hyperpod_local.host_service.module_argv` is its command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hyperpod_local.agent import Agent
from hyperpod_local.cluster import LocalCluster
from hyperpod_local.control_plane.local import serve
from hyperpod_local.state import LocalClusterError


def run_agent(workdir: Path) -> None:
    """The emulated HyperPod agent of the cluster in ``workdir`` (:mod:`hyperpod_local.agent`), until SIGTERM."""
    Agent(LocalCluster.open(workdir)).run()


def run_control_plane(workdir: Path) -> None:
    """The control plane of the cluster in ``workdir`` (:mod:`hyperpod_local.control_plane.local`), until SIGTERM."""
    serve(LocalCluster.open(workdir), LocalCluster.open)


DAEMONS = {"hyperpod_local.agent": run_agent, "hyperpod_local.control_plane": run_control_plane}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperpod_local.processes", description=__doc__.split("\n")[0])
    parser.add_argument("daemon", choices=sorted(DAEMONS))
    parser.add_argument("--workdir", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        DAEMONS[args.daemon](args.workdir)
    except LocalClusterError as error:  # in the daemon's log, where its starter reads the last lines
        print(f"{args.daemon}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
