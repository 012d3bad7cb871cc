"""The scaler's pure decisions (training_runtime.scaler.policy): every rule, one failing line each."""

from __future__ import annotations

from training_runtime.groups import COMPUTE, CONTROLLER, LOGIN, GroupSpec
from training_runtime.scaler.policy import (
    ADD,
    DELETE,
    AddNodes,
    DeleteNode,
    InFlight,
    PendingJob,
    ScaledGroup,
    SlurmNode,
    batch_adds,
    batch_deletes,
    client_token,
    decide,
    drain_reason,
    for_resources,
    planned_target,
    scaled_groups,
)
from training_runtime.scaling import ScalingSpec

NOW = 1_000_000.0
MIN = 60.0


def group(current: int = 0, target: int = -1, low: int = 0, high: int = 8, idle: int = 10) -> ScaledGroup:
    return ScaledGroup("gpu", "gpu", ScalingSpec(low, high, idle), current, current if target < 0 else target)


def idle_node(name: str, minutes: float, grp: str = "gpu") -> SlurmNode:
    return SlurmNode(name, grp, "idle", idle_since=NOW - minutes * MIN)


def job(job_id: str, nodes: int, reason: str = "Resources", partition: str = "gpu") -> PendingJob:
    return PendingJob(job_id, (partition,), nodes, reason)


def test_pending_jobs_for_resources_add_nodes_to_their_partitions_group() -> None:
    decision = decide([group()], [], [job("1", 2), job("2", 1, "PartitionNodeLimit")], [], NOW)
    assert decision.add == (AddNodes("gpu", 3, 0, ("1", "2")),)


def test_jobs_pending_for_other_reasons_or_other_partitions_add_nothing() -> None:
    jobs = [job("1", 2, "Dependency"), job("2", 2, "AssocGrpGRES"), job("3", 2, partition="cpu")]
    assert decide([group()], [], jobs, [], NOW).add == ()


def test_resource_reasons_match_on_their_first_word() -> None:
    assert for_resources("ReqNodeNotAvail, UnavailableNodes:ip-10-0-0-1")
    assert for_resources("Priority")
    assert not for_resources("BeginTime")
    assert not for_resources("JobHeldUser")


def test_adds_never_take_the_target_above_max_and_say_why() -> None:
    busy = [SlurmNode(f"b{i}", "gpu", "allocated", jobs=1) for i in range(8)]
    decision = decide([group(current=6, high=8)], busy[:6], [job("1", 5)], [], NOW)
    assert decision.add == (AddNodes("gpu", 2, 6, ("1",)),)
    assert "max of 8" in decision.blocked["1"]
    full = decide([group(current=8, high=8)], busy, [job("2", 1)], [], NOW)
    assert full.add == () and "2" in full.blocked


def test_a_job_larger_than_max_is_told_so() -> None:
    decision = decide([group(high=4)], [], [job("1", 6)], [], NOW)
    assert decision.add[0].count == 4
    assert "needs 6 nodes" in decision.blocked["1"]


def test_idle_nodes_and_nodes_on_the_way_count_as_supply() -> None:
    nodes = [idle_node("n1", 0)]
    decision = decide([group(current=1, target=3)], nodes, [job("1", 4)], [], NOW)
    assert decision.add == (AddNodes("gpu", 1, 3, ("1",)),)


def test_nodes_slurm_lists_before_they_come_up_are_on_the_way() -> None:
    # HyperPod writes a new node's NodeName line before its slurmd registers: Slurm shows it idle* (not
    # responding) or UNKNOWN/DOWN while it boots. It is supply on the way, not a reason to add again (the drills).
    booting = [SlurmNode("n1", "gpu", "idle", responding=False), SlurmNode("n2", "gpu", "unknown", responding=False)]
    assert decide([group(0, 2)], booting, [job("1", 2, "PartitionConfig")], [], NOW).add == ()
    down = [SlurmNode("n1", "gpu", "down", responding=True), SlurmNode("n2", "gpu", "idle", idle_since=NOW)]
    assert decide([group(2, 2)], down, [job("1", 2)], [], NOW).add == ()
    assert decide([group(2, 2)], down, [job("1", 3)], [], NOW).add == (AddNodes("gpu", 1, 2, ("1",)),)


