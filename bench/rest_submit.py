"""Submit latency over Slurm's REST API on the local cluster, next to ``sbatch`` on the controller, in one run (root).

Run in the repo root as root: ``.venv/bin/python bench/rest_submit.py [--jobs 100]``. It brings up a cluster with
``rest_api`` on (tests/rest_node_support.py's config: a controller with accounting and one worker, Slurm 24.11 from
the HyperPod platform's node root), then:

* REST: ``--jobs`` submissions (``POST /slurm/v0.0.42/job/submit``) with ``hyperpod_cdk.rest.client.SlurmRestClient``
  from the cluster's network (the switch namespace, as a caller in the VPC), over TLS to the controller's endpoint
  (TLS terminator -> slurmrestd's UNIX socket -> slurmctld), one token, the client's connection kept alive; each
  call timed on the client;
* sbatch: the same number of ``sbatch --wrap`` on the controller, as one user, each timed inside the node
  (``date +%s%N`` around it: no nsenter cost).

Every job is ``true`` with ``--hold`` (nothing runs, so the queue does not change what slurmctld does between the
two series). Prints p50, p95 and max of each and the ratio; timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hyperpod_cdk.rest.client import SlurmRestClient, job_description  # noqa: E402
from hyperpod_cdk.rest.minter.token import mint  # noqa: E402
from hyperpod_local import LocalCluster  # noqa: E402
from hyperpod_local.netns import entered  # noqa: E402
from hyperpod_local.plan import UpOptions  # noqa: E402
from hyperpod_local.variant import Variant  # noqa: E402
from rest_node_support import CONFIG, rest_key  # noqa: E402
from training_runtime.node import HYPERPOD  # noqa: E402
from training_runtime.rest.config import CERTIFICATE  # noqa: E402

CONTROLLER = "controller-machine-1"
SBATCH_LOOP = (
    "for i in $(seq {n}); do s=$(date +%s%N); sbatch -Q --hold -p cpu -D /tmp -o /dev/null --wrap true >/dev/null "
    "|| exit 1; e=$(date +%s%N); echo $((e - s)); done"
)


def summary(seconds: list[float]) -> tuple[float, float, float]:
    ordered = sorted(seconds)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]  # nearest rank
    return statistics.median(ordered), p95, ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the local cluster needs root")
    with tempfile.TemporaryDirectory(prefix="rest-bench-") as scratch:
        config = Path(scratch) / "rest.yaml"
        config.write_text(yaml.safe_dump(CONFIG))
        started = time.perf_counter()
        cluster = LocalCluster.up(
            config,
            Path(scratch) / "work",
            Variant(platform=HYPERPOD),
            UpOptions(prefix=f"hprb{os.getpid() % 10000}", subnet="10.225.0.0/24"),
        )
        up_s = time.perf_counter() - started
        try:
            certificate = Path(scratch) / "controller.crt"
            certificate.write_text(cluster.exec(CONTROLLER, ["cat", CERTIFICATE], timeout=30).stdout)
            key = rest_key(cluster)
            token = mint(key, "alice", 900, int(time.time()))
            address = cluster.node(CONTROLLER).ip
            client = SlurmRestClient(f"https://{address}:6820", lambda: token, ca_certs=str(certificate))
            body = {"job": {**job_description("#!/bin/bash\ntrue", partition="cpu", cwd="/tmp"), "hold": True}}
            rest: list[float] = []
            with entered(cluster.namespaces.switch):
                client._call("POST", "job/submit", "warm-up", body)  # the TLS handshake and first connection
                for _ in range(args.jobs):
                    t0 = time.perf_counter()
                    client._call("POST", "job/submit", "submitting a job", body)
                    rest.append(time.perf_counter() - t0)
            loop = SBATCH_LOOP.format(n=args.jobs)
            ran = cluster.exec(CONTROLLER, ["runuser", "-u", "alice", "--", "sh", "-c", loop], timeout=600)
            if ran.returncode != 0:
                sys.exit(f"sbatch failed: {ran.stdout}{ran.stderr}")
            sbatch = [int(line) / 1e9 for line in ran.stdout.split()]
        finally:
            cluster.down()
    print(f"Machine: nproc {os.cpu_count()}, {platform.machine()}, Python {platform.python_version()}")
    print(f"cluster up with rest_api (controller + 1 worker): {up_s:.1f} s; {args.jobs} submissions each\n")
    print("| Path | p50 ms | p95 ms | max ms |\n| --- | --: | --: | --: |")
    figures = {}
    for name, seconds in (("REST (TLS, slurmrestd, slurmctld)", rest), ("sbatch on the controller", sbatch)):
        p50, p95, worst = summary(seconds)
        figures[name] = (p50, p95)
        print(f"| {name} | {p50 * 1000:.1f} | {p95 * 1000:.1f} | {worst * 1000:.1f} |")
    (rest_p50, rest_p95), (sb_p50, sb_p95) = figures.values()
    print(f"\nREST / sbatch: p50 {rest_p50 / sb_p50:.2f}x, p95 {rest_p95 / sb_p95:.2f}x")


if __name__ == "__main__":
    main()
