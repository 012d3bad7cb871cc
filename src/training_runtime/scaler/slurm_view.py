"""What the scaler reads from and writes to Slurm, through its commands (the runner is injected).

Reads use fixed, machine-readable forms that Slurm 22.05 through 26.05 print alike (``--json`` needs the
openapi/data_parser plugins, which a node may lack): ``scontrol -o show nodes`` (one ``Key=Value`` line per
node: only administrators and Slurm write node fields), ``squeue -h -r -t PD -o '%i|%P|%D|%r'`` (one pending job,
or array element, per line: its id, partitions, node count and reason, none of them text the job's user writes)
and a job's AdminComment alone (``squeue -O admin_comment:``, :mod:`training_runtime.slurm_text`). Job fields are
never read from ``scontrol -o show job``: there the user's name, comment and paths stand among Slurm's fields, and
a job named ``x AdminComment=<the held mark>`` would read as held by the scaler. Every job id read is checked
against the job id grammar (:func:`training_runtime.slurm_text.job_id`) before it goes into a command.

Writes: ``scontrol update NodeName=… State=DRAIN Reason=…`` (:func:`policy.drain_reason`), ``State=RESUME``, and
``scontrol release`` of a job the scaler's job_submit script held (:mod:`.job_submit`), and
``scontrol update JobId=… AdminComment=…`` for why the scaler cannot give a pending job nodes. AdminComment, not
Comment: it is the administrator's field (only root/SlurmUser may set it, so users cannot spoof it) and leaves
the user's own Comment alone; ``scontrol show job`` and ``sacct -o AdminComment`` show it (Slurm, scontrol and
sacct man pages). Slurm has no command that sets a pending job's Reason.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from training_runtime.run import Result
from training_runtime.scaler.policy import DRAIN_REASON_START, PendingJob, SlurmNode
from training_runtime.slurm_text import JOB_ID, format_option, value

TIMEOUT_S = 30
COMMENT_START = DRAIN_REASON_START
"""A job's AdminComment the scaler wrote starts so (and is replaced, never appended to)."""
COMMENT_MAX = 250
BUSY_STATES = ("allocated", "mixed", "completing")
_KEY = re.compile(r"\s(?=[A-Z][A-Za-z/_:]*=)")


class Runs(Protocol):
    def run(self, argv: Sequence[str], *, timeout: float = ..., check: bool = ...) -> Result: ...


@dataclass(frozen=True)
class NodeRecord:
    """One ``scontrol -o show nodes`` line, the fields the scaler uses."""

    name: str
    state: str
    drain: bool
    responding: bool
    reason: Optional[str]
    cpu_alloc: int
    last_busy: Optional[float]
    address: Optional[str] = None
    """``NodeAddr``: the address slurmctld reaches the node at (Slurm's default: the node name)."""
    version: Optional[str] = None
    """``Version``: the node's slurmd release, as slurmctld last heard it (``status --slurm``'s security line)."""


def parse_fields(line: str) -> Dict[str, str]:
    fields: Dict[str, str] = {}
    for part in _KEY.split(" " + line.strip()):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key] = value
    return fields


def parse_state(text: str) -> Tuple[str, bool, bool]:
    """``IDLE+DRAIN`` -> (``idle``, drain, responding); ``IDLE*`` is not responding."""
    flags = text.upper().split("+")
    base = flags[0]
    responding = not base.endswith("*") and "NOT_RESPONDING" not in flags
    base = base.rstrip("*~#!%$@^-").lower()
    return base, "DRAIN" in flags, responding


