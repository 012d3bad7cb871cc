"""HyperPodCluster and the HyperPod API's newer settings: capacity, minimum count, continuous provisioning, custom
AMI, scheduled rolling updates, a group's own subnets and its EFA interface type."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from builders import CONTROLLER, WORKERS, cluster_stack, only
from hyperpod_cdk import ClusterNetwork, ConfigurationError, HyperPodCluster, InstanceGroup, LifecycleScripts, NodeRole
from hyperpod_cdk.model import (
    BatchSize,
    BatchSizeType,
    Capacity,
    NetworkInterfaceType,
    NodeProvisioningMode,
    OverrideVpc,
    RollingDeployment,
    ScheduledUpdate,
)

SUBNET = "subnet-0123456789abcdef1"
GROUP_SG = "sg-0123456789abcdef1"
SPOT_GPUS = InstanceGroup(
    name="gpus",
    instance_type="ml.p5.48xlarge",
    count=4,
    capacity=Capacity.SPOT,
    min_count=2,
    image_id="ami-0123456789abcdef0",
    network_interface=NetworkInterfaceType.EFA_ONLY,
    override_vpc=OverrideVpc(subnet_ids=[SUBNET], security_group_ids=[GROUP_SG]),
    scheduled_update=ScheduledUpdate(
        schedule_expression="cron(0 3 ? * SUN *)",
        deployment=RollingDeployment(
            maximum_batch_size=BatchSize(type=BatchSizeType.INSTANCE_COUNT, value=1),
            rollback_maximum_batch_size=BatchSize(type=BatchSizeType.CAPACITY_PERCENTAGE, value=50),
            wait_interval_s=600,
            rollback_alarms=["gpu-xid-errors"],
        ),
    ),
)
ON_DEMAND_CONTROLLER = InstanceGroup(
    name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1, capacity=Capacity.ON_DEMAND
)
NEW_KEYS = {
    "CapacityRequirements",
    "MinInstanceCount",
    "ImageId",
    "ScheduledUpdateConfig",
    "OverrideVpcConfig",
    "NetworkInterface",
}


@pytest.fixture(scope="module")
def template() -> Template:
    stack, _ = cluster_stack(
        groups=(ON_DEMAND_CONTROLLER, WORKERS, SPOT_GPUS), node_provisioning_mode=NodeProvisioningMode.CONTINUOUS
    )
    return Template.from_stack(stack)


def _cluster(template: Template) -> dict[str, Any]:
    return only(template, "AWS::SageMaker::Cluster")[1]["Properties"]


def _groups(template: Template) -> dict[str, dict[str, Any]]:
    return {g["InstanceGroupName"]: g for g in _cluster(template)["InstanceGroups"]}


def test_every_setting_reaches_its_cloudformation_property(template: Template) -> None:
    gpus = _groups(template)["gpus"]
    assert _cluster(template)["NodeProvisioningMode"] == "Continuous"
    assert gpus["CapacityRequirements"] == {"Spot": {}}
    assert _groups(template)["controller"]["CapacityRequirements"] == {"OnDemand": {}}
    assert gpus["MinInstanceCount"] == 2
    assert gpus["ImageId"] == "ami-0123456789abcdef0"
    assert gpus["NetworkInterface"] == {"InterfaceType": "efa-only"}
    assert gpus["OverrideVpcConfig"] == {"Subnets": [SUBNET], "SecurityGroupIds": [GROUP_SG]}
    assert gpus["ScheduledUpdateConfig"] == {
        "ScheduleExpression": "cron(0 3 ? * SUN *)",
        "DeploymentConfig": {
            "RollingUpdatePolicy": {
                "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                "RollbackMaximumBatchSize": {"Type": "CAPACITY_PERCENTAGE", "Value": 50},
            },
            "WaitIntervalInSeconds": 600,
            "AutoRollbackConfiguration": [{"AlarmName": "gpu-xid-errors"}],
        },
    }


def test_a_setting_left_out_writes_nothing(template: Template) -> None:
    """Absent means HyperPod's default: no On-Demand, no minimum, no AMI is written for the group."""
    assert NEW_KEYS & set(_groups(template)["workers"]) == set()
    default, _ = cluster_stack(storage=False)
    assert "NodeProvisioningMode" not in _cluster(Template.from_stack(default))


def test_the_nodes_may_attach_interfaces_in_the_groups_own_subnets(template: Template) -> None:
    create = next(
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "CreateNodeInterfaces"
    )
    rendered = json.dumps(create["Resource"])
    assert f":subnet/{SUBNET}" in rendered and f":security-group/{GROUP_SG}" in rendered
    assert "NodesSubnet" in rendered and "NetworkNodeSecurityGroup" in rendered


def _rules_of(**group: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigurationError) as error:
        cluster_stack(storage=False, groups=(InstanceGroup(**{**vars(CONTROLLER), **group}), WORKERS))
    return [(p.rule, p.path) for p in error.value.problems]  # type: ignore[attr-defined]


def test_the_construct_runs_the_rules_on_its_groups() -> None:
    assert _rules_of(capacity=Capacity.SPOT) == [("GRP-CAPACITY", "instance_groups[0].capacity")]
    assert _rules_of(min_count=1) == [("GRP-MIN-COUNT", "instance_groups[0].min_count")]
    assert _rules_of(image_id="ami-xyz") == [("GRP-IMAGE-ID", "instance_groups[0].image_id")]
    assert _rules_of(network_interface=NetworkInterfaceType.EFA) == [
        ("GRP-NETWORK-INTERFACE", "instance_groups[0].network_interface")
    ]


def test_spot_without_continuous_provisioning_is_a_warning_on_the_construct() -> None:
    stack, _ = cluster_stack(
        storage=False, groups=(CONTROLLER, InstanceGroup(**{**vars(WORKERS), "capacity": Capacity.SPOT}))
    )
    found = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(".*GRP-SPOT-CONTINUOUS.*"))
    assert found, "expected the GRP-SPOT-CONTINUOUS warning"


def test_a_minimum_against_a_count_parameter_is_left_to_cloudformation() -> None:
    stack = cdk.Stack(cdk.App(builtin_cloud_formation_validation=False), "T")
    count = cdk.CfnParameter(stack, "Count", type="Number").value_as_number
    group = InstanceGroup(name="w", instance_type="ml.c5.4xlarge", count=count, min_count=3)
    network = ClusterNetwork(stack, "Network")
    HyperPodCluster(
        stack,
        "Cluster",
        cluster_name="c",
        network=network,
        lifecycle=LifecycleScripts(stack, "Scripts"),
        instance_groups=[CONTROLLER, group],
    )
    groups = {g["InstanceGroupName"]: g for g in _cluster(Template.from_stack(stack))["InstanceGroups"]}
    assert groups["w"]["MinInstanceCount"] == 3 and groups["w"]["InstanceCount"] == {"Ref": "Count"}


def test_the_groups_own_security_groups_may_mount_the_file_system(template: Template) -> None:
    """A group with override_vpc has its own security groups: the file system admits them on the Lustre ports."""
    rules = [
        r["Properties"]
        for r in template.find_resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("SourceSecurityGroupId") == GROUP_SG
    ]
    assert sorted((r["FromPort"], r["ToPort"]) for r in rules) == [(988, 988), (1018, 1023)]
    assert all("StorageSecurityGroup" in json.dumps(r["GroupId"]) for r in rules)
