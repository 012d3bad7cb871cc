"""Organization rules reach every resource of their kind in every example, and refuse what they cannot do.

Each example is synthesized once with every rule on (one synth, read by the per-example tests and by checkov): a
YAML example through its config's ``organization`` section (the bundled app's path), a Python example with
:class:`OrganizationRules` applied to its app.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_servicecatalog as servicecatalog
from aws_cdk import cx_api
from aws_cdk.assertions import Annotations, Match

from builders import cluster_stack, new_stack
from cfn_parameters import rejections
from hyperpod_cdk import ClusterNetwork, LustreStorage, OrganizationRules, TrainingClusterStack, load_config
from hyperpod_cdk.constructs import secure_bucket
from hyperpod_cdk.core.config import ClusterConfig, OrganizationConfig
from hyperpod_cdk.organization.names import NAMED_TYPES
from hyperpod_cdk.rules.network import zone_region
from support import (
    EXAMPLES,
    STRICT_VALIDATION,
    assert_nag_clean,
    build_example,
    fast_app,
    template_of,
)

BOUNDARY = "arn:aws:iam::111122223333:policy/TeamBoundary"
KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
PREFIX = "team-a-"
LOG_BUCKET = "org-access-logs"
LOG_PREFIX = "s3/"
TAGS = {"CostCenter": "1234", "DataClass": "internal"}
ORGANIZATION = OrganizationConfig(
    permission_boundary_arn=BOUNDARY,
    required_tags=TAGS,
    name_prefix=PREFIX,
    kms_key_arn=KEY,
    access_logs_bucket=LOG_BUCKET,
    access_logs_prefix=LOG_PREFIX,
)


class Synthesized:
    """One example with every rule on: its templates and the logical IDs of its taggable resources."""

    def __init__(self, path: Path) -> None:
        app = fast_app()
        stacks = _build(path, app)
        self.cluster_names = {PREFIX + load_config(path).cluster_name} if path.suffix == ".yaml" else set()
        self.key = key_of(path)
        # One synth: what Template.from_stack and Annotations.from_stack read, each after a synth of its own.
        assembly = app.synth()
        artifacts = {s.stack_name: assembly.get_stack_artifact(s.artifact_id) for s in stacks}
        self.stack_templates = {name: a.template for name, a in artifacts.items()}
        self.templates = dict(self.stack_templates)
        self.errors = [
            m for a in artifacts.values() for m in a.messages if m.level == cx_api.SynthesisMessageLevel.ERROR
        ]
        # A Service Catalog product's resources are in its ProductStack, whose template is a file asset.
        products = [n for s in stacks for n in s.node.find_all() if isinstance(n, servicecatalog.ProductStack)]
        for product in products:
            self.templates[product.stack_name] = json.loads(
                (Path(assembly.directory) / f"{product.artifact_id}.product.template.json").read_text()
            )
        self.taggable = {
            s.stack_name: {
                s.get_logical_id(n)  # type: ignore[arg-type]
                for n in s.node.find_all()
                if cdk.CfnResource.is_cfn_resource(n)
                and cdk.TagManager.is_taggable(n)
                and cdk.Stack.of(n).node.path == s.node.path
            }
            for s in [*stacks, *products]
        }

    def resources(self, resource_type: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (logical_id, resource.get("Properties", {}))
            for template in self.templates.values()
            for logical_id, resource in template["Resources"].items()
            if resource["Type"] == resource_type
        ]


@pytest.fixture(scope="module")
def synthesized_examples() -> dict[Path, Synthesized]:
    """Each example's :class:`Synthesized`, built when a test first asks for it (per example, or all for checkov)."""
    return {}


def _synthesized(examples: dict[Path, Synthesized], path: Path) -> Synthesized:
    if path not in examples:
        examples[path] = Synthesized(path)
    return examples[path]


@pytest.fixture(scope="module", params=EXAMPLES, ids=[e.name for e in EXAMPLES])
def synthesized(request: pytest.FixtureRequest, synthesized_examples: dict[Path, Synthesized]) -> Synthesized:
    return _synthesized(synthesized_examples, request.param)


def test_no_rule_reports_a_problem(synthesized: Synthesized) -> None:
    assert [e.entry.data for e in synthesized.errors] == []


