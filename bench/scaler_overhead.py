"""The scaler's own overhead from submit to job start, beyond the emulated launch (root only; issue #24).

Run in the repo root as root: ``.venv/bin/python bench/scaler_overhead.py [RUNS]`` (default 5). It brings up the
drills' cluster (``tests/scaler_drill.py``: the real scaler on the controller, 1 s cycle, the emulated control
plane with a 2 s launch latency) and, RUNS times from a group at 0, submits a one-node job and takes the times
of what follows from the records the drills read: the plain ``sbatch`` (host clock; the controller's job_submit
script holds the job and the scaler releases it), the control plane's "Target count ... increased" event (the
scaler's BatchAddClusterNodes), its "launching" and "is Running" events (the emulated launch: latency, then the
node boots and its lifecycle script runs), and the job's StartTime in Slurm (whole seconds). Between runs the
scaler takes the group back to 0. Prints a Markdown table of medians;
timings are reported, never asserted.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hyperpod_local import LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from scaler_drill import (
    GROUP,
    INTERVAL_S,
    LAUNCH_LATENCY_S,
    back_to_zero,
    counts,
    drill_cluster,
    job_field,
    job_state,
    plane_events,
    sagemaker,
    submit,
    wait_for,
)

PHASES = (
    ("submit → BatchAddClusterNodes (the scaler sees the job and calls)", "add"),
    ("BatchAddClusterNodes → launch starts (emulated latency)", "latency"),
    ("launch → instance Running (namespace boots, lifecycle script)", "boot"),
    ("Running → job starts (slurmd registers, Slurm schedules)", "start"),
)


def one_run(cluster: LocalCluster, client: Any) -> dict[str, float]:
    since = time.time()
    job = submit(cluster, "-N1", "--wrap", "true")
    submitted = time.time()
    wait_for("the job to finish", lambda: job_state(cluster, job) == "COMPLETED", 180)
    events = plane_events(cluster, since)

    def first(text: str) -> float:
        return next(e["time"] for e in events if text in e["description"] and e.get("group") == GROUP)

    started = time.mktime(time.strptime(job_field(cluster, job, "StartTime"), "%Y-%m-%dT%H:%M:%S"))
    added, launching, running = first("increased"), first("launching"), first("is Running")
    back_to_zero(cluster, client)
    return {
        "add": added - submitted,
        "latency": launching - added,
        "boot": running - launching,
        "start": started - running,
        "total": started - submitted,
    }


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("the local cluster needs root")
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    began = time.perf_counter()
    results = []
    with (
        tempfile.TemporaryDirectory(prefix="hpcdk-bench-") as workdir,
        drill_cluster(Path(workdir), "hpbsc", "10.252.0.0/24") as cluster,
    ):
        client = sagemaker(cluster)
        assert counts(client) == (0, 0)
        for _ in range(runs):
            results.append(one_run(cluster, client))
    median = {k: statistics.median(r[k] for r in results) for k in results[0]}
    launch = median["latency"] + median["boot"]
    print(
        f"Machine: nproc {os.cpu_count()}, {platform.system()} {platform.machine()}, Python "
        f"{platform.python_version()}; load average at end {os.getloadavg()[0]:.2f}; {runs} runs, "
        f"{time.perf_counter() - began:.0f} s in all; scaler cycle {INTERVAL_S:.0f} s, launch latency "
        f"{LAUNCH_LATENCY_S:.0f} s\n"
    )
    print("| Phase | Median s [min, max] | Share of submit → start |")
    print("| --- | --: | --: |")
    for label, key in PHASES:
        values = [r[key] for r in results]
        share = median[key] / median["total"]
        print(f"| {label} | {median[key]:.2f} [{min(values):.2f}, {max(values):.2f}] | {share:.0%} |")
    totals = [r["total"] for r in results]
    print(f"| **submit → job start** | {median['total']:.2f} [{min(totals):.2f}, {max(totals):.2f}] | 100% |")
    print(
        f"\nThe scaler's own part (submit → BatchAdd): {median['add']:.2f} s, "
        f"{median['add'] / INTERVAL_S:.1f} of its cycles; beyond the emulated launch ({launch:.2f} s) the whole "
        f"path adds {median['total'] - launch:.2f} s. Slurm's StartTime has whole seconds."
    )


if __name__ == "__main__":
    main()
