"""A research team's week on one GPU group: static clusters against the scaler, by trace-driven simulation.

Run in the repo root: ``.venv/bin/python bench/scaler_sim.py [--seed 2026]``. It prints a Markdown report (the
trace, the model, one table) and writes it to ``bench/results/scaler_sim.md`` (gitignored). Pure computation,
seeded: the same seed gives the same figures on every machine.

- The trace (bench/scaler_trace.py) covers three weeks; the figures are for the middle one (jobs submitted in it,
  node-hours inside it), so the week starts with the previous week's queue and nodes and its long jobs finish in
  the next.
- The scaler's decisions are the real ones: every poll builds the inputs the service observes (the group's
  counts, Slurm's nodes and pending jobs, the deletes in flight) and calls :func:`training_runtime.scaler.policy.
  decide`; :func:`scaler_step` is the only adapter, and it applies the decision the way the service's calls do.
- The Slurm model and its simplifications are in bench/scaler_engine.py.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import scaler_trace as trace
from scaler_engine import (
    ALLOCATED,
    DELETING,
    DRAINING,
    IDLE,
    IN_SLURM,
    LAUNCHING,
    Cluster,
    Controller,
    UnsafeAction,
    billed_seconds,
    busy_seconds,
    launching_seconds,
    simulate,
)
from training_runtime.scaler.config import DEFAULT_INTERVAL_S
from training_runtime.scaler.policy import (
    DELETE,
    InFlight,
    PendingJob,
    ScaledGroup,
    SlurmNode,
    batch_adds,
    batch_deletes,
    decide,
    drain_reason,
)
from training_runtime.scaling import ScalingSpec

ROOT = Path(__file__).resolve().parent.parent
GROUP = PARTITION = "gpu"
IDLE_MINUTES = (10, 30, 60, 240)
LAUNCH_MINUTES = (15.0, 25.0)
"""AWS: scale-up is "similar to node replacement: 15-25 minutes per instance batch" (research §5)."""
DEEP_CHECK_LAUNCH = ((LAUNCH_MINUTES[0] + 45) * 60, (LAUNCH_MINUTES[1] + 90) * 60)
"""With ``OnStartDeepHealthChecks`` a launch takes 45-90 minutes more (DCGM level 4, research §5)."""
DELETE_MINUTES = 5.0
"""From BatchDeleteClusterNodes to the instance gone: AWS publishes no figure; billed here (an upper bound)."""
POLL_SECONDS = DEFAULT_INTERVAL_S
"""The scaler service's default ``interval_s``."""
SEED = 2026
"""The seed of the run recorded in docs/benchmarks.md."""


def _slurm_node(node_state: str, name: str, idle_since: float | None, spec: ScalingSpec) -> SlurmNode:
    """How ``sinfo``/``scontrol show node`` report a simulated node to the service (every drain is the scaler's)."""
    reason = drain_reason(spec.idle_minutes)
    if node_state == IDLE:
        return SlurmNode(name, GROUP, "idle", idle_since=idle_since)
    if node_state == ALLOCATED:
        return SlurmNode(name, GROUP, "allocated", jobs=1)
    if node_state == DRAINING:
        return SlurmNode(name, GROUP, "allocated", drain=True, reason=reason, jobs=1)
    return SlurmNode(name, GROUP, "idle", drain=True, reason=reason, idle_since=idle_since)


