"""Wall time of whole commands, each a fresh process, against ``python -c pass`` measured in the same run.

One helper for the startup benchmarks (bench/cli_startup.py, bench/validate.py): each command runs once untimed
(page cache, .pyc files), then ``runs`` times interleaved with the others, so load on a shared machine falls on
all of them alike; the table gives medians, minima and the ratio of each median to the bare interpreter's.
Timings are reported, never asserted.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

BARE = "python -c pass"
ROOT = Path(__file__).resolve().parent.parent


def wall(command: Sequence[str], env: Mapping[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def measure(
    commands: Mapping[str, Sequence[str]], runs: int, env: Mapping[str, str] | None = None
) -> dict[str, list[float]]:
    """``{name: [seconds, ...]}`` for :data:`BARE` (added first) and every command, interleaved."""
    timed = {BARE: [sys.executable, "-c", "pass"], **commands}
    times: dict[str, list[float]] = {name: [] for name in timed}
    for command in timed.values():
        wall(command, env)
    for _ in range(runs):
        for name, command in timed.items():
            times[name].append(wall(command, env))
    return times


def ratios(times: Mapping[str, list[float]]) -> dict[str, float]:
    """Each command's median over the bare interpreter's median."""
    bare = statistics.median(times[BARE])
    return {name: statistics.median(samples) / bare for name, samples in times.items()}


def report(times: Mapping[str, list[float]], targets: Mapping[str, float], command_line: str) -> str:
    """A Markdown table (median, min, their ratios, target) with the machine, the load and the command that made it.
    On a loaded machine the minima are the steadier figures; the target is judged on the medians."""
    ratio = ratios(times)
    bare_min = min(times[BARE])
    lines = [
        f"Machine: nproc {os.cpu_count()}, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}; 1-minute load average at the end: {os.getloadavg()[0]:.2f}",
        "",
        "| command | median (s) | min (s) | median ratio to `python -c pass` | min ratio | target |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, samples in times.items():
        target = targets.get(name)
        verdict = "" if target is None else f"≤ {target:g}x ({'met' if ratio[name] <= target else 'NOT met'})"
        lines.append(
            f"| `{name}` | {statistics.median(samples):.3f} | {min(samples):.3f} | {ratio[name]:.1f}x "
            f"| {min(samples) / bare_min:.1f}x | {verdict} |"
        )
    runs = len(times[BARE])
    lines += ["", f"{runs} runs each, interleaved, after one untimed run each; command: `{command_line}`"]
    return "\n".join(lines)


def cli() -> str:
    """The ``hyperpod-cdk`` console script beside this interpreter."""
    return str(Path(sys.executable).parent / "hyperpod-cdk")


@contextmanager
def moto_env(**extra: str) -> Iterator[dict[str, str]]:
    """A moto server on 127.0.0.1 for the benchmark's commands, and the environment that points them at it (dummy
    keys, us-west-2, no instance metadata, the caller's AWS_* variables left out; ``extra`` last); stopped on exit."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=f"http://{host}:{port}",
        AWS_REGION="us-west-2",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_EC2_METADATA_DISABLED="true",
    )
    env.update(extra)
    try:
        yield env
    finally:
        server.stop()
