#!/usr/bin/env python3
"""Pictures of the dashboards' panels from a real local-cluster run, for docs/observability.md.

Brings up examples/cpu-cluster.yaml on the local cluster (root; see docs/local-cluster.md) with a 5 s scrape
interval, gives the panels something to show - a two-node job that keeps the workers' CPUs busy, a job queued
behind it, then one worker drained with a reason - and plots every panel's queries from the cluster's
Prometheus server with scripts/plot_dashboards.py into docs/dashboards/. Takes about five minutes::

    .venv/bin/python scripts/dashboard_pictures.py [--out docs/dashboards]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from hyperpod_local import LocalCluster
from hyperpod_local import metrics as metrics_server
from hyperpod_local.plan import UpOptions
from hyperpod_local.variant import Variant
from training_runtime.node import GENERIC

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "cpu-cluster.yaml"
INTERVAL_S = 5
BUSY_S = 150
DRAIN_REASON = "hyperpod-cdk:demo: drained to show the node-health panels"
BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    sum(range(10000))\n"


def sbatch(cluster: LocalCluster, *argv: str) -> str:
    controller = cluster.layout.controller.name
    result = cluster.exec(controller, ["sbatch", "--parsable", *argv], timeout=60)
    if result.returncode != 0:
        raise SystemExit(f"sbatch failed: {result.stderr.strip()}")
    return result.stdout.strip().split(";")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboards")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hpcdk-pictures-") as scratch:
        config = yaml.safe_load(CONFIG.read_text())
        config["runtime"] = {**config.get("runtime", {}), "observability": {"scrape_interval": INTERVAL_S}}
        path = Path(scratch) / "cluster.yaml"
        path.write_text(yaml.safe_dump(config))
        cluster = LocalCluster.up(
            path, Path(scratch) / "work", Variant(platform=GENERIC), UpOptions(prefix="hppic", subnet="10.231.0.0/24")
        )
        try:
            start = time.time()
            busy = BUSY.format(s=BUSY_S)
            # one task per CPU on both workers: the utilisation panels have a shape to show
            job = sbatch(cluster, "-N", "2", "--exclusive", "-J", "busy", "--wrap", f"srun python3 -c '{busy}'")
            sbatch(cluster, "-N", "2", "-J", "queued", "--wrap", "sleep 30")
            time.sleep(BUSY_S - 30)
            worker = sorted(n.name for n in cluster.layout.workers)[-1]
            controller = cluster.layout.controller.name
            cluster.exec(
                controller, ["scontrol", "update", f"nodename={worker}", "state=drain", f"reason={DRAIN_REASON}"]
            )
            time.sleep(60)
            window = int(time.time() - start) + 30
            command = [
                "ip", "netns", "exec", cluster.namespaces.switch, sys.executable,
                str(ROOT / "scripts" / "plot_dashboards.py"),
                "--prometheus", metrics_server.server_url(cluster),
                "--last", f"{window}s", "--step", f"{INTERVAL_S}s", "--scrape-interval", f"{INTERVAL_S}s",
                "--var", f"job_id={job}", "--out", str(args.out),
            ]  # fmt: skip
            subprocess.run(command, check=True)
        finally:
            cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
