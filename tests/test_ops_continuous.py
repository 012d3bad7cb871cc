"""`status`, `wait` and `events` on clusters with Continuous node provisioning, which stay InService while they
scale (moto's DescribeCluster with the fields the service returns set on its state; ListClusterOperations and
ListClusterEvents answered by HyperPodFakes)."""

from __future__ import annotations

import pytest

from clock import utc
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401

pytestmark = [pytest.mark.usefixtures("aws_env"), pytest.mark.calendar]

OPERATION = {
    "OperationId": "6f0c2f84-1b0e-4a39-9c55-0000000000aa",
    "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefabcdef",
    "Type": "Scaling",
    "Status": "InProgress",
    "CreationTime": utc(1800),  # half an hour before the commands' clock (tests/clock.py)
}


def continuous(current: int = 1, target: int = 2) -> MotoCluster:
    made = MotoCluster(
        "elastic", {"controller": ("ml.m5.xlarge", 1, "Controller"), "p5": ("ml.p5.48xlarge", target, "Compute")}
    ).create()
    made.set(status="InService", NodeProvisioningMode="Continuous")
    made.group("p5")["CurrentCount"] = current
    return made


def test_status_of_a_scaling_continuous_cluster_is_pending_and_shows_counts_operations_and_image() -> None:
    made = continuous(current=1, target=2)
    made.group("p5")["ActiveOperations"] = {"Scaling": 1}
    made.group("p5")["ImageVersionStatus"] = "SecurityUpdateRequired"
    operator = Operator()
    operator.fakes.operations = [
        OPERATION,
        {**OPERATION, "OperationId": OPERATION["OperationId"][:-2] + "bb", "Status": "Done"},
    ]
    result = operator("status", "elastic", "--json")
    assert result.code == 6, result.err
    report = result.json()
    assert report["status"] == "InService"
    assert report["node_provisioning_mode"] == "Continuous"
    assert report["scaling_groups"] == ["p5"]
    p5 = next(g for g in report["groups"] if g["name"] == "p5")
    assert (p5["current_count"], p5["target_count"], p5["active_operations"]) == (1, 2, {"Scaling": 1})
    assert p5["image_version_status"] == "SecurityUpdateRequired"
    assert [o["OperationId"] for o in report["operations"]] == [OPERATION["OperationId"]]
    assert ("ListClusterOperations", {"ClusterName": "elastic", "Status": "InProgress"}) in operator.fakes.calls
    human = operator("status", "elastic")
    assert human.code == 6
    for text in ("Continuous provisioning", "1/2", "Scaling: p5", OPERATION["OperationId"], "run an AMI that needs"):
        assert text in human.out
    assert "hyperpod-cdk update-software elastic --groups p5" in " ".join(human.out.split())


def test_status_counts_alone_tell_a_continuous_cluster_is_scaling() -> None:
    continuous(current=1, target=2)
    assert Operator()("status", "elastic").code == 6


def test_an_active_scaling_operation_alone_tells_it_too() -> None:
    made = continuous(current=2, target=2)
    made.group("p5")["ActiveOperations"] = {"Scaling": 1}
    assert Operator()("status", "elastic").code == 6
    made.group("p5")["ActiveOperations"] = {}
    assert Operator()("status", "elastic").code == 0


def test_a_cluster_without_continuous_provisioning_is_judged_by_its_status() -> None:
    """Without Continuous provisioning the service reports scaling as Updating; short counts while InService
    are failed nodes that a Degraded group already reports, not a reason to wait."""
    made = continuous(current=1, target=2)
    made.model.extra.pop("NodeProvisioningMode")
    operator = Operator()
    assert operator("status", "elastic", "--json").json()["scaling_groups"] == []
    assert operator("status", "elastic").code == 0
    assert operator.fakes.batch_calls("ListClusterOperations") == []


def test_operations_that_the_caller_may_not_list_are_a_note_not_a_failure() -> None:
    continuous(current=2, target=2)
    operator = Operator()
    operator.fakes.fail["ListClusterOperations"] = ("AccessDeniedException", "no sagemaker:ListClusterOperations")
    result = operator("status", "elastic", "--json")
    assert result.code == 0
    assert result.json()["operations_note"].startswith("ListClusterOperations: AccessDeniedException")


def test_wait_keeps_waiting_while_a_continuous_cluster_is_in_service_but_short_of_its_target() -> None:
    made = continuous(current=1, target=2)
    operator = Operator()
    polls: list[float] = []

    def sleep(seconds: float) -> None:  # the second p5 node arrives after two polls; the status never changes
        polls.append(seconds)
        operator.clock[0] += seconds
        if len(polls) == 2:
            made.group("p5")["CurrentCount"] = 2

    operator.sleep = sleep
    result = operator("wait", "elastic", "--interval", "30")
    assert result.code == 0, result.err
    assert polls == [30, 30]
    assert "InService after 60 s" in result.out


def test_wait_times_out_on_a_continuous_cluster_that_does_not_reach_its_target() -> None:
    continuous(current=1, target=2)
    operator = Operator()

    def sleep(seconds: float) -> None:
        operator.clock[0] += seconds

    operator.sleep = sleep
    result = operator("wait", "elastic", "--timeout", "60", "--interval", "30")
    assert result.code == 6
    assert "is InService but still scaling (p5 1/2)" in result.err
    assert "hyperpod-cdk events" in result.err


def test_wait_stops_when_a_continuous_cluster_s_group_fails() -> None:
    made = continuous(current=0, target=2)
    made.group("p5")["Status"] = "Failed"
    operator = Operator()
    result = operator("wait", "elastic", "--json")
    assert result.code == 1
    assert operator.clock[0] == 1_000.0  # no sleep: it did not wait


def test_events_on_a_cluster_without_continuous_provisioning_explain_themselves_without_calling() -> None:
    MotoCluster("classic", {"controller": ("ml.m5.xlarge", 1, "Controller")}).create()
    operator = Operator()
    result = operator("events", "classic")
    assert result.code == 5
    assert result.err.count("\n") == 1
    assert "HyperPod keeps cluster events only for clusters with Continuous provisioning" in result.err
    assert "hyperpod-cdk logs classic" in result.err
    assert operator.fakes.batch_calls("ListClusterEvents") == []


def test_a_validation_exception_from_list_cluster_events_is_explained_too() -> None:
    continuous()
    operator = Operator()
    operator.fakes.fail["ListClusterEvents"] = ("ValidationException", "not supported for this cluster")
    result = operator("events", "elastic")
    assert result.code == 5
    assert result.err.startswith("error: ListClusterEvents refused cluster elastic (not supported for this cluster)")
    assert "cluster events exist only with Continuous node provisioning" in result.err
