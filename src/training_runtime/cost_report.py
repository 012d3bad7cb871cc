"""Spend in money from Slurm accounting: the one computation behind ``hyperpod-cdk cost`` and the
``hyperpod_cost_*`` metrics.

Inputs are what three read-only commands print on the controller (:data:`SACCT_FORMAT` with ``-P -n``,
``scontrol -o show partition`` and :data:`SSHARE`); :func:`cost_report` is a pure function over the parsed
records. Money comes from Slurm's ``billing`` TRES: the partitions' ``TRESBillingWeights`` make a job's billing
value its nodes' price per minute in billing units (:mod:`training_runtime.billing`), so a job's spend in a window
is ``billing x minutes it ran inside the window / BILLING_UNITS_PER_CURRENCY``.

Idle cost is approximated: each priced partition's nodes *now* (``TotalNodes``) are taken to have been there for
the whole window, and the node-hours that jobs did not hold (``NNodes x overlap``) are priced at the partition's
node price (its CPU weight x CPUs per node). Scaling during the window, nodes in two priced partitions and
down or drained nodes (which HyperPod still bills) are not told apart. Stdlib only (Python 3.8+).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Dict, Iterable, List, NamedTuple, Optional

from training_runtime.billing import BILLING_UNITS_PER_CURRENCY, money

SACCT_FIELDS = ("JobID", "User", "Account", "Partition", "Start", "End", "ElapsedRaw", "AllocTRES", "NNodes", "State")
SACCT_FORMAT = ",".join(SACCT_FIELDS)
SSHARE = ["sshare", "-a", "-P", "-n", "-o", "Account,User,GrpTRESMins,GrpTRESRaw"]
"""Each association's ``GrpTRESMins`` limit and its raw TRES usage (TRES-minutes since the last reset): the
figures ``AccountingStorageEnforce=limits`` compares."""
GROUPINGS = ("account", "user", "partition", "job")
NO_TIME = ("", "Unknown", "None", "N/A")
_BILLING = re.compile(r"(?:^|,)billing=(\d+(?:\.\d+)?)")


class JobRecord(NamedTuple):
    """One ``sacct -X`` line: a job's allocation (not its steps). A tuple: 100,000 of them are made per report."""

    job_id: str
    user: str
    account: str
    partition: str
    start: Optional[datetime]
    """None: never started (pending, cancelled before it ran)."""
    end: Optional[datetime]
    """None: still running."""
    billing: float
    """The job's ``billing`` TRES (all its nodes): billing units per minute."""
    nodes: int
    state: str


@dataclass(frozen=True)
class PartitionPrice:
    name: str
    nodes: int
    node_billing_per_minute: Optional[float]
    """A node's billing value (CPU weight x CPUs per node); None: the partition has no ``TRESBillingWeights``."""

    @property
    def node_price_per_hour(self) -> Optional[float]:
        per_minute = self.node_billing_per_minute
        return None if per_minute is None else per_minute * 60.0 / BILLING_UNITS_PER_CURRENCY


@dataclass(frozen=True)
class Budget:
    account: str
    limit: Optional[float]
    """GrpTRESMins billing (billing-minutes); None: no limit."""
    used: float
    """GrpTRESRaw billing: billing-minutes used since the last reset."""

    @property
    def left(self) -> Optional[float]:
        """Money left, never below zero; None without a limit."""
        return None if self.limit is None else max(0.0, money(self.limit - self.used))


@dataclass
class Line:
    key: str
    spend: float = 0.0
    jobs: int = 0
    node_hours: float = 0.0


@dataclass
class Idle:
    partition: str
    node_hours: float
    cost: float


@dataclass
class CostReport:
    since: datetime
    until: datetime
    by: str
    lines: List[Line]
    """Spend per key of ``by``, largest first."""
    idle: List[Idle]
    budgets: List[Budget]
    unpriced_jobs: int = 0
    """Jobs that ran in a partition without ``TRESBillingWeights``: their billing is not money."""
    notes: List[str] = field(default_factory=list)

    @property
    def spend(self) -> float:
        return sum(line.spend for line in self.lines)

    @property
    def idle_cost(self) -> float:
        return sum(i.cost for i in self.idle)

    def to_json(self) -> Dict[str, object]:
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "by": self.by,
            "spend": round(self.spend, 4),
            "idle_cost": round(self.idle_cost, 4),
            "lines": [
                {"key": x.key, "spend": round(x.spend, 4), "jobs": x.jobs, "node_hours": round(x.node_hours, 4)}
                for x in self.lines
            ],
            "idle": [
                {"partition": i.partition, "node_hours": round(i.node_hours, 4), "cost": round(i.cost, 4)}
                for i in self.idle
            ],
            "budgets": [
                {
                    "account": b.account,
                    "limit": None if b.limit is None else money(b.limit),
                    "used": money(b.used),
                    "left": b.left,
                }
                for b in self.budgets
            ],
            "unpriced_jobs": self.unpriced_jobs,
            "notes": list(self.notes),
        }


