"""The published template: no CDK bootstrap, assets or Lambda; a content-addressed lifecycle prefix in the
platform bucket whose files the assembly holds, with a parameters file the node reads and no deploy-time value."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from hyperpod_cdk import ClusterConfig, ConfigurationError, PublishedTrainingClusterStack, PublishTarget
from hyperpod_cdk.constructs.network import DEFAULT_SG_FINDING
from hyperpod_cdk.core.published_layout import LifecycleTree, tree_hash
from support import cfn_lint, fast_app
from training_runtime.params import ProvisioningParameters

TARGET = PublishTarget("platform-templates", "teams/ml")
TOKEN = re.compile(r"\$\{Token\[|<<marker|\{\"(Ref|Fn::)")


class Published:
    def __init__(self, outdir: Path, config: ClusterConfig) -> None:
        app = fast_app(outdir=str(outdir))
        self.stack = PublishedTrainingClusterStack(app, "published", config=config, target=TARGET)
        assembly = app.synth()
        self.outdir = outdir
        self.template: dict[str, Any] = assembly.get_stack_by_name("published").template
        self.assets = json.loads((outdir / "published.assets.json").read_text())

    def resources(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.template["Resources"].values() if r["Type"] == kind]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    config = ClusterConfig.model_validate(
        {"users": [{"name": "alice", "uid": 2001}], "lifecycle": {"prefix": "ignored/"}}
    )
    return Published(tmp_path_factory.mktemp("published"), config)


def test_nothing_refers_to_cdk_bootstrap_and_nothing_needs_an_asset_or_a_lambda(published: Published) -> None:
    text = json.dumps(published.template)
    assert "cdk-hnb659fds" not in text and "hnb659fds" not in text
    assert "BootstrapVersion" not in published.template.get("Parameters", {})
    assert "CheckBootstrapVersion" not in published.template.get("Rules", {})
    kinds = {r["Type"] for r in published.template["Resources"].values()}
    assert not [k for k in kinds if k.startswith(("AWS::Lambda::", "Custom::"))], kinds
    assert "AWS::SageMaker::Cluster" in kinds
    # The only file asset is the template itself (publish puts it under templates/), bound for the platform bucket.
    [(_, template_asset)] = published.assets["files"].items()
    assert template_asset["source"]["path"] == "published.template.json"
    [destination] = template_asset["destinations"].values()
    assert destination["bucketName"] == TARGET.bucket_name
    assert destination["objectKey"].startswith("teams/ml/assets/")
    assert not published.assets.get("dockerImages")


def test_cfn_lint_finds_nothing(published: Published) -> None:
    assert cfn_lint(published.template) == []


def test_the_lifecycle_prefix_is_the_hash_of_the_files_the_assembly_holds(published: Published) -> None:
    [cluster] = published.resources("AWS::SageMaker::Cluster")
    uris = {g["LifeCycleConfig"]["SourceS3Uri"] for g in cluster["Properties"]["InstanceGroups"]}
    [tree] = LifecycleTree.all_in(published.outdir)
    assert uris == {f"s3://platform-templates/teams/ml/lifecycle/{tree.tree}/"}
    assert (tree.bucket, tree.key_prefix) == ("platform-templates", f"teams/ml/lifecycle/{tree.tree}/")
    files = tree.files()
    assert tree_hash(files) == tree.tree
    assert {"on_init_complete.sh", "on_create.sh", "training_runtime/__main__.py", "users.json"} <= set(files)
    assert json.loads(files["users.json"])["users"][0]["name"] == "alice"


def test_the_parameters_file_is_what_the_node_reads_with_no_deploy_time_value(published: Published) -> None:
    [tree] = LifecycleTree.all_in(published.outdir)
    text = tree.files()["hyperpod_cdk_parameters.json"].decode()
    assert not TOKEN.search(text), text
    params = ProvisioningParameters.loads(text)
    assert params.cluster_name == "ml-cluster"
    assert params.fsx is True and params.has_fsx
    assert params.fsx_dns_name is None and params.fsx_mountname is None


def test_the_nodes_read_that_prefix_only(published: Published) -> None:
    [tree] = LifecycleTree.all_in(published.outdir)
    resources = []
    for policy in published.resources("AWS::IAM::Policy"):
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if "s3:GetObject*" in statement["Action"]:
                resources += [json.dumps(r) for r in statement["Resource"]]
    objects = [r for r in resources if "platform-templates/" in r]
    expected = json.dumps(
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{tree.bucket}/{tree.key_prefix}*"]]}
    )
    roles = {
        json.dumps(g["ExecutionRole"])
        for c in published.resources("AWS::SageMaker::Cluster")
        for g in c["Properties"]["InstanceGroups"]
    }
    assert objects == [expected] * len(roles)  # each group's execution role reads that prefix, nothing else


def test_the_vpc_says_why_its_default_security_group_is_left_to_the_baseline(published: Published) -> None:
    [vpc] = published.resources("AWS::EC2::VPC")
    [skip] = vpc["Metadata"]["checkov"]["skip"]
    assert skip["id"] == DEFAULT_SG_FINDING
    assert "vpc-default-security-group-closed" in skip["comment"] and "Lambda" in skip["comment"]


def test_the_config_lifecycle_section_is_not_used_and_a_warning_says_so(published: Published) -> None:
    assert "ignored/" not in json.dumps(published.template)
    warnings = cdk.assertions.Annotations.from_stack(published.stack).find_warning(
        "*", cdk.assertions.Match.any_value()
    )
    texts = [json.dumps(w.entry.data) for w in warnings]
    assert any("lifecycle: not used by a published template" in t for t in texts), texts


def test_files_cannot_change_once_synth_fixed_the_prefix(published: Published) -> None:
    with pytest.raises(ConfigurationError, match="users: added after synth fixed the prefix's files"):
        published.stack.lifecycle.add_users([])


# --- what cannot be published, and what can without synth ---------------------------------------------------


def _stack(config: ClusterConfig) -> PublishedTrainingClusterStack:
    return PublishedTrainingClusterStack(fast_app(), "p", config=config, target=TARGET)


def test_lifecycle_driven_mode_with_a_new_file_system_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError) as error:
        _stack(ClusterConfig(mode="lifecycle-driven"))
    text = str(error.value)
    assert "storage: lifecycle-driven mode writes the file system's DNS and mount names" in text
    assert "storage.existing with dns_name and mount_name" in text and "mode: api-driven" in text


def test_lifecycle_driven_mode_with_an_adopted_file_system_and_its_names_publishes_them() -> None:
    existing = {
        "file_system_id": "fs-0123456789abcdef0",
        "mount_name": "abcdefgh",
        "security_group_id": "sg-0123456789abcdef0",
        "dns_name": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
    }
    stack = _stack(ClusterConfig.model_validate({"mode": "lifecycle-driven", "storage": {"existing": existing}}))
    params = stack.lifecycle.parameters
    assert params is not None and params.fsx is True
    assert (params.fsx_dns_name, params.fsx_mountname) == (existing["dns_name"], "abcdefgh")
    ProvisioningParameters.loads(params.dumps())


def test_a_parameters_file_with_a_deploy_time_value_is_refused() -> None:
    from hyperpod_cdk import PublishedLifecycleScripts

    stack = cdk.Stack(fast_app(), "s")
    scripts = PublishedLifecycleScripts(stack, "Scripts", bucket_name="platform-templates")
    params = _stack(ClusterConfig(storage=None)).lifecycle.parameters
    assert params is not None
    name = cdk.CfnParameter(stack, "Name").value_as_string
    with pytest.raises(ConfigurationError, match=r"parameters\.hyperpod_cdk\.cluster_name: holds a value only known"):
        scripts.add_parameters(dataclasses.replace(params, cluster_name=name))
    scripts.add_parameters(params)


def test_a_template_with_launch_parameters_publishes_and_its_nodes_read_the_type_from_hyperpod(
    tmp_path: Path,
) -> None:
    """The platform-template example (launch choices as CloudFormation parameters) publishes: the parameters
    stay in the template, the lifecycle prefix holds no token (a chosen instance type is null there)."""
    from hyperpod_cdk import load_config
    from support import ROOT

    published = Published(tmp_path, load_config(ROOT / "examples" / "platform-template.yaml"))
    assert {"HyperPodClusterName", "InstanceGroupWorkersType"} <= set(published.template["Parameters"])
    assert "BootstrapVersion" not in published.template["Parameters"]
    [tree] = LifecycleTree.all_in(published.outdir)
    text = tree.files()["hyperpod_cdk_parameters.json"].decode()
    assert not TOKEN.search(text), text
    params = ProvisioningParameters.loads(text)
    assert params.group("workers").instance_type is None  # type: ignore[union-attr]
    assert params.group("controller").instance_type == "ml.m5.xlarge"  # type: ignore[union-attr]
    assert params.cluster_name == "team-cluster"


INTERNAL = {"scope", "published", "choices", "organization"}
"""TrainingCluster's attributes that are how it builds, not parts a stack exposes."""


def test_both_stacks_expose_every_part_of_their_training_cluster() -> None:
    """The deployable and the published stack forward the same parts (once, in their base class): a part added to
    TrainingCluster, or one a stack forgets (the published stack once had no ``data_buckets``), fails here."""
    from hyperpod_cdk import TrainingClusterStack

    config = ClusterConfig.model_validate(
        {"storage": {"data_repositories": [{"name": "datasets", "file_system_path": "/datasets"}]}}
    )
    stacks = [
        TrainingClusterStack(fast_app(), "deployed", config=config),
        PublishedTrainingClusterStack(fast_app(), "published", config=config, target=TARGET),
    ]
    for stack in stacks:
        parts = {k: v for k, v in vars(stack.parts).items() if not k.startswith("_") and k not in INTERNAL}
        assert parts.get("data_buckets"), "the example has a data repository"
        missing = [name for name, part in parts.items() if getattr(stack, name, None) is not part]
        assert missing == [], f"{type(stack).__name__} does not expose {missing}"