def test_a_group_at_0_adds_for_jobs_waiting_with_partition_config() -> None:
    # Slurm 24.11 keeps a job in a partition with no node at all pending with PartitionConfig.
    assert decide([group()], [], [job("1", 2, "PartitionConfig")], [], NOW).add == (AddNodes("gpu", 2, 0, ("1",)),)


def test_an_add_in_flight_is_not_counted_twice() -> None:
    op = InFlight(ADD, "gpu", 2, "t", base_target=0)
    # not yet reflected in TargetCount: the op's nodes are on the way
    assert decide([group(current=0, target=0)], [], [job("1", 2)], [op], NOW).add == ()
    # reflected: TargetCount already shows them; still nothing more
    assert decide([group(current=0, target=2)], [], [job("1", 2)], [op], NOW).add == ()
    assert planned_target(group(current=0, target=2), [op]) == 2
    assert planned_target(group(current=0, target=0), [op]) == 2
    # a bigger queue asks only for the difference
    assert decide([group(current=0, target=2)], [], [job("1", 2), job("2", 1)], [op], NOW).add[0].count == 1


def test_idle_minutes_are_counted_in_the_given_minute() -> None:
    node = SlurmNode("n1", "gpu", "idle", idle_since=NOW - 40.0)
    assert decide([group(current=1)], [node], [], [], NOW, minute_s=4.0).drain == ("n1",)  # 10 x 4 s
    assert decide([group(current=1)], [node], [], [], NOW, minute_s=5.0).drain == ()
    assert decide([group(current=1)], [node], [], [], NOW).drain == ()  # AWS's minute: 10 min


def test_nodes_the_scaler_drained_are_undrained_before_adding() -> None:
    ours = SlurmNode("n1", "gpu", "idle", drain=True, reason=drain_reason(10), idle_since=NOW - 30 * MIN)
    decision = decide([group(current=1)], [ours], [job("1", 2)], [], NOW)
    assert decision.undrain == ("n1",)
    assert decision.add[0].count == 1
    assert decision.delete == ()


def test_a_node_drained_by_someone_else_is_never_undrained_or_deleted() -> None:
    theirs = SlurmNode("n1", "gpu", "idle", drain=True, reason="hyperpod-cdk:gpu: count 7 of 8")
    decision = decide([group(current=1)], [theirs], [job("1", 1)], [], NOW)
    assert decision.undrain == () and decision.delete == ()
    assert decision.add[0].count == 1


def test_idle_nodes_past_idle_minutes_are_drained_longest_idle_first() -> None:
    nodes = [idle_node("n1", 11), idle_node("n2", 9), idle_node("n3", 30)]
    assert decide([group(current=3)], nodes, [], [], NOW).drain == ("n3", "n1")


def test_a_node_exactly_idle_minutes_is_drained() -> None:
    assert decide([group(current=1)], [idle_node("n1", 10)], [], [], NOW).drain == ("n1",)


def test_never_below_min_counting_nodes_already_leaving() -> None:
    leaving = SlurmNode("n1", "gpu", "idle", drain=True, reason=drain_reason(10), idle_since=NOW - 60 * MIN)
    nodes = [leaving, idle_node("n2", 60), idle_node("n3", 60)]
    assert decide([group(current=3, low=1)], nodes, [], [], NOW).drain == ("n2",)
    deleting = InFlight(DELETE, "gpu", 1, "d", nodes=("n2",))
    assert decide([group(current=3, low=1)], nodes, [], [deleting], NOW).drain == ()


def test_never_a_node_with_a_job() -> None:
    nodes = [
        SlurmNode("n1", "gpu", "mixed", jobs=1, idle_since=NOW - 60 * MIN),
        SlurmNode("n2", "gpu", "allocated", jobs=1),
        SlurmNode("n3", "gpu", "idle", jobs=1, idle_since=NOW - 60 * MIN),
    ]
    assert decide([group(current=3)], nodes, [], [], NOW).drain == ()


def test_never_a_node_of_a_group_that_is_not_scaled() -> None:
    nodes = [idle_node("c1", 600, grp="controller"), idle_node("l1", 600, grp="login"), idle_node("x", 600, "cpu")]
    decision = decide([group(current=0)], nodes, [], [], NOW)
    assert decision.drain == () and decision.delete == ()


