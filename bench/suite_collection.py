"""Collecting the test suite with Python's bytecode written and with ``PYTHONDONTWRITEBYTECODE=1``.

Why ``make`` unexports ``PYTHONDONTWRITEBYTECODE`` (docs/testing.md): with it set, every Python process of the
suite (each pytest-xdist worker, the CLI under test, the helpers it starts) compiles what it imports from source
again, aws-cdk-lib's modules first. ``pytest --collect-only`` imports every test module, so it shows the cost alone.

A fresh clone's venv has no bytecode (``pip install --no-compile``), and a process with ``PYTHONDONTWRITEBYTECODE``
still reads bytecode another wrote: so each variant gets an empty bytecode cache of its own
(``PYTHONPYCACHEPREFIX``), as a fresh machine has. Run in the repo root: ``.venv/bin/python
bench/suite_collection.py [--runs 3]``. Each variant runs once untimed (the written variant then has its bytecode,
the other still none), then ``runs`` times interleaved; the report gives the medians of wall and CPU seconds (the
children's user + system time) and the ratio of the two. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from timing import ROOT

COLLECT = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]


def timed(env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one collection."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(COLLECT, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    caches = tempfile.mkdtemp(prefix="bytecode-")
    variants = {
        "bytecode written": {**base, "PYTHONPYCACHEPREFIX": f"{caches}/written"},
        "PYTHONDONTWRITEBYTECODE=1": {**base, "PYTHONPYCACHEPREFIX": f"{caches}/none", "PYTHONDONTWRITEBYTECODE": "1"},
    }
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for env in variants.values():
        timed(env)
    for _ in range(args.runs):
        for name, env in variants.items():
            samples[name].append(timed(env))
    print("| variant | wall, median (s) | CPU, median (s) |")
    print("|---|---:|---:|")
    medians = {}
    for name, runs in samples.items():
        medians[name] = (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        print(f"| {name} | {medians[name][0]:.1f} | {medians[name][1]:.1f} |")
    slow, fast = medians["PYTHONDONTWRITEBYTECODE=1"], medians["bytecode written"]
    print(f"\nratio without bytecode / with: wall {slow[0] / fast[0]:.2f}x, CPU {slow[1] / fast[1]:.2f}x")
    print(f"{args.runs} runs each, interleaved; 1-minute load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
