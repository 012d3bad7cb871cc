"""TrainingClusterStack: composition from one config, outputs, stable logical IDs."""

import pytest
from aws_cdk.assertions import Template

from builders import only
from hyperpod_cdk import ClusterConfig, ConfigurationError, TrainingClusterStack, parse_config
from hyperpod_cdk.core.config import NetworkConfig
from support import fast_app

GROUPS = [
    {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
    {"name": "gpu", "instance_type": "ml.p5.48xlarge", "count": 2},
    {"name": "cpu", "instance_type": "ml.c5.4xlarge", "count": 2},
]
REPOSITORIES = [
    {"name": "datasets", "file_system_path": "/datasets"},
    {"name": "checkpoints", "file_system_path": "/checkpoints"},
]


def synth(config: ClusterConfig) -> Template:
    return Template.from_stack(TrainingClusterStack(fast_app(), "Cluster", config=config))


@pytest.fixture(scope="module")
def default() -> Template:
    return synth(ClusterConfig())


def test_default_stack_outputs(default: Template) -> None:
    outputs = default.find_outputs("*")
    assert set(outputs) >= {
        "ClusterName",
        "ClusterArn",
        "SsmTargetPrefix",
        "FsxDnsName",
        "FsxMountName",
        "FsxFileSystemId",
        "LifecycleBucket",
        "LifecyclePrefix",
        "TrainingJobSubnetIds",
        "TrainingJobSecurityGroupIds",
        "DataRepositoryDataBucket",
    }
    assert outputs["ClusterName"]["Value"] == "ml-cluster"
    assert outputs["LifecyclePrefix"]["Value"] == "lifecycle/"


def test_default_stack_links_a_new_retained_data_bucket(default: Template) -> None:
    buckets = default.find_resources("AWS::S3::Bucket")
    assert any(k.startswith("DataBucketData") for k in buckets)
    assert all(b["DeletionPolicy"] == "Retain" for b in buckets.values())
    _, association = only(default, "AWS::FSx::DataRepositoryAssociation")
    assert association["Properties"]["FileSystemPath"] == "/data"


def test_reordering_groups_and_repositories_changes_no_logical_id() -> None:
    forward = synth(parse_config({"instance_groups": GROUPS, "storage": {"data_repositories": REPOSITORIES}}))
    backward = synth(
        parse_config({"instance_groups": GROUPS[::-1], "storage": {"data_repositories": REPOSITORIES[::-1]}})
    )
    assert set(forward.to_json()["Resources"]) == set(backward.to_json()["Resources"])


def _unchecked(**fields: object) -> ClusterConfig:
    """A config that skipped its own check (as a caller who builds one with model_construct can)."""
    return ClusterConfig.model_construct(**{**ClusterConfig().__dict__, **fields})


def test_bad_config_fails_before_any_construct_is_built() -> None:
    app = fast_app()
    with pytest.raises(ConfigurationError, match="cluster_name: got 'bad name'"):
        TrainingClusterStack(app, "Cluster", config=_unchecked(cluster_name="bad name"))
    (stack,) = app.node.children
    assert stack.node.children == [], "the config is checked before the first construct"


def test_a_rule_only_the_config_knows_stops_the_stack() -> None:
    # No construct would notice: without vpc_id the stack would build a new VPC and ignore the subnet.
    network = NetworkConfig.model_construct(**{**NetworkConfig().__dict__, "subnet_id": "subnet-0123456789abcdef0"})
    with pytest.raises(ConfigurationError, match=r"network\.subnet_id: needs network\.vpc_id"):
        TrainingClusterStack(fast_app(), "Cluster", config=_unchecked(network=network))


def test_without_storage_there_is_no_file_system() -> None:
    template = synth(parse_config({"storage": None}))
    template.resource_count_is("AWS::FSx::FileSystem", 0)
    assert "FsxDnsName" not in template.find_outputs("*")


def test_tags_apply_to_every_taggable_resource() -> None:
    template = synth(parse_config({"tags": {"cost-center": "4711"}}))
    template.has_resource_properties("AWS::FSx::FileSystem", {"Tags": [{"Key": "cost-center", "Value": "4711"}]})
    template.has_resource_properties("AWS::SageMaker::Cluster", {"Tags": [{"Key": "cost-center", "Value": "4711"}]})


def test_cluster_waits_for_rules_on_an_adopted_file_system() -> None:
    template = synth(
        parse_config(
            {
                "storage": {
                    "existing": {
                        "file_system_id": "fs-0123456789abcdef0",
                        "mount_name": "abcdefgh",
                        "security_group_id": "sg-0123456789abcdef0",
                    }
                }
            }
        )
    )
    rules = template.find_resources(
        "AWS::EC2::SecurityGroupIngress", {"Properties": {"GroupId": "sg-0123456789abcdef0"}}
    )
    assert len(rules) == 2
    _, cluster = only(template, "AWS::SageMaker::Cluster")
    assert set(rules) <= set(cluster["DependsOn"])
