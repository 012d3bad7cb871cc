"""The Slurm metrics: what ``sinfo``, ``squeue`` and ``sdiag`` say, as Prometheus gauges.

Runs on the controller from the metrics collector (:mod:`.collect`). The commands are asked for
delimiter-separated fields (``-O``/``-o`` with ``|``), the free-text field (a drain reason) last, so a ``|``
in a reason cannot shift the others. The metric names below are the one definition (:mod:`.catalog`
lists them for the dashboards).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from training_runtime.metrics.exposition import Family
from training_runtime.render.hostlist import expand

NODES = "slurm_nodes"
NODE_STATE = "slurm_node_state"
JOBS = "slurm_jobs"
JOB_NODES = "slurm_job_nodes"
CPUS = "slurm_cpus"
GPUS = "slurm_gpus"
SCHEDULER_CYCLE = "slurm_scheduler_cycle_mean_microseconds"
SCHEDULER_QUEUE = "slurm_scheduler_queue_length"
SUCCESS = "slurm_collector_success"
METRIC_NAMES = (NODES, NODE_STATE, JOBS, JOB_NODES, CPUS, GPUS, SCHEDULER_CYCLE, SCHEDULER_QUEUE, SUCCESS)

WIDTH = 4096
"""``-O`` pads and truncates every field to its width; this one is wider than any value."""
SINFO_FIELDS = ("NodeList", "StateCompact", "CPUsState", "Gres", "GresUsed", "Reason")
SINFO = ["sinfo", "-h", "-N", "-O", ",".join("{}:{}|".format(f, WIDTH) for f in SINFO_FIELDS)]
SQUEUE = ["squeue", "-h", "-a", "-o", "%i|%T|%P|%u|%N"]
SDIAG = ["sdiag"]
OUT_OF_SERVICE_STATES = ("drain", "drng", "down", "fail", "failg", "inval")
"""Compact states (flags stripped) in which a node takes no new job: drained, draining, down, failed, failing,
invalid registration. The alert rules and the node-health dashboard select these."""
STATE_FLAGS = "*~#!%$@^-+"
"""Suffixes sinfo appends to a compact state (``idle*``: not responding; ``mix-``: planned, ...)."""
GPU_COUNT = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:(\d+)")

Run = Callable[[Sequence[str]], str]
"""Runs a command and returns its stdout; raises on failure."""


@dataclass(frozen=True)
class NodeRow:
    name: str
    state: str
    cpus: Tuple[int, int, int, int]
    """allocated, idle, other, total"""
    gpus_total: int
    gpus_used: int
    reason: str


def base_state(compact: str) -> str:
    """Slurm's compact state without its flag suffixes: ``idle*`` -> ``idle``, ``drain$`` -> ``drain``."""
    return compact.strip().rstrip(STATE_FLAGS).lower() or "unknown"


def gpu_count(gres: str) -> int:
    """GPUs in a Gres/GresUsed field: ``gpu:8(S:0-1)``, ``gpu:a100:4(IDX:0-3),gpu:h100:2`` -> 8, 6."""
    return sum(int(n) for n in GPU_COUNT.findall(gres.strip()))


def parse_sinfo(text: str) -> List[NodeRow]:
    """One row per node (``-N`` repeats a node for each of its partitions; the first row counts)."""
    rows: Dict[str, NodeRow] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|", len(SINFO_FIELDS) - 1)]
        if len(parts) < len(SINFO_FIELDS) or not parts[0] or parts[0] in rows:
            continue
        name, state, cpus, gres, gres_used, reason = parts[: len(SINFO_FIELDS)]
        reason = reason.rstrip("|").strip()
        counts = tuple(int(n) if n.isdigit() else 0 for n in cpus.split("/"))
        rows[name] = NodeRow(
            name=name,
            state=base_state(state),
            cpus=((*counts, 0, 0, 0, 0))[:4],  # type: ignore[arg-type]
            gpus_total=gpu_count(gres),
            gpus_used=gpu_count(gres_used),
            reason="" if reason in ("none", "(null)") else reason,
        )
    return list(rows.values())


