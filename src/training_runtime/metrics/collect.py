"""The metrics collector: writes the Slurm metrics, the cost metrics and the Slurm security gate's metric
(controller) and EFA counters (EFA nodes) into node_exporter's textfile directory, once or every ``--loop`` seconds.

``python3 -m training_runtime.metrics.collect [--slurm] [--efa] [--dir DIR] [--slurm-bin DIR] [--loop S]``

Each file is replaced atomically; a failed Slurm command sets ``slurm_collector_success`` to 0 rather than
stopping the loop. Imports only the standard library and :mod:`training_runtime.metrics`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import List, Optional, Sequence

from training_runtime.metrics.cost import cost_families
from training_runtime.metrics.efa import efa_families
from training_runtime.metrics.exposition import render, write_textfile
from training_runtime.metrics.layout import (
    COST_TEXTFILE,
    EFA_TEXTFILE,
    SECURITY_TEXTFILE,
    SLURM_TEXTFILE,
    TEXTFILE_DIR,
)
from training_runtime.metrics.security import security_families
from training_runtime.metrics.slurm import slurm_families

COMMAND_TIMEOUT_S = 20.0


def command_runner(bin_dir: Optional[str]):  # type: ignore[no-untyped-def]
    """Runs a Slurm command (from ``bin_dir`` when given) and returns its stdout; raises on failure."""

    def run(argv: Sequence[str]) -> str:
        command = list(argv)
        if bin_dir:
            command[0] = "{}/{}".format(bin_dir.rstrip("/"), command[0])
        result = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=COMMAND_TIMEOUT_S
        )
        if result.returncode != 0:
            raise RuntimeError("{} exited {}: {}".format(command[0], result.returncode, result.stderr.strip()))
        return result.stdout

    return run


def collect_once(args: argparse.Namespace) -> None:
    if args.slurm:
        write_textfile(args.dir, SLURM_TEXTFILE, render(slurm_families(command_runner(args.slurm_bin))))
        now = datetime.utcnow().replace(microsecond=0)
        write_textfile(args.dir, COST_TEXTFILE, render(cost_families(command_runner(args.slurm_bin), now)))
        write_textfile(args.dir, SECURITY_TEXTFILE, render(security_families(command_runner(args.slurm_bin))))
    if args.efa:
        write_textfile(args.dir, EFA_TEXTFILE, render(efa_families(Path(args.root))))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="collect", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--slurm", action="store_true", help="Slurm metrics (sinfo, squeue, sdiag), cost and Slurm security"
    )
    parser.add_argument("--efa", action="store_true", help="EFA hardware counters")
    parser.add_argument("--dir", default=TEXTFILE_DIR, help="textfile directory (default %(default)s)")
    parser.add_argument("--slurm-bin", default=None, help="directory of Slurm's commands (default: PATH)")
    parser.add_argument("--root", default="/", help=argparse.SUPPRESS)
    parser.add_argument("--loop", type=float, default=0.0, help="collect every LOOP seconds (0: once)")
    args = parser.parse_args(argv)
    while True:
        started = time.monotonic()
        try:
            collect_once(args)
        except OSError as error:
            print("collect: {}".format(error), file=sys.stderr)
            if not args.loop:
                return 1
        if not args.loop:
            return 0
        time.sleep(max(0.0, args.loop - (time.monotonic() - started)))


def program_arguments(slurm: bool, efa: bool, interval: int, slurm_bin: Optional[str]) -> List[str]:
    """The collector's command-line arguments for a node (the step that runs it builds them here)."""
    arguments = (["--slurm"] if slurm else []) + (["--efa"] if efa else [])
    if slurm and slurm_bin:
        arguments += ["--slurm-bin", slurm_bin]
    return [*arguments, "--loop", str(interval)]


if __name__ == "__main__":
    sys.exit(main())
