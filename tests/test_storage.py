"""LustreStorage: FSx for Lustre, its security rules, data repository associations, adoption."""

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from builders import new_stack, only
from hyperpod_cdk import (
    ClusterNetwork,
    ConfigurationError,
    DataRepositoryEvent,
    LustreStorage,
    S3DataRepository,
)
from hyperpod_cdk.constructs.storage import default_dns_name


@pytest.fixture(scope="module")
def template() -> Template:
    stack = new_stack()
    network = ClusterNetwork(stack, "Network")
    bucket = s3.Bucket(stack, "Data")
    LustreStorage(
        stack,
        "Storage",
        network=network,
        data_repositories=[
            S3DataRepository(name="training-data", bucket=bucket, file_system_path="/datasets", bucket_prefix="raw"),
            S3DataRepository(
                name="checkpoints",
                bucket=bucket,
                file_system_path="/checkpoints",
                bucket_prefix="ckpt/",
                auto_import_events=(),
                auto_export_events=(DataRepositoryEvent.NEW, DataRepositoryEvent.CHANGED),
            ),
        ],
    )
    return Template.from_stack(stack)


def test_defaults(template: Template) -> None:
    template.has_resource(
        "AWS::FSx::FileSystem",
        {
            "Properties": Match.object_like(
                {
                    "FileSystemType": "LUSTRE",
                    "FileSystemTypeVersion": "2.15",
                    "StorageCapacity": 1200,
                    "LustreConfiguration": {
                        "DeploymentType": "PERSISTENT_2",
                        "PerUnitStorageThroughput": 250,
                        "DataCompressionType": "LZ4",
                        "MetadataConfiguration": {"Mode": "AUTOMATIC"},
                    },
                }
            ),
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_lustre_ports_from_the_cluster_group_and_the_file_system_waits_for_them(template: Template) -> None:
    nodes = {"Fn::GetAtt": [Match.string_like_regexp("NetworkNodeSecurityGroup"), "GroupId"]}
    storage = {"Fn::GetAtt": [Match.string_like_regexp("StorageSecurityGroup"), "GroupId"]}
    rules = template.find_resources(
        "AWS::EC2::SecurityGroupIngress", {"Properties": {"SourceSecurityGroupId": nodes, "GroupId": storage}}
    )
    ports = sorted((r["Properties"]["FromPort"], r["Properties"]["ToPort"]) for r in rules.values())
    assert ports == [(988, 988), (1018, 1023)]
    _, file_system = only(template, "AWS::FSx::FileSystem")
    assert set(rules) <= set(file_system["DependsOn"])


def test_data_repository_associations_take_names_and_events(template: Template) -> None:
    associations = template.find_resources("AWS::FSx::DataRepositoryAssociation")
    assert sorted(k[:-8] for k in associations) == [
        "StorageRepositoryCheckpoints",
        "StorageRepositoryTrainingData",
    ]
    template.has_resource_properties(
        "AWS::FSx::DataRepositoryAssociation",
        {
            "FileSystemPath": "/checkpoints",
            "DataRepositoryPath": {"Fn::Join": ["", ["s3://", {"Ref": Match.any_value()}, "/ckpt/"]]},
            "S3": {"AutoExportPolicy": {"Events": ["NEW", "CHANGED"]}, "AutoImportPolicy": Match.absent()},
        },
    )
    template.has_resource_properties(
        "AWS::FSx::DataRepositoryAssociation",
        {
            "FileSystemPath": "/datasets",
            "S3": {
                "AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]},
                "AutoExportPolicy": Match.any_value(),
            },
        },
    )


def test_efa_enabled_uses_all_traffic_rules_naming_groups() -> None:
    stack = new_stack()
    LustreStorage(stack, "Storage", network=ClusterNetwork(stack, "Network"), efa_enabled=True, metadata_iops=6000)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::FSx::FileSystem",
        {
            "LustreConfiguration": Match.object_like(
                {"EfaEnabled": True, "MetadataConfiguration": {"Mode": "USER_PROVISIONED", "Iops": 6000}}
            )
        },
    )
    storage_group = {"Fn::GetAtt": [Match.string_like_regexp("StorageSecurityGroup"), "GroupId"]}
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"IpProtocol": "-1", "GroupId": storage_group, "DestinationSecurityGroupId": storage_group},
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "IpProtocol": "-1",
            "GroupId": storage_group,
            "SourceSecurityGroupId": {"Fn::GetAtt": [Match.string_like_regexp("NetworkNodeSecurityGroup"), "GroupId"]},
        },
    )


