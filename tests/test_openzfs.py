"""A new FSx for OpenZFS file system: from the config beside Lustre (homes on OpenZFS, data on Lustre) and from
Python (MULTI_AZ_1 in an existing VPC); retention, NFS exports and security-group rules; the parameters file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from hyperpod_cdk import ClusterNetwork, ConfigurationError, OpenZfsStorage, TrainingClusterStack, parse_config
from support import fast_app, uploaded_files
from training_runtime.params import ProvisioningParameters

NFS = sorted((p, f, t) for p in ("tcp", "udp") for f, t in ((111, 111), (2049, 2049), (20001, 20003)))
ORG_KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
USERS = [{"name": "alice", "uid": 2001}]


def _only(template: dict[str, Any], kind: str, where: Any = lambda r: True) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, r) for k, r in template["Resources"].items() if r["Type"] == kind and where(r)]
    return found


def _openzfs(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return _only(template, "AWS::FSx::FileSystem", lambda r: r["Properties"]["FileSystemType"] == "OPENZFS")


@pytest.fixture(scope="module")
def beside_lustre(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The config file's default Lustre at /fsx and a new OpenZFS (all defaults: /home), with one user."""
    outdir = tmp_path_factory.mktemp("zfs")
    app = fast_app(outdir=str(outdir))
    config = parse_config({"storage_openzfs": {}, "users": USERS})
    stack = TrainingClusterStack(app, "Zfs", config=config)
    app.synth()
    return Template.from_stack(stack).to_json(), outdir


@pytest.fixture(scope="module")
def template(beside_lustre: tuple[dict[str, Any], Path]) -> dict[str, Any]:
    return beside_lustre[0]


def test_a_new_file_system_takes_the_configs_defaults(template: dict[str, Any]) -> None:
    _, fs = _openzfs(template)
    props = fs["Properties"]
    zfs = props["OpenZFSConfiguration"]
    assert props["StorageCapacity"] == 256 and props["StorageType"] == "SSD"
    assert zfs["DeploymentType"] == "SINGLE_AZ_1"
    assert zfs["ThroughputCapacity"] == 64  # SINGLE_AZ_1's smallest tier
    assert zfs["AutomaticBackupRetentionDays"] == 7
    assert zfs["CopyTagsToBackups"] is True and zfs["CopyTagsToVolumes"] is True
    assert zfs["RootVolumeConfiguration"]["DataCompressionType"] == "LZ4"
    assert "PreferredSubnetId" not in zfs and "KmsKeyId" not in props
    subnet_id, _ = _only(template, "AWS::EC2::Subnet", lambda r: "Nodes" in str(r["Properties"].get("Tags")))
    assert props["SubnetIds"] == [{"Ref": subnet_id}]


def test_the_file_system_and_its_security_group_are_retained(template: dict[str, Any]) -> None:
    _, fs = _openzfs(template)
    group_id = fs["Properties"]["SecurityGroupIds"][0]["Fn::GetAtt"][0]
    for resource in (fs, template["Resources"][group_id]):
        assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_the_root_volume_is_exported_to_the_nodes_subnet_only(template: dict[str, Any]) -> None:
    _, fs = _openzfs(template)
    (export,) = fs["Properties"]["OpenZFSConfiguration"]["RootVolumeConfiguration"]["NfsExports"]
    subnet_id, _ = _only(template, "AWS::EC2::Subnet", lambda r: "Nodes" in str(r["Properties"].get("Tags")))
    cidr = template["Resources"][subnet_id]["Properties"]["CidrBlock"]
    # no_root_squash: the runtime creates and chowns each home as root.
    assert export["ClientConfigurations"] == [{"Clients": cidr, "Options": ["rw", "crossmnt", "no_root_squash"]}]
    assert cidr != "*" and not cidr.endswith("/0")