def test_scaled_groups_are_compute_groups_with_scaling_only() -> None:
    spec = ScalingSpec(0, 4)
    groups = [
        GroupSpec("head", CONTROLLER, "ml.m5.xlarge", partition="head", scaling=spec),
        GroupSpec("login", LOGIN, "ml.m5.xlarge", partition="login", scaling=spec),
        GroupSpec("gpu", COMPUTE, "ml.p5.48xlarge", partition="gpu", scaling=spec),
        GroupSpec("cpu", COMPUTE, "ml.c5.xlarge", partition="cpu"),
    ]
    assert [g.name for g in scaled_groups(groups)] == ["gpu"]


def test_idle_nodes_are_kept_for_pending_demand() -> None:
    nodes = [idle_node("n1", 60), idle_node("n2", 60)]
    decision = decide([group(current=2)], nodes, [job("1", 1, "Priority")], [], NOW)
    assert decision.drain == ("n1",)


def test_drained_and_idle_nodes_of_the_scaler_are_deleted_once() -> None:
    ours = SlurmNode("n1", "gpu", "idle", drain=True, reason=drain_reason(10))
    assert decide([group(current=1)], [ours], [], [], NOW).delete == (DeleteNode("gpu", "n1"),)
    sent = InFlight(DELETE, "gpu", 1, "d", nodes=("n1",))
    assert decide([group(current=1)], [ours], [], [sent], NOW).delete == ()


def test_a_drained_node_where_a_job_landed_is_undrained_not_deleted() -> None:
    draining = SlurmNode("n1", "gpu", "allocated", drain=True, reason=drain_reason(10), jobs=1)
    decision = decide([group(current=1)], [draining], [], [], NOW)
    assert decision.undrain == ("n1",)
    assert decision.delete == ()


def test_a_job_in_several_partitions_counts_once() -> None:
    other = ScaledGroup("cpu", "cpu", ScalingSpec(0, 4), 0, 0)
    both = PendingJob("1", ("gpu", "cpu"), 2, "Resources")
    decision = decide([group(), other], [], [both], [], NOW)
    assert decision.add == (AddNodes("gpu", 2, 0, ("1",)),)


def test_adds_are_batched_to_50_nodes_and_5_groups_per_call() -> None:
    adds = [AddNodes(f"g{i}", 10, 0, ()) for i in range(6)] + [AddNodes("big", 120, 3, ())]
    calls = batch_adds(adds)
    for call in calls:
        assert sum(a.count for a in call) <= 50
        assert len({a.group for a in call}) == len(call) <= 5
    assert sum(a.count for call in calls for a in call) == 180
    big = [a for call in calls for a in call if a.group == "big"]
    assert [(a.count, a.base_target) for a in big] == [(50, 3), (50, 53), (20, 103)]


def test_deletes_are_batched_to_50_ids() -> None:
    deletes = [DeleteNode("gpu", f"n{i}") for i in range(101)]
    assert [len(c) for c in batch_deletes(deletes)] == [50, 50, 1]


def test_the_client_token_follows_the_decision_only() -> None:
    call = [AddNodes("gpu", 2, 0, ("1", "2"))]
    same = client_token("c", [AddNodes("gpu", 2, 0, ("2", "1"))])
    assert client_token("c", call) == same
    assert client_token("c", call) != client_token("c", [AddNodes("gpu", 2, 2, ("1", "2"))])
    assert client_token("c", call) != client_token("other", call)
    assert len(client_token("c", call)) <= 64


def test_drained_nodes_are_never_deleted_below_min_but_given_back() -> None:
    ours = [SlurmNode(n, "gpu", "idle", drain=True, reason=drain_reason(10)) for n in ("n1", "n2")]
    decision = decide([group(current=2, low=1)], ours, [], [], NOW)
    assert decision.delete == (DeleteNode("gpu", "n1"),)
    assert decision.undrain == ("n2",)
    deleting = InFlight(DELETE, "gpu", 1, "d", nodes=("n1",))
    later = decide([group(current=2, low=1)], ours, [], [deleting], NOW)
    assert later.delete == () and later.undrain == ("n2",)
