"""slurm.conf rendering benchmark: wall time of ``render_slurm_conf`` as the cluster grows.

Run in the repo root: ``.venv/bin/python bench/render.py`` (``--repeats N`` to change the sample size).
Nodes are ml.p5.48xlarge workers named like HyperPod's hosts (``ip-10-1-x-y``, address ``10.1.x.y``), split
over 4 partitions; the time includes validation and hostlist compression. Prints a Markdown table of the
median over the repeats. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time

from training_runtime.hardware import INSTANCE_HARDWARE
from training_runtime.render.hostlist import compress, expand
from training_runtime.render.slurm_conf import Partition, SlurmNode, SlurmSettings, render_slurm_conf

SIZES = (10, 100, 1_000, 10_000)
PARTITIONS = 4
SETTINGS = SlurmSettings(
    cluster_name="bench",
    controller_name="ip-10-1-0-1",
    controller_address="10.1.0.1",
    accounting_host="ip-10-1-0-1",
)


def cluster(count: int) -> tuple[list[SlurmNode], list[Partition]]:
    hardware = INSTANCE_HARDWARE["ml.p5.48xlarge"]
    nodes = []
    for index in range(count):
        third, fourth = 1 + index // 250, 1 + index % 250  # x.y from 10.1.1.1 upwards
        nodes.append(SlurmNode(f"ip-10-1-{third}-{fourth}", f"10.1.{third}.{fourth}", hardware))
    size = -(-count // PARTITIONS)
    partitions = [
        Partition(f"part{k}", tuple(n.name for n in nodes[k * size : (k + 1) * size])) for k in range(PARTITIONS)
    ]
    return nodes, partitions


def measure(count: int, repeats: int) -> tuple[float, float, int]:
    """(median ms, min ms, output bytes) of rendering a cluster of ``count`` nodes."""
    nodes, partitions = cluster(count)
    text = render_slurm_conf(SETTINGS, nodes, partitions)  # warm-up (and the size)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        render_slurm_conf(SETTINGS, nodes, partitions)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples), len(text.encode())


def measure_hostlist(count: int, repeats: int) -> tuple[float, float]:
    """(median ms, min ms) of compressing ``count`` shuffled host names and expanding the expression again."""
    names = [f"ip-10-1-{1 + i // 250}-{1 + i % 250}" for i in range(count)]
    random.Random(7).shuffle(names)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        expand(compress(names))
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed renders per size (default 15)")
    args = parser.parse_args()
    print(
        f"render_slurm_conf, median of {args.repeats} runs after one warm-up; Python {platform.python_version()}, "
        f"{platform.machine()}, {PARTITIONS} partitions, ml.p5.48xlarge nodes\n"
    )
    print("| nodes | median ms | min ms | output KB | hostlist round trip: median ms | min ms |")
    print("|------:|----------:|-------:|----------:|------:|------:|")
    for count in SIZES:
        median, fastest, size = measure(count, args.repeats)
        round_trip, round_trip_min = measure_hostlist(count, args.repeats)
        cells = (f"{count:,}", f"{median:.2f}", f"{fastest:.2f}", f"{size / 1024:.1f}")
        print("| " + " | ".join(cells) + f" | {round_trip:.2f} | {round_trip_min:.2f} |")


if __name__ == "__main__":
    main()
