"""The metrics part of bench/gpu_checks.py: the GPU-to-job mapping, nvidia-smi readings, DCGM where installed.

Our collector (``training_runtime.metrics.collect``) has no GPU metrics of its own: on NVIDIA nodes the GPU
metrics are dcgm-exporter's, with the counter list ``training_runtime.metrics.catalog.DCGM_COUNTERS``, and the
runtime's part is that list and the GPU-to-job mapping the Slurm prolog and epilog keep (``metrics.gpu_jobs``).
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import gpu_stats
from training_runtime.metrics.catalog import DCGM_COUNTERS, dcgm_counters_csv

NVIDIA_SMI_FIELDS = "index,name,utilization.gpu,memory.used,memory.free,temperature.gpu,power.draw"
"""nvidia-smi's names for DCGM_FI_DEV_GPU_UTIL, FB_USED, FB_FREE, GPU_TEMP and POWER_USAGE."""
DCGM_FIELD_IDS = "203,252,251,150,155"
"""The same five as DCGM field ids, for ``dcgmi dmon``."""
EXPORTER_ADDRESS = "127.0.0.1:19400"
EXPORTER_WAIT_S = 30.0


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, str, float]:
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        return 124, str(error), time.perf_counter() - start
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - start


def _listing(directory: Path) -> dict[str, str]:
    if not directory.is_dir():
        return {}
    return {p.name: p.read_text().strip() for p in sorted(directory.iterdir()) if not p.name.startswith(".")}


def hostengine(tools: dict[str, str | None]) -> subprocess.Popen[bytes] | None:
    """A DCGM host engine for the prolog's ``dcgmi diag`` when dcgmi finds none running (None otherwise)."""
    if not tools.get("dcgmi") or not tools.get("nv-hostengine") or _run(["dcgmi", "discovery", "-l"])[0] == 0:
        return None
    engine = subprocess.Popen(["nv-hostengine", "-n"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    return engine


def gpu_jobs(scratch: Path, gpus: int, runs: int, env: dict[str, str]) -> dict[str, Any]:
    """``metrics.gpu_jobs --prolog`` then ``--epilog`` for job 4242 on every GPU (GPU 0 on a CPU machine)."""
    directory = scratch / "gpu-jobs"
    job = dict(env, SLURM_JOB_ID="4242", SLURM_JOB_GPUS=",".join(str(i) for i in range(max(gpus, 1))))
    base = [sys.executable, "-m", "training_runtime.metrics.gpu_jobs", "--dir", str(directory)]
    prolog, epilog = [], []
    after_prolog: dict[str, str] = {}
    after_epilog: dict[str, str] = {}
    for _ in range(runs):
        prolog.append(_run([*base, "--prolog"], job)[2])
        after_prolog = _listing(directory)
        epilog.append(_run([*base, "--epilog"], job)[2])
        after_epilog = _listing(directory)
    return {
        "prolog_s": gpu_stats.stats(prolog),
        "epilog_s": gpu_stats.stats(epilog),
        "after_prolog": after_prolog,
        "after_epilog": after_epilog,
    }


def exporter(scratch: Path, binary: str) -> dict[str, Any]:
    """dcgm-exporter with the catalog's counters (embedded host engine), scraped once; which names it served."""
    counters = scratch / "dcgm-counters.csv"
    counters.write_text(dcgm_counters_csv())
    mapping = scratch / "gpu-jobs"
    mapping.mkdir(exist_ok=True)
    argv = [binary, "-f", str(counters), "-a", EXPORTER_ADDRESS, "--hpc-job-mapping-dir", str(mapping)]
    log = scratch / "dcgm-exporter.log"
    with open(log, "w") as handle:
        process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT)
    text, error = "", ""
    end = time.monotonic() + EXPORTER_WAIT_S
    try:
        while time.monotonic() < end and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://{EXPORTER_ADDRESS}/metrics", timeout=5) as answer:
                    text = answer.read().decode()
                if any(line.startswith("DCGM_") for line in text.splitlines()):
                    break
            except OSError as failure:
                error = str(failure)
            time.sleep(1)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
    served = sorted({line.split("{")[0].split(" ")[0] for line in text.splitlines() if line.startswith("DCGM_")})
    return {
        "argv": argv,
        "served": served,
        "missing": [name for name, _, _ in DCGM_COUNTERS if name not in served],
        "sample": [line for line in text.splitlines() if line.startswith("DCGM_")][:12],
        "error": error if not served else "",
        "log_tail": log.read_text()[-800:],
    }


def collect(scratch: Path, gpus: int, runs: int, env: dict[str, str], tools: dict[str, str | None]) -> dict[str, Any]:
    notes = [
        "Our collector has no GPU metrics of its own: GPU metrics are dcgm-exporter's, with the runtime's counter "
        f"list ({len(DCGM_COUNTERS)} counters)."
    ]
    result: dict[str, Any] = {"gpu_jobs": gpu_jobs(scratch, gpus, runs, env), "notes": notes}
    if tools.get("nvidia-smi"):
        status, out, seconds = _run(["nvidia-smi", "--query-gpu=" + NVIDIA_SMI_FIELDS, "--format=csv"])
        result["nvidia_smi"] = {"exit": status, "output": out.strip(), "s": seconds}
        notes.append(
            "nvidia-smi ({:.2f} s) reads the same quantities: {}".format(seconds, " / ".join(out.split("\n")[:2]))
        )
    else:
        notes.append("nvidia-smi ABSENT: no GPU readings")
    if tools.get("dcgmi"):
        result["dcgmi_discovery"] = _run(["dcgmi", "discovery", "-l"])
        result["dcgmi_dmon"] = _run(["dcgmi", "dmon", "-e", DCGM_FIELD_IDS, "-c", "1"])
        notes.append(
            "dcgmi dmon -e {} -c 1: exit {}: {}".format(
                DCGM_FIELD_IDS, result["dcgmi_dmon"][0], " / ".join(result["dcgmi_dmon"][1].strip().splitlines()[-2:])
            )
        )
    else:
        notes.append("dcgmi ABSENT: the prolog's DCGM check skips (fails open); no DCGM readings")
    binary = tools.get("dcgm-exporter")
    if binary:
        result["dcgm_exporter"] = exporter(scratch, binary)
        served = result["dcgm_exporter"]["served"]
        notes.append(
            "dcgm-exporter served {} of the catalog's {} counters; missing: {}".format(
                len([n for n, _, _ in DCGM_COUNTERS if n in served]),
                len(DCGM_COUNTERS),
                ", ".join(result["dcgm_exporter"]["missing"]) or "none",
            )
        )
    else:
        notes.append("dcgm-exporter ABSENT: the catalog's DCGM counters are not checked against a live exporter")
    return result