def test_every_role_has_the_boundary(synthesized: Synthesized) -> None:
    for logical_id, properties in synthesized.resources("AWS::IAM::Role"):
        assert properties.get("PermissionsBoundary") == BOUNDARY, logical_id


def test_every_bucket_is_sse_kms_with_the_key_and_logs_its_access(synthesized: Synthesized) -> None:
    for logical_id, properties in synthesized.resources("AWS::S3::Bucket"):
        (rule,) = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule == {
            "BucketKeyEnabled": True,
            "ServerSideEncryptionByDefault": {"KMSMasterKeyID": synthesized.key, "SSEAlgorithm": "aws:kms"},
        }, logical_id
        assert properties["LoggingConfiguration"] == {
            "DestinationBucketName": LOG_BUCKET,
            "LogFilePrefix": LOG_PREFIX,
        }, logical_id


def test_no_resource_keeps_a_scanner_reason_the_rules_made_stale(synthesized: Synthesized) -> None:
    """The template explains missing access logs and log-group keys to checkov; with the rules on they are there."""
    for template in synthesized.templates.values():
        for logical_id, resource in template["Resources"].items():
            skipped = {s["id"] for s in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])}
            assert not skipped & {"CKV_AWS_18", "CKV_AWS_158"}, logical_id


def _refers_to(value: Any, logical_ids: set[str]) -> bool:
    text = json.dumps(value)
    return any(f'["{i}", "Arn"]' in text or f'{{"Ref": "{i}"}}' in text for i in logical_ids)


def test_every_policy_that_reaches_an_encrypted_bucket_can_use_the_key(synthesized: Synthesized) -> None:
    buckets = {logical_id for logical_id, _ in synthesized.resources("AWS::S3::Bucket")}
    for logical_id, properties in synthesized.resources("AWS::IAM::Policy"):
        statements = properties["PolicyDocument"]["Statement"]
        on_buckets = [
            s
            for s in statements
            if any(a.startswith("s3:") for a in _list(s["Action"])) and _refers_to(s["Resource"], buckets)
        ]
        if not on_buckets:
            continue
        key_actions = {a for s in statements if synthesized.key in _list(s["Resource"]) for a in _list(s["Action"])}
        assert "kms:Decrypt" in key_actions, logical_id
        writes = any(a.startswith(("s3:Put", "s3:DeleteObject")) for s in on_buckets for a in _list(s["Action"]))
        if writes:
            assert "kms:GenerateDataKey*" in key_actions, logical_id


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_every_log_group_and_file_system_uses_the_key(synthesized: Synthesized) -> None:
    for resource_type in ("AWS::Logs::LogGroup", "AWS::FSx::FileSystem"):
        for logical_id, properties in synthesized.resources(resource_type):
            assert properties.get("KmsKeyId") == synthesized.key, logical_id


def test_every_node_volume_of_a_continuous_cluster_uses_the_key_and_its_role_may_grant_it(
    synthesized: Synthesized,
) -> None:
    """HyperPod takes a customer managed key for node volumes only with continuous provisioning: there every
    volume has the key and each execution role may create the volumes' grants; elsewhere no volume names it."""
    may_grant = {
        _list(p["Roles"])[0]["Ref"]
        for _, p in synthesized.resources("AWS::IAM::Policy")
        for s in p["PolicyDocument"]["Statement"]
        if synthesized.key in _list(s["Resource"]) and "kms:CreateGrant" in _list(s["Action"])
    }
    for logical_id, properties in synthesized.resources("AWS::SageMaker::Cluster"):
        continuous = properties.get("NodeProvisioningMode") == "Continuous"
        for group in properties["InstanceGroups"]:
            where = (logical_id, group["InstanceGroupName"])
            volumes = [c["EbsVolumeConfig"] for c in group.get("InstanceStorageConfigs", []) if "EbsVolumeConfig" in c]
            if continuous:
                assert any(v.get("RootVolume") for v in volumes), where
                assert all(v["VolumeKmsKeyId"] == synthesized.key for v in volumes), where
                role = group["ExecutionRole"]
                assert "Fn::GetAtt" not in role or role["Fn::GetAtt"][0] in may_grant, where
            else:
                assert all("VolumeKmsKeyId" not in v for v in volumes), where


