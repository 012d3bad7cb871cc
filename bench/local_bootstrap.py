"""Bootstrap time per role on the local cluster (root only).

Run in the repo root as root: ``.venv/bin/python bench/local_bootstrap.py``. It brings up
``examples/cpu-cluster.yaml`` (controller with MariaDB accounting, login node, two workers, one user)
without running the lifecycle scripts, then runs each node's entry script on its own, one node at a time
(controller first, as the workers wait for its munge key), then runs every node's script again. Packages
are preinstalled, so the first run is configuration time; the second run finds nothing to change.
Wall time of each whole entry script (``bash on_init_complete.sh`` inside the node). Prints a Markdown
table; timings are reported, never asserted.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from hyperpod_local import LocalCluster
from hyperpod_local.plan import UpOptions
from hyperpod_local.variant import Variant
from training_runtime.node import GENERIC

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "cpu-cluster.yaml"


def timed_bootstrap(cluster: LocalCluster, name: str) -> float:
    started = time.perf_counter()
    code, output = cluster.bootstrap(name)
    seconds = time.perf_counter() - started
    if code != 0:
        sys.exit(f"bootstrap of {name} failed:\n{output}")
    return seconds


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("the local cluster needs root")
    with tempfile.TemporaryDirectory(prefix="hpcdk-bench-") as workdir:
        started = time.perf_counter()
        cluster = LocalCluster.up(
            CONFIG,
            workdir,
            Variant(platform=GENERIC),
            UpOptions(prefix="hpbench", subnet="10.253.0.0/24", bootstrap=False),
        )
        nodes_up = time.perf_counter() - started
        try:
            order = sorted(cluster.nodes, key=lambda n: ("controller", "login", "compute").index(n.role))
            first = {n.name: timed_bootstrap(cluster, n.name) for n in order}
            idle_started = time.perf_counter()
            cluster.wait_idle(timeout=120)
            idle = time.perf_counter() - idle_started
            again = {n.name: timed_bootstrap(cluster, n.name) for n in order}
        finally:
            cluster.down()
    print(
        f"Machine: nproc {os.cpu_count()}, {platform.system()} {platform.machine()}, Python {platform.python_version()}"
    )
    print(f"Nodes created (no scripts): {nodes_up:.2f} s; compute nodes idle {idle:.2f} s after the last script\n")
    print("| Node | Role | First run s | Re-run s (no changes) | First / re-run |")
    print("| --- | --- | --: | --: | --: |")
    for node in order:
        ratio = first[node.name] / again[node.name]
        print(f"| {node.name} | {node.role} | {first[node.name]:.2f} | {again[node.name]:.2f} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
