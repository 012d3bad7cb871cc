"""The target-registration function against moto (SageMaker's HyperPod nodes, ELBv2's target groups): the
controller group's running nodes by IP on the REST port, nothing else; a replaced controller moves the target."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.sagemaker.models import ClusterNode as MotoNodeModel

from hyperpod_cdk.rest.targets import handler as targets
from ops_support import MotoCluster, aws_env, moto_url  # noqa: F401

PORT = 6820


@pytest.fixture
def cluster(aws_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MotoCluster, str]]:  # noqa: F811
    # moto's DescribeClusterNode lacks the address the service gives (ClusterNodeDetails.PrivatePrimaryIp).
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")  # Lambda sets it; botocore reads it
    describe = MotoNodeModel.describe
    monkeypatch.setattr(MotoNodeModel, "describe", lambda self: {**describe(self), **getattr(self, "details", {})})
    # A compute group whose name contains the controller group's: ListClusterNodes' InstanceGroupNameContains matches
    # it too, so the function must keep the controller group's nodes alone.
    groups = {
        "controller": ("ml.m5.xlarge", 1, "Controller"),
        "controller-spares": ("ml.c5.xlarge", 1, None),
        "workers": ("ml.c5.xlarge", 2, None),
    }
    made = MotoCluster("ml", groups)
    made.create()
    for number, node in enumerate(made.model.nodes.values(), start=1):
        node.details = {"PrivatePrimaryIp": f"10.1.0.{number}"}
    ec2 = boto3.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    group = boto3.client("elbv2").create_target_group(
        Name="rest", Protocol="TLS", Port=PORT, VpcId=vpc, TargetType="ip", HealthCheckProtocol="TCP"
    )["TargetGroups"][0]["TargetGroupArn"]
    monkeypatch.setenv(targets.CLUSTER_ENV, "ml")
    monkeypatch.setenv(targets.GROUP_ENV, "controller")
    monkeypatch.setenv(targets.TARGET_GROUP_ENV, group)
    monkeypatch.setenv(targets.PORT_ENV, str(PORT))
    yield made, group


def current(group: str) -> list[tuple[str, int]]:
    health = boto3.client("elbv2").describe_target_health(TargetGroupArn=group)["TargetHealthDescriptions"]
    return sorted((t["Target"]["Id"], t["Target"]["Port"]) for t in health)


def test_the_controller_alone_is_registered_on_the_rest_port(cluster: tuple[MotoCluster, str]) -> None:
    made, group = cluster
    result = targets.handler({"detail-type": "SageMaker HyperPod Cluster State Change"}, None)
    controller_ip = made.model.nodes[made.ids["controller"][0]].details["PrivatePrimaryIp"]
    assert result == {"targets": [controller_ip], "registered": [controller_ip], "deregistered": []}
    assert current(group) == [(controller_ip, PORT)]
    assert targets.handler({}, None)["registered"] == []  # nothing changed: nothing is called again


def test_a_replaced_controller_moves_the_target_and_a_stray_one_is_removed(cluster: tuple[MotoCluster, str]) -> None:
    made, group = cluster
    targets.handler({}, None)
    boto3.client("elbv2").register_targets(TargetGroupArn=group, Targets=[{"Id": "10.1.0.99", "Port": 22}])
    node: Any = made.model.nodes[made.ids["controller"][0]]
    node.details = {"PrivatePrimaryIp": "10.1.7.7"}  # replaced: the new instance has another address
    result = targets.handler({}, None)
    assert result["registered"] == ["10.1.7.7"]
    assert sorted(result["deregistered"]) == ["10.1.0.1", "10.1.0.99"]
    assert current(group) == [("10.1.7.7", PORT)]


def test_a_controller_that_does_not_run_is_not_a_target(cluster: tuple[MotoCluster, str]) -> None:
    made, group = cluster
    targets.handler({}, None)
    made.model.nodes[made.ids["controller"][0]].status = "Pending"
    assert targets.handler({}, None)["targets"] == []
    assert current(group) == []