def test_a_cluster_without_continuous_provisioning_keeps_aws_key_on_its_volumes_with_a_warning() -> None:
    from hyperpod_cdk import HyperPodCluster, InstanceGroup, LifecycleScripts, NodeRole

    stack = new_stack()
    OrganizationRules(kms_key=KEY).apply(stack)
    HyperPodCluster(
        stack,
        "Cluster",
        cluster_name="c",
        network=ClusterNetwork(stack, "Network"),
        lifecycle=LifecycleScripts(stack, "Scripts"),
        instance_groups=[
            InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1),
            InstanceGroup(name="workers", instance_type="ml.c5.4xlarge", count=2, ebs_volume_gib=100),
        ],
    )
    template = template_of(stack)
    [cluster] = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert "VolumeKmsKeyId" not in json.dumps(cluster)
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(".*continuous node.*"))
    assert warnings, "the organization's key silently skipped the node volumes"


def test_some_example_is_a_continuous_cluster() -> None:
    """The volume test above checks keys and grants on at least one cluster."""
    assert any(e.suffix == ".yaml" and load_config(e).node_provisioning_mode for e in EXAMPLES)


def test_every_taggable_resource_has_the_required_tags(synthesized: Synthesized) -> None:
    assert any(synthesized.taggable.values())
    for name, template in synthesized.templates.items():
        for logical_id in synthesized.taggable[name]:
            tags = template["Resources"][logical_id]["Properties"]["Tags"]
            values = tags if isinstance(tags, dict) else {t["Key"]: t["Value"] for t in tags}
            assert {k: values.get(k) for k in TAGS} == TAGS, logical_id


def test_every_physical_name_has_the_prefix(synthesized: Synthesized) -> None:
    for resource_type, kind in NAMED_TYPES.items():
        prop = "".join(p.capitalize() for p in kind.attribute.split("_"))
        for logical_id, properties in synthesized.resources(resource_type):
            name = properties.get(prop)
            if isinstance(name, str) and not name.startswith("/aws/"):
                assert name.startswith(PREFIX), (logical_id, name)
    clusters = set()
    for template in synthesized.templates.values():
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::SageMaker::Cluster":
                clusters.add(_launch_value(template, resource["Properties"]["ClusterName"]))
    assert synthesized.cluster_names <= clusters  # prefixed once, not twice
    assert all(name.startswith(PREFIX) for name in clusters)


def _launch_value(template: dict[str, Any], value: Any) -> Any:
    """A value, or for a launch choice (a parameter) its default, once its constraints require the prefix."""
    if not isinstance(value, dict):
        return value
    parameter = template["Parameters"][value["Ref"]]
    assert rejections(parameter, "unprefixed-name") != [], value
    return parameter["Default"]


def test_the_stack_outputs_the_prefixed_cluster_name(synthesized: Synthesized) -> None:
    if not synthesized.cluster_names:
        # A Python example builds its clusters from its own config (no organization section); the rules reach
        # them through the app, so HyperPod's name is prefixed but TrainingCluster's outputs are not.
        pytest.skip("only a config's organization section gives TrainingCluster the prefixed name up front")
    for template in synthesized.templates.values():
        output = template.get("Outputs", {}).get("ClusterName")
        if output is not None:
            assert {_launch_value(template, output["Value"])} == synthesized.cluster_names


def key_of(path: Path) -> str:
    """The organization's key for an example: in the example's Region (PRINCIPLE-REGION), us-west-2 where the
    example names none (a network.availability_zone names it)."""
    network = load_config(path).network if path.suffix == ".yaml" else None
    region = zone_region(network.availability_zone) if network and network.availability_zone else None
    return KEY.replace(":us-west-2:", f":{region}:") if region else KEY


def _build(path: Path, app: cdk.App) -> list[cdk.Stack]:
    """One example with every rule on: a YAML example through its config, a Python one through its app."""
    if path.suffix == ".yaml":
        config = load_config(path)
        # the organization's key encrypts every node volume (ORG-VOLUME-KEY): a team under it drops its own keys
        groups = [dataclasses.replace(g, volume_kms_key_arn=None) for g in config.instance_groups]
        organization = ORGANIZATION.model_copy(update={"kms_key_arn": key_of(path)})
        config = config.model_copy(update={"organization": organization, "instance_groups": groups})
        return [TrainingClusterStack(app, "org", config=config)]
    OrganizationRules.from_config(ORGANIZATION).apply(app)
    return build_example(path, app)