def test_the_nodes_reach_nfs_and_the_file_system_waits_for_the_rules(template: dict[str, Any]) -> None:
    _, fs = _openzfs(template)
    group_id = fs["Properties"]["SecurityGroupIds"][0]["Fn::GetAtt"][0]
    group = template["Resources"][group_id]["Properties"]
    assert [e["CidrIp"] for e in group["SecurityGroupEgress"]] == ["255.255.255.255/32"]  # no outbound at all
    assert "SecurityGroupIngress" not in group
    rules = {
        k: r["Properties"]
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress"
        and r["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    }
    assert sorted((r["IpProtocol"], r["FromPort"], r["ToPort"]) for r in rules.values()) == NFS
    (nodes,) = [
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::EC2::SecurityGroup" and k.startswith("NetworkNode")
    ]
    assert {r["SourceSecurityGroupId"]["Fn::GetAtt"][0] for r in rules.values()} == {nodes}
    assert set(rules) | {group_id} <= set(fs["DependsOn"])


def test_hyperpod_mounts_both_file_systems_on_every_group(template: dict[str, Any]) -> None:
    key, _ = _openzfs(template)
    _, cluster = _only(template, "AWS::SageMaker::Cluster")
    for group in cluster["Properties"]["InstanceGroups"]:
        configs = group["InstanceStorageConfigs"]
        assert {"FsxOpenZfsConfig": {"DnsName": {"Fn::GetAtt": [key, "DNSName"]}, "MountPath": "/home"}} in configs
        assert [c["FsxLustreConfig"]["MountPath"] for c in configs if "FsxLustreConfig" in c] == ["/fsx"]
    assert key not in cluster["DependsOn"]  # the GetAtt above orders it (cfn-lint W3005)
    ingress = {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::EC2::SecurityGroupIngress"}
    nfs_rules = [k for k, r in ingress.items() if r["Properties"]["GroupId"]["Fn::GetAtt"][0].startswith("OpenZfs")]
    assert nfs_rules and set(nfs_rules) <= set(cluster["DependsOn"])


def test_the_nodes_parameters_put_the_homes_on_openzfs(beside_lustre: tuple[dict[str, Any], Path]) -> None:
    template, outdir = beside_lustre
    (upload,) = uploaded_files(outdir, template).values()
    params = ProvisioningParameters.from_json(upload["parameters"])  # the node's own parser
    assert params.openzfs_mount_path == "/home" and params.fsx_mount_path == "/fsx"
    assert params.homes_dir == "/home"


def test_a_cluster_built_from_python_tells_its_nodes_where_openzfs_is(tmp_path: Path) -> None:
    """HyperPodCluster on its own (no config, no deployment value): its parameters file names the mount."""
    from hyperpod_cdk import HyperPodCluster, InstanceGroup, LifecycleScripts, NodeRole

    app = fast_app(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Python")
    network = ClusterNetwork(stack, "Network")
    homes = OpenZfsStorage(stack, "Homes", network=network)
    HyperPodCluster(
        stack,
        "Cluster",
        cluster_name="py",
        network=network,
        lifecycle=LifecycleScripts(stack, "Lifecycle"),
        openzfs=homes,
        instance_groups=[
            InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1),
            InstanceGroup(name="workers", instance_type="ml.c5.4xlarge", count=2),
        ],
    )
    app.synth()
    (upload,) = uploaded_files(tmp_path, Template.from_stack(stack).to_json()).values()
    params = ProvisioningParameters.from_json(upload["parameters"])
    assert params.openzfs_mount_path == homes.mount_path == params.homes_dir


def test_without_openzfs_the_parameters_file_has_no_openzfs_key(tmp_path: Path) -> None:
    from hyperpod_cdk.core.parameters import parameters_file

    config = parse_config({})
    params = parameters_file(
        cluster_name="c",
        mode=config.mode,
        node_provisioning_mode=None,
        groups=[g.spec() for g in config.instance_groups],
        fsx_mount_path="/fsx",
        openzfs_mount_path=None,
        runtime_options=None,
    )
    assert "openzfs_mount_path" not in params.to_json()["hyperpod_cdk"]  # older runtimes read the file unchanged
    assert ProvisioningParameters.loads(params.dumps()).homes_dir == "/fsx/home"


# --- from Python: MULTI_AZ_1 in an existing VPC ----------------------------------------------------------


def _existing_network(stack: cdk.Stack, cidr: str | None = "10.1.0.0/20") -> ClusterNetwork:
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-west-2a"],
        private_subnet_ids=["subnet-0a"],
    )
    subnet = ec2.Subnet.from_subnet_attributes(
        stack, "Subnet", subnet_id="subnet-0123456789abcdef0", availability_zone="us-west-2a", ipv4_cidr_block=cidr
    )
    return ClusterNetwork(stack, "Network", vpc=vpc, subnet=subnet)


@pytest.fixture(scope="module")
def multi_az() -> dict[str, Any]:
    stack = cdk.Stack(fast_app(), "MultiAz")
    network = _existing_network(stack)
    OpenZfsStorage(
        stack,
        "Homes",
        network=network,
        deployment_type="MULTI_AZ_1",
        storage_capacity_gib=2048,
        standby_subnet=ec2.Subnet.from_subnet_id(stack, "Standby", "subnet-0123456789abcdef1"),
        route_table_ids=["rtb-0123456789abcdef0"],
        data_compression="ZSTD",
        automatic_backup_retention_days=30,
        kms_key=kms.Key.from_key_arn(stack, "Key", ORG_KEY),
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    return Template.from_stack(stack).to_json()


def test_multi_az_prefers_the_nodes_subnet_and_keeps_a_standby(multi_az: dict[str, Any]) -> None:
    _, fs = _openzfs(multi_az)
    props, zfs = fs["Properties"], fs["Properties"]["OpenZFSConfiguration"]
    assert props["SubnetIds"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    assert zfs["PreferredSubnetId"] == "subnet-0123456789abcdef0"
    assert zfs["RouteTableIds"] == ["rtb-0123456789abcdef0"]
    assert zfs["ThroughputCapacity"] == 160  # MULTI_AZ_1's smallest tier
    assert zfs["RootVolumeConfiguration"]["DataCompressionType"] == "ZSTD"
    assert zfs["AutomaticBackupRetentionDays"] == 30
    assert props["KmsKeyId"] == ORG_KEY
    assert (fs["DeletionPolicy"], fs["UpdateReplacePolicy"]) == ("Delete", "Delete")
    clients = zfs["RootVolumeConfiguration"]["NfsExports"][0]["ClientConfigurations"]
    assert [c["Clients"] for c in clients] == ["10.1.0.0/20"]  # the imported subnet's CIDR


def _problems(**props: Any) -> list[tuple[str, str]]:
    stack = cdk.Stack(fast_app(), "Bad")
    with pytest.raises(ConfigurationError) as error:
        OpenZfsStorage(stack, "Homes", network=_existing_network(stack, props.pop("cidr", "10.1.0.0/20")), **props)
    return [(getattr(p, "rule", ""), getattr(p, "path", "")) for p in error.value.problems]


def test_the_construct_names_its_props_in_the_rules_errors() -> None:
    assert _problems(deployment_type="MULTI_AZ_1", throughput_capacity_mbps=64, client_cidrs=["0.0.0.0/0"]) == [
        ("ZFS-THROUGHPUT", "throughput_capacity_mbps"),
        ("ZFS-MULTI-AZ", "standby_subnet_id"),
        ("ZFS-CLIENTS", "client_cidrs[0]"),
    ]


def test_an_imported_subnet_without_its_cidr_needs_client_cidrs() -> None:
    stack = cdk.Stack(fast_app(), "NoCidr")
    with pytest.raises(ConfigurationError, match="client_cidrs: required"):
        OpenZfsStorage(stack, "Homes", network=_existing_network(stack, None))
    stack = cdk.Stack(fast_app(), "GivenCidr")
    OpenZfsStorage(stack, "Homes", network=_existing_network(stack, None), client_cidrs=["10.1.0.0/20"])


def test_an_import_is_checked_like_the_configs_existing() -> None:
    stack = cdk.Stack(fast_app(), "Bad")
    group = ec2.SecurityGroup.from_security_group_id(stack, "Group", "sg-0123456789abcdef2")
    with pytest.raises(ConfigurationError) as error:
        OpenZfsStorage.from_open_zfs_attributes(
            stack,
            "Homes",
            file_system_id="fs-1",
            dns_name="fs-0123456789abcdef2.fsx.us-west-2.amazonaws.com",
            security_group=group,
            mount_path="relative",
        )
    assert {p.rule for p in error.value.problems} >= {"ZFS-EXISTING-IDS", "ZFS-MOUNT-PATH"}  # type: ignore[attr-defined]


def test_the_organization_key_encrypts_the_new_file_system() -> None:
    config = parse_config({"storage_openzfs": {}, "storage": None, "organization": {"kms_key_arn": ORG_KEY}})
    template = Template.from_stack(TrainingClusterStack(fast_app(), "Org", config=config)).to_json()
    _, fs = _openzfs(template)
    assert fs["Properties"]["KmsKeyId"] == ORG_KEY
