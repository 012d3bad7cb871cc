"""HyperPodCluster and the HyperPod API's newer settings: capacity, minimum count, continuous provisioning, custom
AMI, scheduled rolling updates, automatic patching, a group's own subnets, its EFA interface type, its volume key and
the external accounting database."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Annotations, Match, Template

from builders import CONTROLLER, WORKERS, cluster_stack, new_stack, only
from hyperpod_cdk import (
    ClusterNetwork,
    ConfigurationError,
    HyperPodCluster,
    InstanceGroup,
    LifecycleScripts,
    LustreStorage,
    NodeRole,
    OpenZfsStorage,
    SlurmMode,
)
from hyperpod_cdk.constructs.group_api import auto_patch_config, scheduled_update_config
from hyperpod_cdk.model import (
    AutoPatch,
    BatchSize,
    BatchSizeType,
    Capacity,
    NetworkInterfaceType,
    NodeProvisioningMode,
    OverrideVpc,
    PatchingStrategy,
    RollingDeployment,
    ScheduledUpdate,
)
from iam_support import group_roles, mentions, role_statements

SUBNET = "subnet-0123456789abcdef1"
GROUP_SG = "sg-0123456789abcdef1"
VOLUME_KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-db-AbCdEf"
ACCOUNTING = {
    "accounting": {
        "enabled": True,
        "database": "external",
        "host": "acct.cluster-abc.us-west-2.rds.amazonaws.com",
        "port": 3307,
        "password_secret_arn": SECRET,
    }
}
SPOT_GPUS = InstanceGroup(
    name="gpus",
    instance_type="ml.p5.48xlarge",
    count=4,
    capacity=Capacity.SPOT,
    min_count=2,
    image_id="ami-0123456789abcdef0",
    network_interface=NetworkInterfaceType.EFA_ONLY,
    override_vpc=OverrideVpc(subnet_ids=[SUBNET], security_group_ids=[GROUP_SG]),
    scheduled_update=ScheduledUpdate(schedule_expression="cron(0 3 ? * SUN *)"),
    ebs_volume_gib=500,
    volume_kms_key_arn=VOLUME_KEY,
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
        groups=(ON_DEMAND_CONTROLLER, WORKERS, SPOT_GPUS),
        node_provisioning_mode=NodeProvisioningMode.CONTINUOUS,
        runtime_options=ACCOUNTING,
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
    assert gpus["ScheduledUpdateConfig"] == {"ScheduleExpression": "cron(0 3 ? * SUN *)"}


def test_a_scheduled_deployment_renders_but_slurm_refuses_it() -> None:
    """AWS: "Updating your cluster in batches is available only for HyperPod clusters integrated with Amazon EKS"
    (sagemaker-hyperpod-ami-update): a Slurm cluster refuses scheduled_update.deployment (GRP-UPDATE-BATCHES-SLURM);
    the renderer stays for the day AWS documents it for Slurm."""
    update = ScheduledUpdate(
        schedule_expression="cron(0 3 ? * SUN *)",
        deployment=RollingDeployment(
            maximum_batch_size=BatchSize(type=BatchSizeType.INSTANCE_COUNT, value=1),
            rollback_maximum_batch_size=BatchSize(type=BatchSizeType.CAPACITY_PERCENTAGE, value=50),
            wait_interval_s=600,
            rollback_alarms=["gpu-xid-errors"],
        ),
    )
    assert cdk.Stack().resolve(scheduled_update_config(update)) == {
        "scheduleExpression": "cron(0 3 ? * SUN *)",
        "deploymentConfig": {
            "rollingUpdatePolicy": {
                "maximumBatchSize": {"type": "INSTANCE_COUNT", "value": 1},
                "rollbackMaximumBatchSize": {"type": "CAPACITY_PERCENTAGE", "value": 50},
            },
            "waitIntervalInSeconds": 600,
            "autoRollbackConfiguration": [{"alarmName": "gpu-xid-errors"}],
        },
    }
    with pytest.raises(ConfigurationError, match="GRP-UPDATE-BATCHES-SLURM"):
        cluster_stack(groups=(ON_DEMAND_CONTROLLER, dataclasses.replace(SPOT_GPUS, scheduled_update=update)))


def test_automatic_patching_renders_its_strategy_and_deployment_but_slurm_refuses_it(template: Template) -> None:
    """AWS documents auto-patching for EKS clusters only: a Slurm cluster refuses auto_patch (GRP-AUTO-PATCH-SLURM);
    the renderer stays for the day AWS documents it for Slurm."""
    patch = AutoPatch(
        strategy=PatchingStrategy.WHEN_ALL_IDLE,
        deployment=RollingDeployment(
            maximum_batch_size=BatchSize(type=BatchSizeType.CAPACITY_PERCENTAGE, value=25), wait_interval_s=300
        ),
    )
    assert cdk.Stack().resolve(auto_patch_config(patch)) == {
        "patchingStrategy": "WhenAllIdle",
        "deploymentConfig": {
            "rollingUpdatePolicy": {"maximumBatchSize": {"type": "CAPACITY_PERCENTAGE", "value": 25}},
            "waitIntervalInSeconds": 300,
        },
    }
    assert "AutoPatchConfig" not in _groups(template)["gpus"]
    with pytest.raises(ConfigurationError, match="GRP-AUTO-PATCH-SLURM"):
        cluster_stack(groups=(ON_DEMAND_CONTROLLER, dataclasses.replace(SPOT_GPUS, auto_patch=patch)))


def test_the_group_key_encrypts_its_extra_volume_and_its_root_volume(template: Template) -> None:
    configs = _groups(template)["gpus"]["InstanceStorageConfigs"]
    assert configs[:2] == [
        {"EbsVolumeConfig": {"VolumeSizeInGB": 500, "VolumeKmsKeyId": VOLUME_KEY}},
        {"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": VOLUME_KEY}},
    ]
    assert "FsxLustreConfig" in configs[2]
    assert VOLUME_KEY not in json.dumps(_groups(template)["controller"])


def test_the_groups_execution_role_may_create_grants_on_its_volume_key_only(template: Template) -> None:
    """HyperPod launches, adds and patches nodes with encrypted volumes through grants the group's execution role
    creates; no other group's role touches the key."""
    roles = group_roles(template.to_json())
    on_key = {
        group: [(s["Action"], s["Resource"]) for s in role_statements(template.to_json(), role) if mentions(s, "kms:")]
        for group, role in roles.items()
    }
    assert on_key == {
        "controller": [],
        "workers": [],
        "gpus": [("kms:CreateGrant", VOLUME_KEY), ("kms:DescribeKey", VOLUME_KEY)],
    }