@pytest.mark.compliance
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_nag_and_strict_validator_find_nothing_with_the_rules_on(example: Path, tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    _build(example, app)
    assert_nag_clean(app, tmp_path)


@pytest.mark.slow  # handed out first (tests/conftest.py)
@pytest.mark.compliance
def test_checkov_finds_nothing_unexplained_with_the_rules_on(
    tmp_path: Path, synthesized_examples: dict[Path, Synthesized]
) -> None:
    from test_scanners import checkov

    out = tmp_path / "templates"
    out.mkdir()
    for example in EXAMPLES:
        for name, template in _synthesized(synthesized_examples, example).stack_templates.items():
            (out / f"{example.stem}-{name}.json").write_text(json.dumps(template))
    results = checkov(out).get("results", {})
    assert [f"{f['check_id']} {f['resource']} ({f['file_path']})" for f in results.get("failed_checks", [])] == []
    # The rules fixed what the templates otherwise explain: missing access logs and log-group keys.
    assert not {s["check_id"] for s in results.get("skipped_checks", [])} & {"CKV_AWS_18", "CKV_AWS_158"}


# --- what the rules refuse, and the cases the examples do not show


def _errors(stack: cdk.Stack) -> list[tuple[str, str]]:
    found = Annotations.from_stack(stack).find_error("*", Match.any_value())
    return [(e.id, str(e.entry.data)) for e in found]


def test_a_cdk_internal_role_written_as_a_plain_cfn_resource_gets_the_boundary() -> None:
    stack = new_stack()
    OrganizationRules(permission_boundary_arn=BOUNDARY).apply(stack)
    ClusterNetwork(stack, "Network")  # a new VPC: CDK restricts its default security group by a custom resource
    plain = [
        n
        for n in stack.node.find_all()
        if isinstance(n, cdk.CfnResource)
        and n.cfn_resource_type == "AWS::IAM::Role"
        and not isinstance(n, cdk.aws_iam.CfnRole)
    ]
    assert plain, "the example no longer has a CDK-internal role written as a plain CfnResource"
    template = cdk.assertions.Template.from_stack(stack).to_json()
    for node in plain:
        assert template["Resources"][stack.get_logical_id(node)]["Properties"]["PermissionsBoundary"] == BOUNDARY


def test_a_scratch_file_system_cannot_take_the_key() -> None:
    stack = new_stack()
    OrganizationRules(kms_key=KEY).apply(stack)
    network = ClusterNetwork(stack, "Network")
    LustreStorage(stack, "Scratch", network=network, deployment_type=fsx.LustreDeploymentType.SCRATCH_2)
    template = cdk.assertions.Template.from_stack(stack).to_json()
    (file_system,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::FSx::FileSystem"]
    assert "KmsKeyId" not in file_system["Properties"]
    ((path, message),) = _errors(stack)
    assert path.startswith("/Test/Scratch/") and "SCRATCH_2 cannot be encrypted" in message, message


def test_a_prefixed_name_over_the_limit_is_an_error_not_a_cut() -> None:
    name = "c" * 60
    stack, cluster = cluster_stack(cluster_name=name, storage=False)
    OrganizationRules(name_prefix=PREFIX).apply(stack)
    template = cdk.assertions.Template.from_stack(stack).to_json()
    assert template["Resources"][stack.get_logical_id(cluster.resource)]["Properties"]["ClusterName"] == name
    ((path, message),) = _errors(stack)
    assert path == "/Test/Cluster/Resource"
    assert f"'{PREFIX}{name}'" in message and "allows 63" in message and "Fix: shorten" in message


def test_every_named_kind_gets_the_prefix_and_service_log_groups_keep_their_names() -> None:
    stack = new_stack()
    OrganizationRules(name_prefix=PREFIX).apply(stack)
    role = cdk.aws_iam.Role(stack, "Role", role_name="trainer", assumed_by=cdk.aws_iam.AccountRootPrincipal())
    group = cdk.aws_logs.LogGroup(stack, "Logs", log_group_name="training/jobs")
    service = cdk.aws_logs.LogGroup(stack, "Service", log_group_name="/aws/lambda/handler")
    bucket = s3.Bucket(stack, "Bucket", bucket_name="datasets")
    already = s3.Bucket(stack, "Already", bucket_name=f"{PREFIX}results")
    resources = cdk.assertions.Template.from_stack(stack).to_json()["Resources"]

    def name(construct: Any, prop: str) -> Any:
        return resources[stack.get_logical_id(construct.node.default_child)]["Properties"][prop]

    assert name(role, "RoleName") == f"{PREFIX}trainer"
    assert name(group, "LogGroupName") == f"{PREFIX}training/jobs"
    assert name(service, "LogGroupName") == "/aws/lambda/handler"
    assert name(bucket, "BucketName") == f"{PREFIX}datasets"
    assert name(already, "BucketName") == f"{PREFIX}results"
    assert _errors(stack) == []


def test_a_prefixed_bucket_name_is_checked_by_s3s_rules() -> None:
    stack = new_stack()
    OrganizationRules(name_prefix=PREFIX).apply(stack)
    s3.Bucket(stack, "Bucket", bucket_name="d" * 60)
    ((path, message),) = _errors(stack)
    assert path == "/Test/Bucket/Resource" and "3-63 lower-case" in message


def test_a_name_that_is_a_token_is_left_alone() -> None:
    stack, cluster = cluster_stack(cluster_name="tokens-skipped", storage=False)
    cluster.resource.cluster_name = cdk.Fn.ref("AWS::StackName")
    OrganizationRules(name_prefix=PREFIX).apply(stack)
    template = cdk.assertions.Template.from_stack(stack).to_json()
    assert template["Resources"][stack.get_logical_id(cluster.resource)]["Properties"]["ClusterName"] == {
        "Ref": "AWS::StackName"
    }


def test_a_required_tag_without_a_value_is_an_error_on_each_resource() -> None:
    def errors(owner: str | None) -> list[tuple[str, str]]:
        stack = new_stack()
        OrganizationRules(required_tags={"Owner": None, "CostCenter": "1"}).apply(stack)
        secure_bucket(stack, "Data")
        if owner is not None:
            cdk.Tags.of(stack).add("Owner", owner)
        return _errors(stack)

    ((path, message),) = errors(owner=None)
    assert path == "/Test/Data/Resource" and "'Owner'" in message and "'CostCenter'" not in message
    assert errors(owner="alice") == []


def test_a_bucket_created_before_the_rules_is_an_error() -> None:
    stack = new_stack()
    secure_bucket(stack, "Early")
    OrganizationRules(kms_key=KEY).apply(stack)
    secure_bucket(stack, "Late")
    errors = _errors(stack)
    assert [p for p, _ in errors] == ["/Test/Early/Resource"]
    assert "before OrganizationRules.apply()" in errors[0][1]


def test_the_log_bucket_logs_nothing_to_itself_and_keeps_its_own_encryption() -> None:
    stack = new_stack()
    logs_bucket = s3.Bucket(stack, "AccessLogs", encryption=s3.BucketEncryption.S3_MANAGED)
    OrganizationRules(kms_key=KEY, access_logs_bucket=logs_bucket).apply(stack)
    secure_bucket(stack, "Data")
    template = cdk.assertions.Template.from_stack(stack).to_json()["Resources"]
    log_id, data_id = (
        stack.get_logical_id(logs_bucket.node.default_child),
        stack.get_logical_id(stack.node.find_child("Data").node.default_child),
    )
    assert "LoggingConfiguration" not in template[log_id]["Properties"]
    assert template[data_id]["Properties"]["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": log_id}
    assert _errors(stack) == []


def test_a_log_bucket_made_after_the_rules_would_get_the_key_and_is_an_error() -> None:
    stack = new_stack()
    rules = OrganizationRules(kms_key=KEY, access_logs_bucket=LOG_BUCKET)
    rules.apply(stack)
    s3.Bucket(stack, "AccessLogs", bucket_name=LOG_BUCKET, encryption=s3.BucketEncryption.S3_MANAGED)
    ((path, message),) = _errors(stack)
    assert path == "/Test/AccessLogs/Resource" and "must use SSE-S3" in message


def test_a_key_of_the_stack_lets_cloudwatch_logs_use_it() -> None:
    stack = cdk.Stack(fast_app(), "Test", env=cdk.Environment(region="us-west-2", account="111122223333"))
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    OrganizationRules(kms_key=key).apply(stack)
    ClusterNetwork(stack, "Network")
    template = cdk.assertions.Template.from_stack(stack)
    statements = template.find_resources("AWS::KMS::Key")[stack.get_logical_id(key.node.default_child)]["Properties"][
        "KeyPolicy"
    ]["Statement"]
    (logs_statement,) = [s for s in statements if s.get("Sid") == "CloudWatchLogsUseKey"]
    assert logs_statement["Principal"] == {"Service": "logs.us-west-2.amazonaws.com"}
    (log_group,) = template.find_resources("AWS::Logs::LogGroup").values()
    assert log_group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}


def test_a_cluster_name_chosen_at_launch_must_start_with_the_prefix() -> None:
    config = ClusterConfig.model_validate(
        {"cluster_name": "ml", "parameters": {"cluster_name": True}, "organization": {"name_prefix": PREFIX}}
    )
    stack = TrainingClusterStack(fast_app(), "s", config=config)
    parameter = cdk.assertions.Template.from_stack(stack).to_json()["Parameters"]["HyperPodClusterName"]
    assert parameter["Default"] == f"{PREFIX}ml"
    assert rejections(parameter, f"{PREFIX}ml") == []
    assert rejections(parameter, f"{PREFIX}other-name") == []
    assert rejections(parameter, "other-name") != []
    assert rejections(parameter, f"{PREFIX}-bad-") != []  # the name's own pattern still holds


def test_a_config_without_the_section_applies_nothing() -> None:
    stack = TrainingClusterStack(fast_app(), "s", config=ClusterConfig())
    assert stack.node.try_find_child("OrganizationKmsKey") is None
    assert cdk.Aspects.of(stack).all == []


def _keyed_cluster(group_key: str) -> cdk.Stack:
    """A cluster under the organization's key whose compute group has its own volume key."""
    from hyperpod_cdk import HyperPodCluster, InstanceGroup, LifecycleScripts, NodeRole
    from hyperpod_cdk.model import NodeProvisioningMode

    stack = new_stack()
    OrganizationRules(kms_key=KEY).apply(stack)
    groups = [
        InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1),
        InstanceGroup(
            name="workers", instance_type="ml.c5.4xlarge", count=2, ebs_volume_gib=100, volume_kms_key_arn=group_key
        ),
    ]
    HyperPodCluster(
        stack,
        "Cluster",
        cluster_name="c",
        network=ClusterNetwork(stack, "Network"),
        lifecycle=LifecycleScripts(stack, "Scripts"),
        instance_groups=groups,
        node_provisioning_mode=NodeProvisioningMode.CONTINUOUS,
    )
    return stack


def test_a_group_key_other_than_the_organizations_is_an_error_not_overwritten() -> None:
    """The group's own volumes decide their key in one place; the organization's rules enforce theirs by an error."""
    other = KEY.replace("1234abcd", "9999abcd")
    stack = _keyed_cluster(other)
    clusters = cdk.assertions.Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster")
    (cluster,) = clusters.values()
    workers = cluster["Properties"]["InstanceGroups"][1]["InstanceStorageConfigs"]
    assert [c["EbsVolumeConfig"]["VolumeKmsKeyId"] for c in workers] == [other, other]
    ((path, message),) = _errors(stack)
    assert path == "/Test/Cluster/Resource" and "'workers' encrypts its volumes with" in message, message


def test_a_group_key_equal_to_the_organizations_adds_no_second_root_volume() -> None:
    stack = _keyed_cluster(KEY)
    (cluster,) = cdk.assertions.Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    controller, workers = (g["InstanceStorageConfigs"] for g in cluster["Properties"]["InstanceGroups"])
    assert workers == [
        {"EbsVolumeConfig": {"VolumeSizeInGB": 100, "VolumeKmsKeyId": KEY}},
        {"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": KEY}},
    ]
    assert controller == [{"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": KEY}}]
    assert _errors(stack) == []
