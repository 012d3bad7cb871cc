"""The Slurm guard's figures on the local cluster: time from HyperPod's broken write to the guard's repair, and the
guard's CPU and memory on an idle node.

Run as root in the repo root: ``.venv/bin/python bench/guard_drills.py [--rounds 3] [--idle-seconds 180]``. It
brings up the containers test's cluster (the emulated HyperPod platform with the 2026 AMI: a controller and one
compute node, Slurm 24.11), then per round breaks Slurm the four ways HyperPod did (``hyperpod_local.breakage``:
topology.conf without a switch, topology.conf gone, Pyxis loaded twice, a configless include by a path), each
followed by an ``sbatch`` at once and one after the guard's repair (``hyperpod_local.drill_guard``); the guard is
restarted between rounds, so its fight limit (five repairs of one file an hour) does not stop a later round. It
prints each drill, the median and the maximum repair time, then leaves the cluster idle and reads the guard's CPU
time (``/proc/<pid>/stat``) and resident memory (VmRSS) on both nodes over the window. Figures are reported,
never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from hyperpod_local import LocalCluster, breakage, drill_guard
from hyperpod_local.plan import UpOptions
from hyperpod_local.variant import Variant
from training_runtime.guard import table
from training_runtime.guard.service import PID_FILE
from training_runtime.node import HYPERPOD
from training_runtime.steps.guard import GUARD_PROGRAM

CONFIG = """\
cluster_name: guard-bench
instance_groups:
  - {name: controller, role: controller, instance_type: ml.m5.large, count: 1}
  - {name: workers, role: compute, instance_type: ml.c5.xlarge, count: 1}
"""
DRILLS = (
    (breakage.TOPOLOGY_EMPTY, table.TOPOLOGY_TREE),
    (breakage.TOPOLOGY_MISSING, table.TOPOLOGY_TREE),
    (breakage.PYXIS_TWICE, table.PYXIS_TWICE),
    (breakage.CONFIGLESS_PLUGSTACK, table.CONFIGLESS_INCLUDE),
)
TICKS = os.sysconf("SC_CLK_TCK")


def sample(cluster: LocalCluster, node: str) -> tuple[float, int]:
    """(CPU seconds so far, VmRSS KiB) of the guard on ``node``."""
    script = f"p=$(cat {PID_FILE}) && cat /proc/$p/stat && grep VmRSS /proc/$p/status"
    out = cluster.exec(node, ["sh", "-c", script], timeout=30).stdout
    stat_line, rss_line = out.splitlines()[:2]
    fields = stat_line.rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / TICKS, int(rss_line.split()[1])


def restart_guard(cluster: LocalCluster, node: str) -> None:
    wait = f"while [ -e /proc/$(cat {PID_FILE}) ]; do sleep 0.1; done"
    script = f"kill $(cat {PID_FILE}); {wait}; {GUARD_PROGRAM} --daemon"
    cluster.exec(node, ["sh", "-c", script], timeout=60)
    time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=180.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hpcdk-guard-bench-") as workdir:
        config = Path(workdir) / "guard.yaml"
        config.write_text(CONFIG)
        cluster = LocalCluster.up(
            config,
            Path(workdir) / "cluster",
            Variant(platform=HYPERPOD, preconfigured_ami=True),
            UpOptions(prefix="hpbguard", subnet="10.252.0.0/24"),
        )
        controller, worker = cluster.layout.controllers[0].name, cluster.layout.workers[0].name
        try:
            seconds: list[float] = []
            print("| round | breakage | repair (s) | sbatch at once | sbatch after |")
            print("|---|---|---|---|---|")
            for round_ in range(1, args.rounds + 1):
                for node in (controller, worker):
                    restart_guard(cluster, node)
                for kind, check in DRILLS:
                    result = drill_guard.drill(cluster, kind, check)
                    seconds.append(result.seconds)
                    at_once = "accepted" if result.during.accepted else f"refused: {result.during.line}"
                    after = "accepted" if result.after.accepted else f"refused: {result.after.line}"
                    print(f"| {round_} | {kind} | {result.seconds:.2f} | {at_once} | {after} |")
                    if kind in breakage.TOPOLOGY_KINDS:
                        breakage.heal(cluster)
            print(
                f"\n{len(seconds)} drills: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s "
                "from HyperPod's write to the guard's repair"
            )
            start = {node: sample(cluster, node) for node in (controller, worker)}
            time.sleep(args.idle_seconds)
            print(f"\nidle {args.idle_seconds:.0f} s:\n| node | CPU % of one core | RSS MiB |\n|---|---|---|")
            for node in (controller, worker):
                cpu, rss = sample(cluster, node)
                share = 100 * (cpu - start[node][0]) / args.idle_seconds
                print(f"| {node} | {share:.3f} | {rss / 1024:.1f} |")
        finally:
            cluster.down()


if __name__ == "__main__":
    main()