def scaler_step(cluster: Cluster, spec: ScalingSpec) -> None:
    """One poll of the scaler service: observe, :func:`decide` (the real policy), act; then check its promises.

    Observed as the service would: ``CurrentCount`` = nodes in Slurm, ``TargetCount`` = those plus the ones
    launching (HyperPod raises the target when it accepts a ``BatchAddClusterNodes``, so no add stays in flight
    from one poll to the next), the deletes not yet finished as in-flight operations (their nodes have left
    Slurm). Acted on in the service's order: undrain, drain, ``BatchDeleteClusterNodes`` calls, then
    ``BatchAddClusterNodes`` calls as :func:`batch_adds` splits them (each call is one launch batch)."""
    live = cluster.live()
    in_slurm = [n for n in live if n.state in IN_SLURM]
    current = len(in_slurm)
    group = ScaledGroup(GROUP, PARTITION, spec, current, current + cluster.count(LAUNCHING))
    nodes = [_slurm_node(n.state, n.name, n.idle_since, spec) for n in in_slurm]
    jobs = [
        PendingJob(str(i), (PARTITION,), cluster.runs[i].job.nodes, cluster.pending_reason(i)) for i in cluster.pending
    ]
    deleting = tuple(n.name for n in live if n.state == DELETING)
    in_flight = [InFlight(DELETE, GROUP, len(deleting), "deleting", nodes=deleting)] if deleting else []
    decision = decide([group], nodes, jobs, in_flight, cluster.now)
    cluster.resume(decision.undrain)
    cluster.drain(decision.drain)
    for call in batch_deletes(decision.delete):
        cluster.delete(d.node for d in call)
    for adds in batch_adds(decision.add):
        cluster.add(sum(a.count for a in adds))
    heading = cluster.count(LAUNCHING, *IN_SLURM)
    staying = cluster.count(LAUNCHING, IDLE, ALLOCATED)
    if heading > spec.max or staying < min(spec.min, heading):
        raise UnsafeAction(f"at {cluster.now:.0f} s: {heading} nodes heading in, {staying} staying, spec {spec}")


def scaler(spec: ScalingSpec) -> Controller:
    return lambda cluster: scaler_step(cluster, spec)


@dataclass(frozen=True)
class Row:
    name: str
    node_hours: float
    launching_hours: float
    busy_hours: float
    waits: tuple[float, ...]
    interactive_waits: tuple[float, ...]
    adds: int
    deletes: int


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (the smallest value with at least ``share`` of the values at or below it)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def measure(name: str, cluster: Cluster, start: float, end: float) -> Row:
    runs = [r for r in cluster.runs.values() if start <= r.job.submit < end]
    unstarted = [r.job.id for r in runs if r.start is None]
    if unstarted:
        raise RuntimeError(f"{name}: jobs {unstarted[:5]} never started; lengthen the simulation")
    waits = tuple((r.start or 0.0) - r.job.submit for r in runs)
    interactive = tuple(w for r, w in zip(runs, waits, strict=True) if r.job.interactive)
    adds = sum(1 for c in cluster.calls if c[1] == "add" and start <= c[0] < end)
    deletes = sum(1 for c in cluster.calls if c[1] == "delete" and start <= c[0] < end)
    hour = trace.HOUR
    busy = busy_seconds(cluster, start, end) / hour
    billed, launching = billed_seconds(cluster, start, end) / hour, launching_seconds(cluster, start, end) / hour
    return Row(name, billed, launching, busy, waits, interactive, adds, deletes)


def run_all(seed: int, idle_minutes: Sequence[int] = IDLE_MINUTES) -> tuple[list[trace.Job], int, list[Row]]:
    """The trace, its peak demand and one row per configuration (static sizes first, the peak-sized one first)."""
    jobs = trace.generate(seed, weeks=3)
    peak = trace.peak_demand(jobs)
    start, end, until = trace.WEEK, 2 * trace.WEEK, 4 * trace.WEEK
    launch = (LAUNCH_MINUTES[0] * 60, LAUNCH_MINUTES[1] * 60)
    rows = []
    largest = max(j.nodes for j in jobs)
    sizes = sorted({max(largest, round(peak * f)) for f in (1.0, 0.75, 0.5, 0.375)}, reverse=True)
    for size in sizes:
        label = f"static {size} nodes" + (" (the peak)" if size == peak else "")
        rows.append(measure(label, simulate(jobs, until, initial_nodes=size), start, end))
    configs = [(ScalingSpec(0, peak, idle), launch, "") for idle in idle_minutes]
    configs.append((ScalingSpec(2, peak, 60), launch, ""))
    configs.append((ScalingSpec(0, peak, 60), DEEP_CHECK_LAUNCH, ", deep health checks on start"))
    for spec, bounds, note in configs:
        cluster = simulate(
            jobs,
            until,
            initial_nodes=spec.min,
            controller=scaler(spec),
            poll_seconds=POLL_SECONDS,
            launch_bounds=bounds,
            delete_seconds=DELETE_MINUTES * 60,
            seed=seed,
        )
        label = f"scaler min {spec.min}, max {spec.max}, idle_minutes {spec.idle_minutes}{note}"
        rows.append(measure(label, cluster, start, end))
    return jobs, peak, rows


