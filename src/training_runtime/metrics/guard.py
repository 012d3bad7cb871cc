"""The Slurm guard's metrics (every HyperPod node it runs on): written by the guard into node_exporter's textfile
directory (:data:`GUARD_TEXTFILE`) after each check. Repairs are a counter per check (``increase()`` over a window
is what the alarm reads, so a restart that resets it loses nothing but the count); a breakage the guard reports
and does not repair is a gauge that stays 1 while it lasts; the heartbeat says when the guard last checked."""

from __future__ import annotations

from typing import Collection, List, Mapping, Sequence

from training_runtime.metrics.exposition import Family

GUARD_TEXTFILE = "slurm_guard.prom"
REPAIRS = "hyperpod_slurm_guard_repairs_total"
PROBLEM = "hyperpod_slurm_guard_problem"
HEARTBEAT = "hyperpod_slurm_guard_last_check_timestamp_seconds"
METRIC_NAMES = (REPAIRS, PROBLEM, HEARTBEAT)


def guard_families(
    checks: Sequence[str], repairs: Mapping[str, int], problems: Collection[str], heartbeat: float
) -> List[Family]:
    """Every check gets a sample (0 when nothing happened), so an alarm on a check that never fired still has a
    series to read."""
    repaired = Family(REPAIRS, "Repairs the Slurm guard made to HyperPod's Slurm files, by check", "counter")
    problem = Family(PROBLEM, "1 while the Slurm guard finds a breakage it does not repair, by check")
    beat = Family(HEARTBEAT, "When the Slurm guard last checked this node's Slurm files (epoch seconds)")
    for check in checks:
        repaired.set(repairs.get(check, 0), check=check)
        problem.set(1 if check in problems else 0, check=check)
    beat.set(heartbeat)
    return [repaired, problem, beat]
