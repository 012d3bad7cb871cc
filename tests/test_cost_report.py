"""training_runtime.cost_report: spend per account, user, partition and job from `sacct` lines, idle cost from the
partitions' node counts and billing weights, budgets from `sshare` — every figure computed by hand below."""

from __future__ import annotations

from datetime import datetime

import pytest

from training_runtime.billing import BILLING_UNITS_PER_CURRENCY
from training_runtime.billing_weights import cpu_weight, weights_text
from training_runtime.cost_report import cost_report, parse_budgets, parse_partitions, parse_sacct


def units(amount: float) -> int:
    """``amount`` of money in billing units (the figures below are derived from the unit; the money is by hand)."""
    return round(amount * BILLING_UNITS_PER_CURRENCY)


# p5: 97.92 per node-hour over 192 CPUs per node: a CPU weight of 97.92 x units / 60 / 192 (8.5 at 1/1000, 850 at
# 1/100,000); a node bills NODE billing units per minute.
P5_WEIGHT = cpu_weight(97.92, 192)
NODE = units(97.92 / 60)
PARTITIONS = (
    "PartitionName=p5 AllowGroups=ALL Default=NO Nodes=ip-10-1-0-[3-4] State=UP TotalCPUs=384 TotalNodes=2 "
    f"TRESBillingWeights={weights_text(P5_WEIGHT)}\n"
    "PartitionName=dev AllowGroups=ALL Default=YES Nodes=ALL State=UP TotalCPUs=392 TotalNodes=3\n"
)
SACCT = "\n".join(
    [
        # 2 nodes for one hour inside the window: 2 x 97.92 = 195.84
        "101|alice|ml|p5|2026-11-20T10:00:00|2026-11-20T11:00:00|3600|"
        f"cpu=384,mem=4000000M,node=2,billing={2 * NODE}|2|COMPLETED",
        # started before the window: only 30 of its 60 minutes count: 97.92 / 2 = 48.96
        f"102|bob|vision|p5|2026-11-20T09:30:00|2026-11-20T10:30:00|3600|cpu=192,node=1,billing={NODE}|1|FAILED",
        # still running at `until` (12:00): 30 minutes: 48.96
        f"103|carol|ml|p5|2026-11-20T11:30:00|Unknown|1800|cpu=192,node=1,billing={NODE}|1|RUNNING",
        # never started: nothing
        "104|alice|ml|p5|Unknown|Unknown|0||2|PENDING",
        # HyperPod's dev partition has no weights: billing is CPUs, not money
        "105|bob|vision|dev|2026-11-20T10:00:00|2026-11-20T10:10:00|600|cpu=4,node=1,billing=4|1|COMPLETED",
        "not a record",
    ]
)
SSHARE = "\n".join(
    [
        f"root|||cpu=1,billing={units(293.76)}",
        f" ml||billing={units(500)}|cpu=100,mem=5,billing={units(244.8)}",
        f"  ml|alice||billing={units(195.84)}",
        f" vision|||billing={units(48.96)}",
    ]
)
SINCE = datetime(2026, 11, 20, 10, 0)  # the report is a pure function of its window: the fixture's jobs are of that day
UNTIL = datetime(2026, 11, 20, 12, 0)


def report(by: str = "account"):
    return cost_report(parse_sacct(SACCT), parse_partitions(PARTITIONS), parse_budgets(SSHARE), SINCE, UNTIL, by)


def test_spend_per_account_is_billing_times_minutes_inside_the_window() -> None:
    found = report()
    assert [(x.key, round(x.spend, 4), x.jobs) for x in found.lines] == [("ml", 244.8, 2), ("vision", 48.96, 1)]
    assert round(found.spend, 4) == 293.76
    assert found.unpriced_jobs == 1 and "dev partition" in found.notes[0]


def test_spend_per_user_partition_and_job() -> None:
    assert [(x.key, round(x.spend, 4)) for x in report("user").lines] == [
        ("alice", 195.84),
        ("bob", 48.96),
        ("carol", 48.96),
    ]
    assert [(x.key, round(x.spend, 4), x.node_hours) for x in report("partition").lines] == [("p5", 293.76, 3.0)]
    assert [x.key for x in report("job").lines] == ["101", "102", "103"]


def test_idle_cost_is_the_partitions_node_hours_that_no_job_held() -> None:
    # 2 nodes x 2 h = 4 node-hours; jobs held 2 + 0.5 + 0.5 = 3; 1 idle node-hour at 97.92
    (idle,) = report().idle
    assert (idle.partition, idle.node_hours, round(idle.cost, 4)) == ("p5", 1.0, 97.92)
    assert parse_partitions(PARTITIONS)["p5"].node_price_per_hour == pytest.approx(97.92)
    assert parse_partitions(PARTITIONS)["dev"].node_price_per_hour is None