def test_the_runtimes_external_database_becomes_the_accounting_database(template: Template) -> None:
    """One setting, runtime.accounting (api-driven, continuous): the same host, port and secret, the schema the
    runtime uses, and the execution role still reads the secret."""
    assert _cluster(template)["Orchestrator"]["Slurm"]["AccountingDatabase"] == {
        "Endpoint": "acct.cluster-abc.us-west-2.rds.amazonaws.com",
        "Port": 3307,
        "SecretArn": SECRET,
        "Name": "slurm_acct_db",
    }
    reads = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "secretsmanager:GetSecretValue" in json.dumps(s["Action"])
    ]
    assert [s["Resource"] for s in reads] == [SECRET]


def test_a_setting_left_out_writes_nothing(template: Template) -> None:
    """Absent means HyperPod's default: no On-Demand, no minimum, no AMI, no patching, no volume key is written."""
    workers = _groups(template)["workers"]
    assert NEW_KEYS & set(workers) == set()
    assert [list(c) for c in workers["InstanceStorageConfigs"]] == [["FsxLustreConfig"]]
    default, _ = cluster_stack(storage=False, runtime_options={"accounting": {"enabled": True}})
    cluster = _cluster(Template.from_stack(default))
    assert "NodeProvisioningMode" not in cluster
    assert cluster["Orchestrator"]["Slurm"] == {
        "SlurmConfigStrategy": "Merge"
    }  # AWS migration guide: keeps continuous open


