"""The scaler simulation's core (bench/scaler_engine.py, bench/scaler_sim.py, bench/scaler_trace.py): small traces
with known answers. The benchmark's own figures are reported, never asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent.parent / "bench"))  # last: bench/ never shadows a module

import scaler_engine as engine
import scaler_sim as sim
import scaler_trace as trace
from training_runtime.scaling import ScalingSpec

HOUR = 3600.0
LAUNCH = 900.0


def job(job_id: int, submit: float, nodes: int, runtime: float, limit: float | None = None) -> trace.Job:
    return trace.Job(job_id, submit, nodes, runtime, runtime if limit is None else limit, False)


def scaled(jobs: list[trace.Job], spec: ScalingSpec, until: float = 4 * HOUR) -> engine.Cluster:
    return engine.simulate(
        jobs,
        until,
        initial_nodes=spec.min,
        controller=sim.scaler(spec),
        poll_seconds=60.0,
        launch_bounds=(LAUNCH, LAUNCH),
        delete_seconds=300.0,
    )


def test_one_job_on_a_static_cluster_starts_on_submission() -> None:
    cluster = engine.simulate([job(1, 100.0, 2, HOUR)], 2 * HOUR, initial_nodes=2)
    assert cluster.runs[1].start == 100.0
    assert cluster.calls == []


def test_an_idle_static_cluster_bills_every_node_for_the_whole_window() -> None:
    cluster = engine.simulate([], 10 * HOUR, initial_nodes=3)
    assert engine.billed_seconds(cluster, 0.0, 10 * HOUR) == 30 * HOUR
    assert engine.billed_seconds(cluster, 2 * HOUR, 5 * HOUR) == 9 * HOUR
    assert engine.busy_seconds(cluster, 0.0, 10 * HOUR) == 0.0


def test_one_job_on_a_scaled_group_waits_for_the_next_poll_and_the_launch_then_the_node_goes() -> None:
    """Submitted at 100 s; the poll at 120 s adds one node (the real policy); it joins 900 s later; the job ends at
    4620 s; idle 10 min → drained at the 5220 s poll, deleted at the next (5280 s), gone 300 s later."""
    cluster = scaled([job(1, 100.0, 1, HOUR, 2 * HOUR)], ScalingSpec(0, 4, 10))
    assert cluster.runs[1].start == 120.0 + LAUNCH
    assert cluster.calls == [(120.0, "add", 1), (5280.0, "delete", 1)]
    (node,) = cluster.nodes.values()
    assert (node.requested, node.gone) == (120.0, 5580.0)
    assert engine.billed_seconds(cluster, 0.0, 4 * HOUR) == 5580.0 - 120.0
    assert engine.launching_seconds(cluster, 0.0, 4 * HOUR) == LAUNCH


def test_a_job_arriving_while_its_node_is_drained_takes_it_back_instead_of_a_launch() -> None:
    """As above, the node is drained at 5220 s; a job submitted at 5230 s gets it undrained at the 5280 s poll."""
    cluster = scaled([job(1, 100.0, 1, HOUR), job(2, 5230.0, 1, 60.0)], ScalingSpec(0, 4, 10))
    assert cluster.runs[2].start == 5280.0
    assert cluster.runs[2].nodes == cluster.runs[1].nodes
    assert [c for c in cluster.calls if c[1] == "add"] == [(120.0, "add", 1)]


def test_a_second_job_during_a_launch_adds_only_its_own_node() -> None:
    """The nodes already launching count as supply (TargetCount): one add per shortfall, not one per poll."""
    cluster = scaled([job(1, 100.0, 1, HOUR), job(2, 400.0, 2, HOUR)], ScalingSpec(0, 8, 10))
    assert [c for c in cluster.calls if c[1] == "add"] == [(120.0, "add", 1), (420.0, "add", 2)]
    assert cluster.runs[2].start == 420.0 + LAUNCH


def test_the_scaler_keeps_min_nodes_and_never_exceeds_max() -> None:
    jobs = [job(i, 100.0, 1, HOUR) for i in range(1, 6)]
    cluster = scaled(jobs, ScalingSpec(1, 3, 10), until=6 * HOUR)
    assert [c for c in cluster.calls if c[1] == "add"] == [(120.0, "add", 2)]
    assert len(cluster.live()) == 1
    assert sorted(r.start for r in cluster.runs.values()) == [100.0, 1020.0, 1020.0, 3700.0, 4620.0]


def test_fifo_then_easy_backfill_behind_the_first_blocked_job() -> None:
    jobs = [
        job(1, 0.0, 1, 100.0),  # runs at once
        job(2, 1.0, 2, 100.0),  # blocked: reservation at 100 s (job 1's limit)
        job(3, 2.0, 1, 50.0),  # backfills: its limit ends before the reservation
        job(4, 60.0, 1, 10.0, limit=200.0),  # would fit now, but its limit runs past the reservation
    ]
    cluster = engine.simulate(jobs, HOUR, initial_nodes=2)
    assert {i: r.start for i, r in cluster.runs.items()} == {1: 0.0, 2: 100.0, 3: 2.0, 4: 200.0}


def test_backfill_may_use_nodes_the_reservation_leaves_spare() -> None:
    jobs = [job(1, 0.0, 2, 100.0), job(2, 1.0, 2, 100.0), job(3, 2.0, 1, 10.0, limit=500.0)]
    cluster = engine.simulate(jobs, HOUR, initial_nodes=3)
    assert {i: r.start for i, r in cluster.runs.items()} == {1: 0.0, 2: 100.0, 3: 2.0}


def test_deleting_a_node_with_a_job_is_refused() -> None:
    cluster = engine.simulate([job(1, 0.0, 1, HOUR)], 60.0, initial_nodes=1)
    with pytest.raises(engine.UnsafeAction):
        cluster.delete(["node-0001"])
    cluster.drain(["node-0001"])
    with pytest.raises(engine.UnsafeAction):
        cluster.delete(["node-0001"])


def test_a_week_of_the_trace_under_the_real_policy_runs_every_job_and_scales_back_to_min() -> None:
    jobs = trace.generate(7, weeks=1)
    spec = ScalingSpec(1, trace.peak_demand(jobs), 30)
    cluster = scaled(jobs, spec, until=2 * trace.WEEK)  # an UnsafeAction (busy delete, above max) would raise
    assert all(r.start is not None for r in cluster.runs.values())
    assert all(r.start >= r.job.submit for r in cluster.runs.values() if r.start is not None)
    assert len(cluster.live()) == spec.min
    static = engine.simulate(jobs, 2 * trace.WEEK, initial_nodes=spec.max)
    billed = engine.billed_seconds(cluster, 0.0, trace.WEEK)
    assert engine.busy_seconds(cluster, 0.0, trace.WEEK) <= billed < engine.billed_seconds(static, 0.0, trace.WEEK)


def test_the_trace_is_reproducible_and_follows_its_description() -> None:
    jobs = trace.generate(11, weeks=4)
    assert jobs == trace.generate(11, weeks=4)
    assert jobs != trace.generate(12, weeks=4)
    assert [j.id for j in jobs] == list(range(1, len(jobs) + 1))
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)
    assert {j.nodes for j in jobs if j.interactive} == {1, 2}
    assert {j.nodes for j in jobs if not j.interactive} == {1, 2, 4, 8}
    assert all(60.0 <= j.runtime <= j.limit <= 48 * HOUR for j in jobs)
    assert all(j.limit == 8 * HOUR for j in jobs if j.interactive)
    per_day = [0] * 7
    for j in jobs:
        per_day[int(j.submit // trace.DAY) % 7] += 1
    assert min(per_day[:5]) > 2 * max(per_day[5:])
    night = sum(1 for j in jobs if j.interactive and int(j.submit % trace.DAY // HOUR) < 7)
    assert night < 0.05 * sum(1 for j in jobs if j.interactive)


def test_peak_demand_counts_overlapping_jobs_only() -> None:
    jobs = [job(1, 0.0, 2, 100.0), job(2, 50.0, 3, 100.0), job(3, 100.0, 4, 10.0)]
    assert trace.peak_demand(jobs) == 7


def test_waits_are_measured_over_the_jobs_submitted_in_the_window() -> None:
    cluster = engine.simulate(
        [job(1, 0.0, 1, 500.0), job(2, 10.0, 1, 5.0), job(3, 900.0, 1, 5.0)], HOUR, initial_nodes=1
    )
    row = sim.measure("x", cluster, 5.0, 800.0)
    assert row.waits == (490.0,)
    assert row.node_hours == pytest.approx(795.0 / HOUR)
    assert sim.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert sim.percentile([4.0, 1.0, 3.0, 2.0], 0.95) == 4.0
    unfinished = engine.simulate([job(1, 0.0, 2, 5.0)], HOUR, initial_nodes=1)
    with pytest.raises(RuntimeError, match="never started"):
        sim.measure("y", unfinished, 0.0, HOUR)


def test_the_recorded_trace_description_is_current() -> None:
    """docs/benchmarks.md shows the lines bench/scaler_sim.py prints about its trace and model (recorded run)."""
    jobs = trace.generate(sim.SEED, weeks=3)
    docs = (Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md").read_text()
    stale = [line for line in sim.describe(jobs, trace.peak_demand(jobs), sim.SEED) if line not in docs]
    assert not stale, "rerun .venv/bin/python bench/scaler_sim.py and record its output in docs/benchmarks.md"
