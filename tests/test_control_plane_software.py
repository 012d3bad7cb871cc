"""UpdateClusterSoftware on the emulated control plane (hyperpod_local.control_plane.software): on Slurm no
DeploymentConfig ("Updating your cluster in batches is available only for HyperPod clusters integrated with Amazon
EKS", sagemaker-hyperpod-ami-update); every Running node of the named groups (all groups when none is named) is
re-imaged, and DescribeCluster / ListClusterNodes show it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_local.control_plane.fleet import Fleet, Settings
from hyperpod_local.control_plane.memory import MemoryBackend
from hyperpod_local.control_plane.model import ClusterInfo, Group, Node
from hyperpod_local.control_plane.operations import ControlPlane
from test_control_plane import ARN, LIFECYCLE, ROLE, Harness, code, make

cp = pytest.fixture(make())


def reimaged(backend: MemoryBackend) -> list[str]:
    return [instance for action, instance in backend.log if action == "reimage"]


def test_the_named_group_is_reimaged_node_by_node_and_shows_it(cp: Harness) -> None:
    client = cp.client()
    workers = [str(n.instance_id) for n in cp.plane.fleet.nodes if n.group == "gpu"]
    cp.later(30)
    answer = client.update_cluster_software(ClusterName="ml-cluster", InstanceGroups=[{"InstanceGroupName": "gpu"}])
    assert answer["ClusterArn"] == ARN
    assert sorted(reimaged(cp.backend)) == sorted(workers)  # the controller group is not named: left alone
    described = {g["InstanceGroupName"]: g for g in client.describe_cluster(ClusterName="ml-cluster")["InstanceGroups"]}
    assert described["gpu"]["SoftwareUpdateStatus"] == "Succeeded"
    assert "SoftwareUpdateStatus" not in described["controller"]
    listed = client.list_cluster_nodes(ClusterName="ml-cluster")["ClusterNodeSummaries"]
    updated = {n["InstanceId"]: n.get("LastSoftwareUpdateTime") for n in listed}
    assert all(updated[w] is not None and updated[w].timestamp() == cp.clock[0] for w in workers)
    assert [i for i, when in updated.items() if when is None] == [
        n.instance_id for n in cp.plane.fleet.nodes if n.group == "controller"
    ]


def test_without_groups_every_group_is_updated(cp: Harness) -> None:
    cp.client().update_cluster_software(ClusterName="ml-cluster", ImageId="default")
    assert len(reimaged(cp.backend)) == len(cp.plane.fleet.nodes)


@pytest.mark.parametrize(
    "deployment",
    [
        {"RollingUpdatePolicy": {"MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1}}},
        {"WaitIntervalInSeconds": 60},
        {"AutoRollbackConfiguration": [{"AlarmName": "a"}]},
    ],
)
def test_a_deployment_config_is_refused_on_slurm_with_the_pages_words(cp: Harness, deployment: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as error:
        cp.client().update_cluster_software(
            ClusterName="ml-cluster", InstanceGroups=[{"InstanceGroupName": "gpu"}], DeploymentConfig=deployment
        )
    assert code(error) == "ValidationException"
    assert "available only for HyperPod clusters integrated with Amazon EKS" in str(error.value)
    assert reimaged(cp.backend) == []


def test_an_unknown_group_is_refused(cp: Harness) -> None:
    with pytest.raises(ClientError) as error:
        cp.client().update_cluster_software(ClusterName="ml-cluster", InstanceGroups=[{"InstanceGroupName": "gpus"}])
    assert code(error) == "ValidationException" and "'gpus'" in str(error.value)


def deferred() -> tuple[ControlPlane, MemoryBackend, list[Callable[[], None]]]:
    """A plane whose background work waits in a list: an update stays in progress until the test runs it."""
    backend, pending = MemoryBackend(), list[Callable[[], None]]()
    groups = [
        Group("controller", "Controller", "ml.m5.xlarge", 1, ROLE, LIFECYCLE),
        Group("cpu", "Compute", "ml.c5.xlarge", 2, ROLE, LIFECYCLE),
    ]
    nodes = []
    for group in groups:
        for number in range(group.target):
            node = Node(f"{group.name}-{number}", group.name, group.instance_type, "Running", 0.0)
            node.instance = backend.allocate(group)
            nodes.append(node)
    fleet = Fleet(groups, nodes, backend, settings=Settings, clock=lambda: 5.0, spawn=pending.append)
    return ControlPlane(ClusterInfo("ml-cluster", ARN, False, 0.0), fleet), backend, pending


def test_while_nodes_are_reimaged_the_cluster_is_system_updating_and_a_second_update_conflicts() -> None:
    plane, backend, pending = deferred()
    backend.failing.add(next(str(n.instance_id) for n in plane.fleet.nodes if n.group == "cpu"))
    plane.call("UpdateClusterSoftware", {"ClusterName": "ml-cluster", "InstanceGroups": [{"InstanceGroupName": "cpu"}]})
    described = plane.call("DescribeCluster", {"ClusterName": "ml-cluster"})
    assert described["ClusterStatus"] == "SystemUpdating"
    assert {g["InstanceGroupName"]: g.get("SoftwareUpdateStatus") for g in described["InstanceGroups"]} == {
        "controller": None,
        "cpu": "InProgress",
    }
    statuses = {
        n["InstanceStatus"]["Status"]
        for n in plane.call("ListClusterNodes", {"ClusterName": "ml-cluster"})["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "cpu"
    }
    assert statuses == {"SystemUpdating"}
    with pytest.raises(Exception, match="ConflictException"):
        plane.call(
            "UpdateClusterSoftware", {"ClusterName": "ml-cluster", "InstanceGroups": [{"InstanceGroupName": "cpu"}]}
        )
    for work in pending:
        work()
    described = plane.call("DescribeCluster", {"ClusterName": "ml-cluster"})
    assert described["ClusterStatus"] != "SystemUpdating"  # Updating: a node Failed, CurrentCount is below target
    assert (
        next(g for g in described["InstanceGroups"] if g["InstanceGroupName"] == "cpu")["SoftwareUpdateStatus"]
        == "Failed"
    )