def test_budget_left_is_the_limit_less_the_usage_in_money() -> None:
    budgets = {b.account: b for b in report().budgets}
    assert set(budgets) == {"ml", "vision"}  # root and user rows are not budgets
    assert budgets["ml"].left == pytest.approx(255.2)
    assert budgets["vision"].limit is None and budgets["vision"].left is None
    data = report().to_json()
    assert data["budgets"][0] == {"account": "ml", "limit": 500.0, "used": 244.8, "left": pytest.approx(255.2)}
    assert data["idle_cost"] == 97.92 and data["spend"] == 293.76


def test_a_budget_spent_past_its_limit_has_nothing_left() -> None:
    (budget,) = parse_budgets("ml||billing=1000|billing=5000")
    assert budget.left == 0.0


def test_bad_windows_and_groupings_are_refused() -> None:
    with pytest.raises(ValueError, match="by: got 'team'; one of account, user, partition, job"):
        report("team")
    with pytest.raises(ValueError, match="is not after since"):
        cost_report([], {}, [], UNTIL, SINCE)


# What Slurm 24.11.5 printed on the local cluster (HyperPod platform, tests/test_local_cost.py), its billing figures
# recomputed for the billing unit: two 2-CPU nodes at 1.29 per node-hour (CPU=10.75 when it was recorded, at
# 1/1000; scontrol prints the weights after TRES=); sshare indents accounts by depth and lists every TRES in
# GrpTRESRaw; sacct prints billing first in AllocTRES, rounded down (1 CPU x 10.75 was 10), and Start "None" for a
# job cancelled before it ran.
REAL_WEIGHT = cpu_weight(1.29, 2)
REAL_PARTITION = (
    "PartitionName=cpu AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=NO QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO ExclusiveTopo=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
    "MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED MaxCPUsPerSocket=UNLIMITED Nodes=ip-10-235-0-[12-13] "
    "PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF "
    "State=UP TotalCPUs=4 TotalNodes=2 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    f"MaxMemPerNode=UNLIMITED TRES=cpu=4,mem=3000M,node=2,billing=4 TRESBillingWeights={weights_text(REAL_WEIGHT)}"
)
REAL_TRES_RAW = "fs/disk=0,vmem=0,pages=0,gres/gpu=0,gres/gpumem=0,gres/gpuutil=0"
REAL_SSHARE = "\n".join(
    [
        f"root|||cpu=0,mem=0,energy=0,node=0,billing={units(0.005)},{REAL_TRES_RAW}",
        f" root|root||cpu=0,mem=0,energy=0,node=0,billing=0,{REAL_TRES_RAW}",
        f" nlp||billing={units(0.032)}|cpu=0,mem=0,energy=0,node=0,billing={units(0.005)},{REAL_TRES_RAW}",
        f"  nlp|bob||cpu=0,mem=0,energy=0,node=0,billing={units(0.005)},{REAL_TRES_RAW}",
        f" vision||billing=0|cpu=0,mem=0,energy=0,node=0,billing=0,{REAL_TRES_RAW}",
        f"  vision|alice||cpu=0,mem=0,energy=0,node=0,billing=0,{REAL_TRES_RAW}",
    ]
)
REAL_SACCT = "\n".join(
    [
        "1|alice|vision|cpu|None|2026-11-29T03:12:00|0||1|CANCELLED by 0",
        f"2|bob|nlp|cpu|2026-11-29T03:11:27|2026-11-29T03:11:57|30|billing={int(REAL_WEIGHT)},cpu=1,node=1|1|COMPLETED",
    ]
)


def test_what_slurm_24_11_prints_is_read_as_meant() -> None:
    partitions = parse_partitions(REAL_PARTITION)
    assert partitions["cpu"].nodes == 2 and partitions["cpu"].node_price_per_hour == pytest.approx(1.29)
    budgets = {b.account: b for b in parse_budgets(REAL_SSHARE)}
    assert set(budgets) == {"nlp", "vision"}
    assert (budgets["nlp"].limit, budgets["nlp"].used) == (units(0.032), units(0.005))
    assert budgets["nlp"].left == pytest.approx(0.027)
    assert (budgets["vision"].limit, budgets["vision"].left) == (0, 0)
    found = cost_report(
        parse_sacct(REAL_SACCT),
        partitions,
        parse_budgets(REAL_SSHARE),
        datetime(2026, 11, 29, 3, 0),  # the window of the recorded sacct answer: the report reads no other clock
        datetime(2026, 11, 29, 4, 0),
        "job",
    )
    # Job 2: 1 CPU of 2 at 1.29 per node-hour for 30 s = 0.005375, less Slurm's rounding of its billing down to a
    # whole number (at most one unit per minute); job 1 never ran. Idle: 2 nodes x 1 h - 30 s held, at 1.29 per hour.
    ((key, spend),) = [(x.key, x.spend) for x in found.lines]
    assert key == "2" and spend == pytest.approx(int(REAL_WEIGHT) * 0.5 / BILLING_UNITS_PER_CURRENCY)
    assert 0.005375 - 0.5 / BILLING_UNITS_PER_CURRENCY <= spend <= 0.005375
    assert found.idle_cost == pytest.approx((2 - 30 / 3600) * 1.29)
