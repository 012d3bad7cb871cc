"""What the metrics software costs a node: CPU and resident memory of node_exporter (every node) and the
metrics collector (the controller's Slurm collector), measured on a local cluster while Prometheus scrapes.

Run as root in the repo root: ``.venv/bin/python bench/observability_cost.py [--seconds 60]``. It brings up
examples/cpu-cluster.yaml (prefix ``hpbench``), waits one warm-up interval, reads each daemon's CPU time
(``/proc/<pid>/stat``, its own and its waited-for children's: the
collector's Slurm commands) at the start and end of the window and its VmRSS at the end, and takes the cluster
down. Figures are reported, never asserted. The Prometheus agent does not run on the local cluster (it
runs only with a remote-write target), so it is not measured here.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from hyperpod_local import LocalCluster
from hyperpod_local.plan import UpOptions
from hyperpod_local.variant import Variant
from training_runtime.node import GENERIC
from training_runtime.steps.observability import COLLECTOR, NODE_EXPORTER, PID_DIR

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def sample(cluster: LocalCluster, node: str, unit: str) -> tuple[float, int]:
    """(CPU seconds so far, VmRSS KiB) of the daemon ``unit`` on ``node``, read inside the node."""
    script = f"p=$(cat {PID_DIR}/{unit}.pid) && cat /proc/$p/stat && grep VmRSS /proc/$p/status"
    out = cluster.exec(node, ["sh", "-c", script], timeout=30).stdout
    stat_line, rss_line = out.splitlines()[:2]
    fields = stat_line.rsplit(")", 1)[1].split()
    # utime + stime, and cutime + cstime: the collector's sinfo/squeue/sdiag run as its (waited-for) children
    return sum(int(f) for f in fields[11:15]) / TICKS, int(rss_line.split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measurement window (default 60)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hpbench-") as base:
        cluster = LocalCluster.up(
            ROOT / "examples/cpu-cluster.yaml",
            Path(base) / "work",
            Variant(platform=GENERIC),
            UpOptions(prefix="hpbench", subnet="10.246.0.0/24"),
        )
        try:
            worker = cluster.layout.workers[0].name
            controller = cluster.layout.controller.name
            daemons = [(controller, NODE_EXPORTER), (controller, COLLECTOR), (worker, NODE_EXPORTER)]
            time.sleep(15)
            start = {d: sample(cluster, *d) for d in daemons}
            t0 = time.monotonic()
            time.sleep(args.seconds)
            elapsed = time.monotonic() - t0
            print(f"window {elapsed:.0f} s, scrape and collector interval 15 s")
            print(f"{'node':<24} {'daemon':<34} {'CPU %':>7} {'RSS MiB':>8}")
            for daemon in daemons:
                cpu0, _ = start[daemon]
                cpu1, rss = sample(cluster, *daemon)
                print(f"{daemon[0]:<24} {daemon[1]:<34} {100 * (cpu1 - cpu0) / elapsed:>7.2f} {rss / 1024:>8.1f}")
        finally:
            cluster.down()


if __name__ == "__main__":
    main()