def parse_time(text: Optional[str], to_epoch: Callable[[time.struct_time], float] = time.mktime) -> Optional[float]:
    """Slurm's local ``2026-11-26T01:02:03`` (``None``/``Unknown``/``0``: None)."""
    if not text or text in ("None", "Unknown", "0", "(null)"):
        return None
    try:
        return float(to_epoch(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def parse_nodes(text: str, to_epoch: Callable[[time.struct_time], float] = time.mktime) -> List[NodeRecord]:
    records = []
    for line in text.splitlines():
        fields = parse_fields(line)
        if "NodeName" not in fields:
            continue
        state, drain, responding = parse_state(fields.get("State", "UNKNOWN"))
        reason = fields.get("Reason") or None
        if reason is not None:
            reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]$", "", reason)  # scontrol appends [user@time]
        alloc = fields.get("CPUAlloc", "0")
        records.append(
            NodeRecord(
                name=fields["NodeName"],
                state=state,
                drain=drain,
                responding=responding,
                reason=reason,
                cpu_alloc=int(alloc) if alloc.isdigit() else 0,
                last_busy=parse_time(fields.get("LastBusyTime"), to_epoch),
                address=fields.get("NodeAddr") or None,
                version=fields.get("Version") or None,
            )
        )
    return records


def parse_pending(text: str) -> List[PendingJob]:
    jobs = []
    for line in text.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) != 4 or not parts[0]:
            continue
        job_id, partitions, nodes, reason = parts
        if not JOB_ID.fullmatch(job_id):
            continue  # not a job id: never put on a command line
        count = int(nodes) if nodes.isdigit() else 1
        jobs.append(PendingJob(job_id, tuple(p for p in partitions.split(",") if p), max(count, 1), reason.strip()))
    return jobs


def to_policy_nodes(records: Sequence[NodeRecord], groups: Mapping[str, str]) -> List[SlurmNode]:
    """The records of nodes whose instance ListClusterNodes lists (``groups``: Slurm name -> instance group)."""
    out = []
    for r in records:
        group = groups.get(r.name)
        if group is None:
            continue
        busy = r.cpu_alloc > 0 or r.state in BUSY_STATES
        idle_since = r.last_busy if r.state == "idle" and not busy else None
        out.append(SlurmNode(r.name, group, r.state, r.drain, r.reason, 1 if busy else 0, idle_since, r.responding))
    return out


class Slurm:
    def __init__(self, runner: Runs, bin_dir: str = "") -> None:
        self.runner = runner
        self.bin_dir = bin_dir.rstrip("/") + "/" if bin_dir else ""

    def _run(self, *argv: str) -> str:
        argv = (self.bin_dir + argv[0], *argv[1:])
        return self.runner.run(list(argv), timeout=TIMEOUT_S, check=True).stdout

    def nodes(self) -> List[NodeRecord]:
        return parse_nodes(self._run("scontrol", "-o", "show", "nodes"))

    def node(self, name: str) -> Optional[NodeRecord]:
        found = parse_nodes(self._run("scontrol", "-o", "show", "node", name))
        return found[0] if found else None

    def pending(self) -> List[PendingJob]:
        return parse_pending(self._run("squeue", "-h", "-r", "-t", "PD", "-o", "%i|%P|%D|%r"))

    def drain(self, name: str, reason: str) -> None:
        self._run("scontrol", "update", "NodeName=" + name, "State=DRAIN", "Reason=" + reason)

    def resume(self, name: str) -> None:
        self._run("scontrol", "update", "NodeName=" + name, "State=RESUME")

    def comment(self, job_id: str, text: str) -> None:
        self._run("scontrol", "update", "JobId=" + job_id, "AdminComment=" + text[:COMMENT_MAX])

    def admin_comment(self, job_id: str) -> Optional[str]:
        """A job's AdminComment, None when it has none: ``squeue -O admin_comment:`` prints that one field whole
        (squeue(1): "admin_comment: Administrator comment associated with the job"), so no text of the job's user
        (name, comment, paths) can stand in for it. scontrol(1), AdminComment: "Can only be set by a Slurm
        administrator"."""
        lines = self._run("squeue", "-h", "-r", "-j", job_id, "-O", format_option(["admin_comment"])).splitlines()
        return value(lines[0].strip()) if lines else None

    def release(self, job_id: str) -> None:
        """``scontrol release``: for a job in a partition with no node Slurm 24.11 releases it and still exits 1
        ("Requested partition configuration not available now"); the caller logs that and goes on."""
        self._run("scontrol", "release", job_id)

    def confirmed_drained(self, name: str) -> bool:
        """Fresh look just before a delete: DRAINED (idle + drain), no CPU allocated, the scaler's reason."""
        record = self.node(name)
        return (
            record is not None
            and record.drain
            and record.state == "idle"
            and record.cpu_alloc == 0
            and (record.reason or "").startswith(DRAIN_REASON_START)
        )