def parse_time(text: str) -> Optional[datetime]:
    if text in NO_TIME:
        return None
    return datetime.fromisoformat(text.strip())


def tres_value(tres: str, name: str = "billing") -> Optional[float]:
    """One TRES's count in a ``cpu=4,mem=16G,billing=120`` list (billing by default)."""
    if name == "billing":
        found = _BILLING.search(tres)
        return float(found.group(1)) if found else None
    for part in tres.split(","):
        key, _, value = part.partition("=")
        if key.strip().lower() == name.lower():
            try:
                return float(value)
            except ValueError:
                return None
    return None


def parse_sacct(text: str) -> List[JobRecord]:
    """``sacct -a -X -P -n --format=`` :data:`SACCT_FORMAT` output; lines that are not records are skipped."""
    records = []
    width = len(SACCT_FIELDS)
    for line in text.splitlines():
        parts = line.rstrip("\r").split("|")
        if len(parts) != width:
            continue
        job_id, user, account, partition, start, end, _elapsed, tres, nodes, state = parts
        try:
            records.append(
                JobRecord(
                    job_id=job_id,
                    user=user,
                    account=account,
                    partition=partition,
                    start=parse_time(start),
                    end=parse_time(end),
                    billing=tres_value(tres) or 0.0,
                    nodes=int(nodes or 0),
                    state=state.split(" ")[0],
                )
            )
        except ValueError:
            continue
    return records


def parse_partitions(text: str) -> Dict[str, PartitionPrice]:
    """``scontrol -o show partition``: each partition's node count and, from its CPU billing weight and CPUs per
    node, a node's billing value per minute."""
    found = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        name = fields.get("PartitionName")
        if not name:
            continue
        nodes = int(fields.get("TotalNodes", "0") or 0)
        cpus = int(fields.get("TotalCPUs", "0") or 0)
        weights = fields.get("TRESBillingWeights", "")
        weight = tres_value(weights, "CPU") if weights and weights != "(null)" else None
        per_node = weight * cpus / nodes if weight is not None and nodes else None
        found[name] = PartitionPrice(name=name, nodes=nodes, node_billing_per_minute=per_node)
    return found


def parse_budgets(text: str) -> List[Budget]:
    """The account rows (no user) of :data:`SSHARE`: ``billing`` limit and usage; root is left out."""
    budgets = []
    for line in text.splitlines():
        parts = line.rstrip("\r").split("|")
        if len(parts) != 4 or parts[1].strip():
            continue
        account = parts[0].strip()
        if not account or account == "root":
            continue
        limit = tres_value(parts[2])
        budgets.append(Budget(account=account, limit=limit, used=tres_value(parts[3]) or 0.0))
    return budgets


def _key(job: JobRecord, by: str) -> str:
    if by == "job":
        return job.job_id
    return getattr(job, by) or "(none)"


def cost_report(
    jobs: Iterable[JobRecord],
    partitions: Dict[str, PartitionPrice],
    budgets: List[Budget],
    since: datetime,
    until: datetime,
    by: str = "account",
) -> CostReport:
    """Spend per ``by`` key inside ``[since, until]``, idle cost per priced partition, and each budget."""
    if by not in GROUPINGS:
        raise ValueError("by: got {!r}; one of {}".format(by, ", ".join(GROUPINGS)))
    if until <= since:
        raise ValueError("until ({}) is not after since ({})".format(until.isoformat(), since.isoformat()))
    lines: Dict[str, Line] = {}
    held: Dict[str, float] = {}
    unpriced = 0
    for job in jobs:
        if job.start is None:
            continue
        start = job.start if job.start > since else since
        end = job.end if job.end is not None and job.end < until else until
        seconds = (end - start).total_seconds()
        if seconds <= 0:
            continue
        price = partitions.get(job.partition)
        if price is None or price.node_billing_per_minute is None:
            unpriced += 1
            continue
        hours = seconds / 3600.0
        key = _key(job, by)
        line = lines.get(key)
        if line is None:
            line = lines[key] = Line(key)
        line.spend += money(job.billing * seconds / 60.0)
        line.jobs += 1
        line.node_hours += job.nodes * hours
        held[job.partition] = held.get(job.partition, 0.0) + job.nodes * hours
    window_h = (until - since).total_seconds() / 3600.0
    idle = []
    for name in sorted(partitions):
        price = partitions[name]
        if price.node_price_per_hour is None:
            continue
        hours = max(0.0, price.nodes * window_h - held.get(name, 0.0))
        idle.append(Idle(name, hours, hours * price.node_price_per_hour))
    report = CostReport(
        since=since,
        until=until,
        by=by,
        lines=sorted(lines.values(), key=lambda x: (-x.spend, x.key)),
        idle=idle,
        budgets=sorted(budgets, key=lambda b: b.account),
        unpriced_jobs=unpriced,
    )
    if unpriced:
        report.notes.append(
            "{} job(s) ran in partitions without TRESBillingWeights (e.g. HyperPod's dev partition): their billing "
            "is CPUs, not money, and is left out".format(unpriced)
        )
    return report
