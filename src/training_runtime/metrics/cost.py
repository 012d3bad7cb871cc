"""The cost metrics: this month's spend per account, idle cost per partition and each account's budget left, as
Prometheus gauges: the figures of ``hyperpod-cdk cost`` (:func:`training_runtime.cost_report.cost_report`, the one
computation), written by the metrics collector on the controller beside the Slurm metrics.

Values are in the cluster's currency (config ``cost.currency``). The window is the current calendar month (UTC)
up to the collection, the period of an AWS budget and of a monthly ``GrpTRESMins`` reset.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, List, Sequence

from training_runtime.cost_report import SACCT_FORMAT, SSHARE, cost_report, parse_budgets, parse_partitions, parse_sacct
from training_runtime.metrics.exposition import Family

SPEND = "hyperpod_cost_spend"
IDLE = "hyperpod_cost_idle"
BUDGET_LEFT = "hyperpod_cost_budget_left"
SUCCESS = "hyperpod_cost_collector_success"
METRIC_NAMES = (SPEND, IDLE, BUDGET_LEFT, SUCCESS)
SLURM_TIME = "%Y-%m-%dT%H:%M:%S"
PARTITIONS = ["scontrol", "-o", "show", "partition"]

Run = Callable[[Sequence[str]], str]


def sacct_argv(since: datetime, until: datetime) -> List[str]:
    window = ["-S", since.strftime(SLURM_TIME), "-E", until.strftime(SLURM_TIME)]
    return ["sacct", "-a", "-X", "-P", "-n", "--format=" + SACCT_FORMAT, *window]


def cost_families(run: Run, now: datetime) -> List[Family]:
    """The cost gauges for the month of ``now`` (naive UTC); ``hyperpod_cost_collector_success`` is 0 when a
    command failed (accounting off: no sacct), and then no other series is written."""
    spend = Family(SPEND, "Spend this month per Slurm account, from its jobs' billing (cluster currency)")
    idle = Family(IDLE, "Cost this month of priced partitions' node-hours no job held (cluster currency)")
    left = Family(BUDGET_LEFT, "Budget left per Slurm account: GrpTRESMins billing less usage (cluster currency)")
    success = Family(SUCCESS, "1 when the last collection of cost metrics worked, else 0")
    since = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    try:
        report = cost_report(
            parse_sacct(run(sacct_argv(since, now))),
            parse_partitions(run(PARTITIONS)),
            parse_budgets(run(SSHARE)),
            since,
            now if now > since else since.replace(second=1),
        )
    except Exception:
        success.set(0)
        return [spend, idle, left, success]
    for line in report.lines:
        spend.set(round(line.spend, 4), account=line.key)
    for part in report.idle:
        idle.set(round(part.cost, 4), partition=part.partition)
    for budget in report.budgets:
        if budget.left is not None:
            left.set(round(budget.left, 4), account=budget.account)
    success.set(1)
    return [spend, idle, left, success]
