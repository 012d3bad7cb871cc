"""training_runtime.cost_report: spend per account, user, partition and job from `sacct` lines, idle cost from the
partitions' node counts and billing weights, budgets from `sshare` — every figure computed by hand below."""

from __future__ import annotations

from datetime import datetime

import pytest

from training_runtime.cost_report import cost_report, parse_budgets, parse_partitions, parse_sacct

# p5: CPU weight 8.5 x 192 CPUs per node = 1632 billing units per node-minute = 97.92 per node-hour.
PARTITIONS = (
    "PartitionName=p5 AllowGroups=ALL Default=NO Nodes=ip-10-1-0-[3-4] State=UP TotalCPUs=384 TotalNodes=2 "
    "TRESBillingWeights=CPU=8.5\n"
    "PartitionName=dev AllowGroups=ALL Default=YES Nodes=ALL State=UP TotalCPUs=392 TotalNodes=3\n"
)
SACCT = "\n".join(
    [
        # 2 nodes for one hour inside the window: 3264 x 60 / 1000 = 195.84
        "101|alice|ml|p5|2026-11-20T10:00:00|2026-11-20T11:00:00|3600|cpu=384,mem=4000000M,node=2,billing=3264|2|COMPLETED",
        # started before the window: only 30 of its 60 minutes count: 1632 x 30 / 1000 = 48.96
        "102|bob|vision|p5|2026-11-20T09:30:00|2026-11-20T10:30:00|3600|cpu=192,node=1,billing=1632|1|FAILED",
        # still running at `until` (12:00): 30 minutes: 48.96
        "103|carol|ml|p5|2026-11-20T11:30:00|Unknown|1800|cpu=192,node=1,billing=1632|1|RUNNING",
        # never started: nothing
        "104|alice|ml|p5|Unknown|Unknown|0||2|PENDING",
        # HyperPod's dev partition has no weights: billing is CPUs, not money
        "105|bob|vision|dev|2026-11-20T10:00:00|2026-11-20T10:10:00|600|cpu=4,node=1,billing=4|1|COMPLETED",
        "not a record",
    ]
)
SSHARE = "\n".join(
    [
        "root|||cpu=1,billing=293760",
        " ml||billing=500000|cpu=100,mem=5,billing=244800",
        "  ml|alice||billing=195840",
        " vision|||billing=48960",
    ]
)
SINCE = datetime(2026, 11, 20, 10, 0)
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