def test_an_imported_file_system_is_unowned_nothing_is_created_or_changed() -> None:
    stack = new_stack()
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsxGroup", "sg-0123456789abcdef0")
    storage = LustreStorage.from_lustre_attributes(
        stack,
        "Storage",
        file_system_id="fs-0123456789abcdef0",
        dns_name=default_dns_name("fs-0123456789abcdef0"),
        mount_name="abcdefgh",
        security_group=group,
    )
    storage.allow_clients(ClusterNetwork(stack, "Network"))
    resources = Template.from_stack(stack).to_json()["Resources"]
    assert not [k for k in resources if k.startswith(("Storage", "FsxGroup"))]
    assert all(r["Properties"].get("GroupId") != "sg-0123456789abcdef0" for r in resources.values())
    assert (storage.file_system_id, storage.mount_name) == ("fs-0123456789abcdef0", "abcdefgh")
    assert stack.resolve(storage.dns_name) == {
        "Fn::Join": [
            "",
            ["fs-0123456789abcdef0.fsx.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}],
        ]
    }


def test_an_import_is_checked_like_the_configs_existing() -> None:
    stack = new_stack()
    group = ec2.SecurityGroup.from_security_group_id(stack, "FsxGroup", "sg-0123456789abcdef0")
    with pytest.raises(ConfigurationError) as error:
        LustreStorage.from_lustre_attributes(
            stack,
            "Storage",
            file_system_id="fs-0123456789abcdef0",
            dns_name="nope",
            mount_name="toolongname",
            security_group=group,
        )
    assert "existing.mount_name" in str(error.value) and "existing.dns_name" in str(error.value)


def test_bad_storage_is_reported_with_every_problem() -> None:
    stack = new_stack()
    bucket = s3.Bucket(stack, "Data")
    with pytest.raises(ConfigurationError) as error:
        LustreStorage(
            stack,
            "Storage",
            network=ClusterNetwork(stack, "Network"),
            storage_capacity_gib=3000,
            throughput_mb_per_tib=200,
            deployment_type=fsx.LustreDeploymentType.PERSISTENT_2,
            data_repositories=[
                S3DataRepository(name="a", bucket=bucket, file_system_path="/data"),
                S3DataRepository(name="b", bucket=bucket, file_system_path="/data/raw"),
                S3DataRepository(name="c", bucket=bucket, file_system_path="relative"),
            ],
        )
    text = str(error.value)
    assert "storage_capacity_gib: got 3000" in text
    assert "throughput_mb_per_tib: got 200" in text
    assert "data_repositories[1].file_system_path: /data/raw overlaps data_repositories[0]" in text
    assert "data_repositories[2].file_system_path: got 'relative'" in text


def test_efa_needs_persistent_2() -> None:
    stack = new_stack()
    with pytest.raises(ConfigurationError, match="efa_enabled: needs deployment_type PERSISTENT_2"):
        LustreStorage(
            stack,
            "Storage",
            network=ClusterNetwork(stack, "Network"),
            efa_enabled=True,
            deployment_type=fsx.LustreDeploymentType.SCRATCH_2,
            throughput_mb_per_tib=None,
        )


def test_persistent_2_needs_lustre_2_15() -> None:
    stack = new_stack()
    with pytest.raises(ConfigurationError, match=r"file_system_type_version: got '2\.12'"):
        LustreStorage(
            stack,
            "Storage",
            network=ClusterNetwork(stack, "Network"),
            file_system_type_version=fsx.FileSystemTypeVersion.V_2_12,
        )