def test_the_nodes_may_attach_interfaces_in_the_groups_own_subnets(template: Template) -> None:
    roles = group_roles(template.to_json())

    def create(group: str) -> str:
        (found,) = [
            s for s in role_statements(template.to_json(), roles[group]) if s.get("Sid") == "CreateNodeInterfaces"
        ]
        return json.dumps(found["Resource"])

    rendered = create("gpus")
    assert f":subnet/{SUBNET}" in rendered and f":security-group/{GROUP_SG}" in rendered
    assert "NodesSubnet" in rendered and "NetworkNodeSecurityGroup" in rendered
    # Another group's role has the cluster's subnet and group, not the gpus group's own.
    assert SUBNET not in create("workers") and GROUP_SG not in create("controller")


def _rules_of(**group: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigurationError) as error:
        cluster_stack(storage=False, groups=(InstanceGroup(**{**vars(CONTROLLER), **group}), WORKERS))
    return [(p.rule, p.path) for p in error.value.problems]  # type: ignore[attr-defined]


def test_the_construct_runs_the_rules_on_its_groups() -> None:
    assert _rules_of(capacity=Capacity.SPOT) == [("GRP-CAPACITY", "instance_groups[0].capacity")]
    # a controller's MinInstanceCount is AWS's own default (1): what the construct refuses is one without continuous
    assert _rules_of(min_count=1) == [("GRP-MIN-COUNT-CONTINUOUS", "instance_groups[0].min_count")]
    assert _rules_of(image_id="ami-xyz") == [("GRP-IMAGE-ID", "instance_groups[0].image_id")]
    assert _rules_of(network_interface=NetworkInterfaceType.EFA) == [
        ("GRP-NETWORK-INTERFACE", "instance_groups[0].network_interface")
    ]
    assert _rules_of(volume_kms_key_arn=VOLUME_KEY) == [
        ("GRP-VOLUME-KEY-CONTINUOUS", "instance_groups[0].volume_kms_key_arn")
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
        node_provisioning_mode=NodeProvisioningMode.CONTINUOUS,  # MinCount is only available there
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


ZFS_DNS = "fs-0123456789abcdef2.fsx.us-west-2.amazonaws.com"
ZFS_SG = "sg-0123456789abcdef2"


def _openzfs_stack(mode: SlurmMode = SlurmMode.API_DRIVEN, imported: bool = True) -> cdk.Stack:
    """Homes on an imported (unowned) or a new OpenZFS file system beside Lustre; one group in its own security
    group."""
    stack = new_stack()
    network = ClusterNetwork(stack, "Network")
    openzfs = (
        OpenZfsStorage.from_open_zfs_attributes(
            stack,
            "OpenZfs",
            file_system_id="fs-0123456789abcdef2",
            dns_name=ZFS_DNS,
            security_group=ec2.SecurityGroup.from_security_group_id(stack, "ZfsGroup", ZFS_SG),
            mount_path="/home",
        )
        if imported
        else OpenZfsStorage(stack, "OpenZfs", network=network, client_cidrs=["10.0.0.0/16"])
    )
    own = InstanceGroup(
        name="own",
        instance_type="ml.c5.4xlarge",
        count=1,
        override_vpc=OverrideVpc(subnet_ids=[SUBNET], security_group_ids=[GROUP_SG]),
    )
    HyperPodCluster(
        stack,
        "Cluster",
        cluster_name="c",
        network=network,
        lifecycle=LifecycleScripts(stack, "Scripts"),
        storage=LustreStorage(stack, "Storage", network=network),
        openzfs=openzfs,
        instance_groups=[CONTROLLER, WORKERS, own],
        mode=mode,
    )
    return stack


def test_openzfs_is_mounted_by_hyperpod_on_every_group_and_an_import_gets_no_rule() -> None:
    template = Template.from_stack(_openzfs_stack())
    for group in _cluster(template)["InstanceGroups"]:
        zfs = [c["FsxOpenZfsConfig"] for c in group["InstanceStorageConfigs"] if "FsxOpenZfsConfig" in c]
        assert zfs == [{"DnsName": ZFS_DNS, "MountPath": "/home"}], group["InstanceGroupName"]
    rules = [r["Properties"] for r in template.find_resources("AWS::EC2::SecurityGroupIngress").values()]
    assert [r for r in rules if r["GroupId"] == ZFS_SG] == []  # unowned: its rules are the owner's


def test_a_new_openzfs_admits_the_nodes_and_a_groups_own_security_groups() -> None:
    template = Template.from_stack(_openzfs_stack(imported=False))
    rules = [r["Properties"] for r in template.find_resources("AWS::EC2::SecurityGroupIngress").values()]
    nfs = [r for r in rules if "OpenZfsSecurityGroup" in json.dumps(r["GroupId"])]
    expected = sorted((p, f, t) for p in ("tcp", "udp") for f, t in ((111, 111), (2049, 2049), (20001, 20003)))
    from_nodes = [r for r in nfs if "NetworkNodeSecurityGroup" in json.dumps(r["SourceSecurityGroupId"])]
    from_group = [r for r in nfs if r["SourceSecurityGroupId"] == GROUP_SG]
    for found in (from_nodes, from_group):
        assert sorted((r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in found) == expected


def test_the_config_file_admits_the_nodes_and_own_groups_to_adopted_openzfs() -> None:
    """The config's storage_openzfs.existing promises the NFS rules on the adopted group: the config path adds them
    (from the nodes and from a group in its own security groups), not the import."""
    from hyperpod_cdk import TrainingClusterStack, parse_config
    from support import fast_app

    existing = {"file_system_id": "fs-0123456789abcdef2", "dns_name": ZFS_DNS, "security_group_id": ZFS_SG}
    own = {"subnet_ids": [SUBNET], "security_group_ids": [GROUP_SG]}
    config = parse_config(
        {
            "storage_openzfs": {"existing": existing},
            "network": {"vpc_id": "vpc-0123456789abcdef0", "subnet_id": SUBNET, "availability_zone": "us-west-2a"},
            "instance_groups": [
                {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
                {"name": "own", "instance_type": "ml.c5.4xlarge", "count": 1, "override_vpc": own},
            ],
        }
    )
    template = Template.from_stack(TrainingClusterStack(fast_app(), "Zfs", config=config))
    rules = [r["Properties"] for r in template.find_resources("AWS::EC2::SecurityGroupIngress").values()]
    nfs = [r for r in rules if r["GroupId"] == ZFS_SG]
    expected = sorted((p, f, t) for p in ("tcp", "udp") for f, t in ((111, 111), (2049, 2049), (20001, 20003)))
    from_nodes = [r for r in nfs if "NetworkNodeSecurityGroup" in json.dumps(r["SourceSecurityGroupId"])]
    from_group = [r for r in nfs if r["SourceSecurityGroupId"] == GROUP_SG]
    for found in (from_nodes, from_group):
        assert sorted((r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in found) == expected


def test_openzfs_needs_api_driven_mode_on_the_construct() -> None:
    with pytest.raises(ConfigurationError) as error:
        _openzfs_stack(SlurmMode.LIFECYCLE_DRIVEN)
    assert [(p.rule, p.path) for p in error.value.problems] == [("ZFS-MODE", "openzfs")]  # type: ignore[attr-defined]


def test_the_config_file_adopts_openzfs_for_the_stack() -> None:
    from hyperpod_cdk import TrainingClusterStack, parse_config
    from support import fast_app

    existing = {"file_system_id": "fs-0123456789abcdef2", "dns_name": ZFS_DNS, "security_group_id": ZFS_SG}
    config = parse_config({"storage_openzfs": {"existing": existing, "mount_path": "/home"}})
    template = Template.from_stack(TrainingClusterStack(fast_app(), "Zfs", config=config))
    for group in _cluster(template)["InstanceGroups"]:
        assert {"FsxOpenZfsConfig": {"DnsName": ZFS_DNS, "MountPath": "/home"}} in group["InstanceStorageConfigs"]