def _minutes(values: Sequence[float]) -> str:
    if not values:
        return "-"
    mean, p50, p95 = statistics.mean(values) / 60, percentile(values, 0.5) / 60, percentile(values, 0.95) / 60
    return f"{mean:.1f} / {p50:.1f} / {p95:.1f}"


def table(rows: Sequence[Row]) -> list[str]:
    base = rows[0].node_hours
    lines = [
        "| configuration | node-hours | of which launching | ratio to the peak-sized static | busy % | "
        "wait, all jobs: mean / p50 / p95 min | interactive wait: mean / p50 / p95 min | adds / deletes |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        calls = f"{r.adds} / {r.deletes}" if r.adds or r.deletes else "-"
        lines.append(
            f"| {r.name} | {r.node_hours:,.0f} | {r.launching_hours:,.0f} | {r.node_hours / base:.2f}x "
            f"| {100 * r.busy_hours / r.node_hours:.0f} "
            f"| {_minutes(r.waits)} | {_minutes(r.interactive_waits)} | {calls} |"
        )
    return lines


def describe(jobs: Sequence[trace.Job], peak: int, seed: int) -> list[str]:
    week = [j for j in jobs if trace.WEEK <= j.submit < 2 * trace.WEEK]
    interactive = [j for j in week if j.interactive]
    demand = sum(j.nodes * j.runtime for j in week) / trace.HOUR
    classes = [
        f"{c.name}: peak {c.peak_per_hour}/h, sizes "
        + ", ".join(f"{n} node{'s' if n > 1 else ''} {share:.0%}" for n, share in c.sizes)
        + f", log-normal length median {c.median_minutes:.0f} min sigma {c.sigma}, cut at {c.cap_hours:.0f} h"
        for c in (trace.INTERACTIVE, trace.BATCH)
    ]
    return [
        f"- Trace: `bench/scaler_trace.py`, seed {seed}, three weeks; measured week: {len(week)} jobs "
        f"({len(interactive)} interactive), {demand:,.0f} node-hours of work; peak demand (most nodes held at once "
        f"if every job started on submission, over the three weeks) {peak} nodes; largest job "
        f"{max(j.nodes for j in jobs)} nodes.",
        "- Arrival classes (each a Poisson process whose rate is its peak x the day's factor x the hour's factor): "
        + "; ".join(classes)
        + ".",
        "- Day factors, Monday first: " + ", ".join(f"{f:g}" for f in trace.WEEKDAY) + ".",
        "- Hour factors, 00:00 first: batch "
        + ", ".join(f"{f:g}" for f in trace.BATCH.hourly)
        + "; interactive "
        + ", ".join(f"{f:g}" for f in trace.INTERACTIVE.hourly)
        + ".",
        "- Time limits: interactive sessions ask for "
        + f"{trace.INTERACTIVE.cap_hours:.0f} h; a batch job for its runtime x U(1.5, 4) rounded up to an hour.",
        f"- Launch: {LAUNCH_MINUTES[0]:.0f}-{LAUNCH_MINUTES[1]:.0f} min per `BatchAddClusterNodes` call (uniform, "
        f"seeded); deletion {DELETE_MINUTES:.0f} min; the scaler polls every {POLL_SECONDS:.0f} s; capacity never "
        "runs out.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=SEED, help=f"trace and launch-latency seed (default {SEED})")
    args = parser.parse_args()
    began, load = time.perf_counter(), os.getloadavg()[0]
    jobs, peak, rows = run_all(args.seed)
    lines = [
        f"- Command (in the repo root): `.venv/bin/python bench/scaler_sim.py --seed {args.seed}`",
        f"- Machine: nproc {os.cpu_count()}, {platform.system()} {platform.machine()}, Python "
        f"{platform.python_version()}, 1-minute load average at start {load:.2f}; "
        f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; runtime {time.perf_counter() - began:.0f} s",
        *describe(jobs, peak, args.seed),
        "",
        *table(rows),
    ]
    report = "\n".join(lines)
    print(report)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "scaler_sim.md").write_text(report + "\n")


if __name__ == "__main__":
    main()
