"""A research team's synthetic Slurm workload on one GPU group: seeded, reproducible, every parameter a constant.

No published trace is used (there is no network on the machine that runs this). The shape follows what workload
studies of the Parallel Workloads Archive report qualitatively (a daily cycle with a working-hours peak, fewer
jobs at weekends, job sizes that are mostly powers of two and small, runtimes heavy-tailed over orders of
magnitude, user time limits well above the runtime); every parameter below is our choice, not fitted to any log.

Two independent non-homogeneous Poisson arrival processes, sampled by thinning (Lewis and Shedler) from a
peak rate, with the rate at time ``t`` = peak x weekday factor x hour-of-day factor (:data:`WEEKDAY`, each
class's ``hourly``; the week starts on Monday 00:00):

- **interactive** ``salloc`` sessions (:data:`INTERACTIVE`): a size drawn from its ``sizes``, a session length
  log-normal (``median_minutes``, ``sigma``) cut at its ``cap_hours``, the time limit every session asks for;
- **batch** ``sbatch`` jobs (:data:`BATCH`): the same draws, and the time limit the user asks for is the
  runtime x U(1.5, 4) rounded up to a whole hour, at most ``cap_hours``.

Every runtime is at least one minute. :func:`generate` draws every number from one ``random.Random(seed)``, so a
seed gives the same trace on every machine and Python 3; bench/scaler_sim.py prints the values in its report.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

HOUR = 3600.0
DAY = 24 * HOUR
WEEK = 7 * DAY

WEEKDAY = (1.0, 1.0, 1.0, 1.0, 0.9, 0.25, 0.15)
"""Arrival-rate factor per day, Monday first."""

BATCH_HOURLY = (
    *(0.15, 0.12, 0.10, 0.10, 0.10, 0.12, 0.15, 0.25, 0.45, 0.70, 0.90, 1.00),
    *(0.85, 0.95, 1.00, 1.00, 0.95, 0.85, 0.70, 0.55, 0.45, 0.40, 0.30, 0.20),
)
"""Batch submissions per hour of the day, relative to the peak (evening submissions before going home)."""

INTERACTIVE_HOURLY = (
    *(0.02, 0.01, 0.01, 0.01, 0.01, 0.01, 0.02, 0.05, 0.30, 0.80, 1.00, 1.00),
    *(0.60, 0.90, 1.00, 1.00, 0.90, 0.70, 0.40, 0.20, 0.10, 0.06, 0.04, 0.03),
)
"""Interactive sessions per hour of the day, relative to the peak (working hours, a lunch dip)."""


@dataclass(frozen=True)
class JobClass:
    """One arrival process: its peak rate and how a job's size and length are drawn."""

    name: str
    peak_per_hour: float
    hourly: tuple[float, ...]
    sizes: tuple[tuple[int, float], ...]
    median_minutes: float
    sigma: float
    cap_hours: float


INTERACTIVE = JobClass("interactive", 2.5, INTERACTIVE_HOURLY, ((1, 0.8), (2, 0.2)), 45.0, 0.9, 8.0)
BATCH = JobClass("batch", 2.5, BATCH_HOURLY, ((1, 0.50), (2, 0.25), (4, 0.15), (8, 0.10)), 45.0, 1.4, 48.0)


@dataclass(frozen=True)
class Job:
    """A submission: when, how many whole nodes (exclusive), how long it runs, the time limit it asks for."""

    id: int
    submit: float
    nodes: int
    runtime: float
    limit: float
    interactive: bool


def rate(cls: JobClass, t: float) -> float:
    """Arrivals per second of ``cls`` at ``t`` seconds after Monday 00:00 of week 0."""
    day = int(t // DAY) % 7
    hour = int(t % DAY // HOUR)
    return cls.peak_per_hour / HOUR * WEEKDAY[day] * cls.hourly[hour]


def _arrivals(cls: JobClass, rng: random.Random, end: float) -> list[float]:
    peak = cls.peak_per_hour / HOUR
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= end:
            return times
        if rng.random() * peak < rate(cls, t):
            times.append(t)


def _size(cls: JobClass, rng: random.Random) -> int:
    draw = rng.random()
    for nodes, share in cls.sizes:
        draw -= share
        if draw < 0:
            return nodes
    return cls.sizes[-1][0]


def generate(seed: int, weeks: int = 1) -> list[Job]:
    """The trace of ``weeks`` weeks, in submission order (job ids count from 1 in that order)."""
    rng = random.Random(seed)
    drawn: list[tuple[float, int, float, float, bool]] = []
    for cls in (INTERACTIVE, BATCH):
        for submit in _arrivals(cls, rng, weeks * WEEK):
            nodes = _size(cls, rng)
            cap = cls.cap_hours * HOUR
            runtime = min(cap, 60.0 * cls.median_minutes * math.exp(rng.gauss(0.0, cls.sigma)))
            runtime = max(60.0, runtime)
            # an interactive session asks for the class's limit; a batch job for a multiple of its runtime
            limit = cap if cls is INTERACTIVE else min(cap, math.ceil(runtime * rng.uniform(1.5, 4.0) / HOUR) * HOUR)
            drawn.append((submit, nodes, runtime, limit, cls is INTERACTIVE))
    drawn.sort()
    return [Job(i, *fields) for i, fields in enumerate(drawn, 1)]


def peak_demand(jobs: list[Job]) -> int:
    """The most nodes the jobs would hold at once if each started when submitted (an unbounded cluster)."""
    edges = sorted([(j.submit, j.nodes) for j in jobs] + [(j.submit + j.runtime, -j.nodes) for j in jobs])
    held = most = 0
    for _, delta in edges:
        held += delta
        most = max(most, held)
    return most