@dataclass(frozen=True)
class JobRow:
    job_id: str
    state: str
    partition: str
    user: str
    nodes: Tuple[str, ...]


def parse_squeue(text: str) -> List[JobRow]:
    jobs = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5 or not parts[0]:
            continue
        job_id, state, partition, user, nodes = parts
        listed = tuple(expand(nodes)) if nodes and not nodes.startswith("(") else ()
        jobs.append(JobRow(job_id, state, partition, user, listed))
    return jobs


def parse_sdiag(text: str) -> Dict[str, float]:
    """The main scheduler's mean cycle (microseconds) and last queue length from ``sdiag``'s report."""
    found: Dict[str, float] = {}
    section = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not line[0].isspace():  # a heading; its figures are indented under it
            section = stripped.lower()
            continue
        key, _, value = stripped.partition(":")
        number = value.strip().split(" ")[0]
        if not number.isdigit():
            continue
        if section.startswith("main schedule") and key == "Mean cycle":
            found[SCHEDULER_CYCLE] = float(number)
        elif section.startswith("main schedule") and key == "Last queue length":
            found[SCHEDULER_QUEUE] = float(number)
    return found


def slurm_families(run: Run) -> List[Family]:
    """Every Slurm metric; ``slurm_collector_success`` is 0 when a command failed (what the others could
    still read is kept)."""
    nodes = Family(NODES, "Slurm nodes per state (sinfo compact state without flags)")
    node_state = Family(NODE_STATE, "1 for each Slurm node, with its state and reason (empty when none)")
    jobs = Family(JOBS, "Slurm jobs per state and partition (squeue)")
    job_nodes = Family(JOB_NODES, "1 for each node of each running Slurm job")
    cpus = Family(CPUS, "CPUs of all Slurm nodes by state: alloc, idle, other, total")
    gpus = Family(GPUS, "GPUs (gres gpu) of all Slurm nodes by state: alloc, idle, total")
    cycle = Family(SCHEDULER_CYCLE, "Mean cycle of Slurm's main scheduler (sdiag), microseconds")
    queue = Family(SCHEDULER_QUEUE, "Last queue length of Slurm's main scheduler (sdiag)")
    success = Family(SUCCESS, "1 when the last collection of Slurm metrics worked, else 0")
    ok = True
    sinfo = _try(run, SINFO)
    if sinfo is None:
        ok = False
    else:
        totals = [0, 0, 0, 0]
        gpu_total = gpu_used = 0
        for row in parse_sinfo(sinfo):
            nodes.add(1, state=row.state)
            node_state.set(1, node=row.name, state=row.state, reason=row.reason)
            totals = [totals[i] + row.cpus[i] for i in range(4)]
            gpu_total += row.gpus_total
            gpu_used += row.gpus_used
        for index, state in enumerate(("alloc", "idle", "other", "total")):
            value = totals[index]
            cpus.set(value, state=state)
        gpus.set(gpu_used, state="alloc")
        gpus.set(gpu_total - gpu_used, state="idle")
        gpus.set(gpu_total, state="total")
    squeue = _try(run, SQUEUE)
    if squeue is None:
        ok = False
    else:
        for job in parse_squeue(squeue):
            jobs.add(1, state=job.state, partition=job.partition)
            if job.state == "RUNNING":
                for name in job.nodes:
                    job_nodes.set(1, job_id=job.job_id, user=job.user, partition=job.partition, node=name)
    sdiag = _try(run, SDIAG)
    scheduler = parse_sdiag(sdiag) if sdiag is not None else {}
    if SCHEDULER_CYCLE in scheduler:
        cycle.set(scheduler[SCHEDULER_CYCLE])
    if SCHEDULER_QUEUE in scheduler:
        queue.set(scheduler[SCHEDULER_QUEUE])
    if sdiag is None:
        ok = False
    success.set(1 if ok else 0)
    return [nodes, node_state, jobs, job_nodes, cpus, gpus, cycle, queue, success]


def _try(run: Run, argv: Sequence[str]) -> Optional[str]:
    try:
        return run(argv)
    except Exception:
        return None
