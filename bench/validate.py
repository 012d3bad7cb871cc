"""Offline validation benchmark: `hyperpod-cdk validate` and `schema` against a bare `python -c pass`.

Run in the repo root: ``.venv/bin/python bench/validate.py`` (``make bench`` runs it too). Each command runs
as a fresh process, alternating, ``--runs`` times; the report gives medians and the ratio to the bare
interpreter measured in the same run. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "hyperpod-cdk")
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "validate examples/gpu-cluster.yaml": [CLI, "validate", "examples/gpu-cluster.yaml"],
    "validate --region us-west-2 examples/trn1-cluster.yaml": [
        CLI,
        "validate",
        "--region",
        "us-west-2",
        "examples/trn1-cluster.yaml",
    ],
    "schema": [CLI, "schema"],
}


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():
        wall(command)  # warm the page cache and .pyc files
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            times[name].append(wall(command))
    bare = statistics.median(times["python -c pass"])
    print("| command | median (s) | min (s) | ratio to `python -c pass` |")
    print("|---|---:|---:|---:|")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"| `{name}` | {median:.3f} | {min(samples):.3f} | {median / bare:.1f}x |")
    print(f"\n{args.runs} runs each, interleaved; command: `.venv/bin/python bench/validate.py --runs {args.runs}`")


if __name__ == "__main__":
    main()
