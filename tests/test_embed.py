"""Embedding on CDK's terms (issue #34): a user's app passes its own resources to ``HyperPodCluster``.

Three import paths, each a user's stack: new resources (``ClusterNetwork`` + ``LustreStorage``), CDK's own
constructs (a plain ``ec2.Vpc`` + ``fsx.LustreFileSystem``, ``vpc=``/``subnets=``) and unowned imports
(``Vpc.from_vpc_attributes`` + ``LustreStorage.from_lustre_attributes``); and ``examples/embed/app.py``. Each
synthesizes, lints clean with cfn-lint and passes cdk-nag, and its ``AWS::SageMaker::Cluster`` is the config
path's (``TrainingClusterStack``) for the same inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk.assertions import Template

from hyperpod_cdk import (
    ClusterConfig,
    ClusterNetwork,
    ConfigurationError,
    HyperPodCluster,
    InstanceGroup,
    LifecycleScripts,
    LustreStorage,
    NodeRole,
    OpenZfsStorage,
    TrainingClusterStack,
)
from support import ROOT, assert_nag_clean, build_example, cfn_lint, fast_app

NAME = "embedded"
GROUPS = [
    InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1),
    InstanceGroup(name="workers", instance_type="ml.g5.8xlarge", count=2),
]
VPC, SUBNET, AZ, NODES_SG = "vpc-0123456789abcdef0", "subnet-0123456789abcdef0", "us-west-2a", "sg-0123456789abcdef1"
FS, FS_SG, MOUNT = "fs-0123456789abcdef0", "sg-0123456789abcdef2", "abcdefgh"
DNS = f"{FS}.fsx.us-west-2.amazonaws.com"
EXAMPLE = ROOT / "examples" / "embed" / "app.py"
ENV = cdk.Environment(account="111122223333", region="us-west-2")
"""The imports' stack names its environment (the nag acknowledgements must render it); the others are
environment-agnostic, as a new VPC's stack usually is (with an environment its AZs would be hard-coded)."""


def _cluster(scope: cdk.Stack, **props: Any) -> HyperPodCluster:
    lifecycle = LifecycleScripts(scope, "Lifecycle")
    return HyperPodCluster(scope, "Cluster", cluster_name=NAME, lifecycle=lifecycle, instance_groups=GROUPS, **props)


def new_resources(app: cdk.App) -> cdk.Stack:
    stack = cdk.Stack(app, "new-resources")
    network = ClusterNetwork(stack, "Network")
    _cluster(stack, network=network, storage=LustreStorage(stack, "Storage", network=network))
    return stack


def cdk_interfaces(app: cdk.App) -> cdk.Stack:
    stack = cdk.Stack(app, "cdk-interfaces")
    vpc = ec2.Vpc(
        stack,
        "Vpc",
        max_azs=1,
        restrict_default_security_group=False,
        flow_logs={"All": ec2.FlowLogOptions()},
    )
    scratch = fsx.LustreFileSystem(
        stack,
        "Scratch",
        vpc=vpc,
        vpc_subnet=vpc.private_subnets[0],
        storage_capacity_gib=1200,
        lustre_configuration=fsx.LustreConfiguration(
            deployment_type=fsx.LustreDeploymentType.PERSISTENT_2, per_unit_storage_throughput=250
        ),
    )
    _cluster(
        stack, vpc=vpc, subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS), storage=scratch
    )
    return stack


def unowned_imports(app: cdk.App) -> cdk.Stack:
    stack = cdk.Stack(app, "unowned-imports", env=ENV)
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id=VPC, availability_zones=[AZ], private_subnet_ids=["subnet-0123456789abcdef9", SUBNET]
    )
    storage = LustreStorage.from_lustre_attributes(
        stack,
        "Scratch",
        file_system_id=FS,
        dns_name=DNS,
        mount_name=MOUNT,
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "ScratchGroup", FS_SG),
    )
    nodes = ec2.SecurityGroup.from_security_group_id(stack, "Nodes", NODES_SG)
    _cluster(stack, vpc=vpc, subnets=vpc.private_subnets[1], security_groups=[nodes], storage=storage)
    return stack


PATHS = {"new-resources": new_resources, "cdk-interfaces": cdk_interfaces, "unowned-imports": unowned_imports}
CONFIGS: dict[str, dict[str, Any]] = {
    "new-resources": {},
    "cdk-interfaces": {},
    "unowned-imports": {
        "network": {"vpc_id": VPC, "subnet_id": SUBNET, "availability_zone": AZ, "security_group_id": NODES_SG},
        "storage": {
            "existing": {"file_system_id": FS, "dns_name": DNS, "mount_name": MOUNT, "security_group_id": FS_SG}
        },
    },
}


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every path's stack, the example's and each path's config stack, from one synth."""
    app = fast_app(outdir=str(tmp_path_factory.mktemp("embed")))
    stacks = {name: build(app) for name, build in PATHS.items()}
    [stacks["example"]] = build_example(EXAMPLE, app)
    for name, fields in CONFIGS.items():
        config = ClusterConfig(cluster_name=NAME, instance_groups=GROUPS, **fields)
        env = ENV if name == "unowned-imports" else None
        stacks[f"config:{name}"] = TrainingClusterStack(app, f"config-{name}", config=config, env=env)
    assembly = app.synth()
    return {name: assembly.get_stack_by_name(s.stack_name).template for name, s in stacks.items()}


def _normalised(value: Any) -> Any:
    """A value with every Ref and GetAtt replaced by what it names the kind of (``<Ref>``, ``<GetAtt DNSName>``):
    logical IDs differ between a user's stack and the config's, what the cluster reads of them does not."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return "<Ref>"
        if set(value) == {"Fn::GetAtt"}:
            return f"<GetAtt {value['Fn::GetAtt'][1]}>"
        return {k: _normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    return value


def _cluster_properties(template: dict[str, Any]) -> dict[str, Any]:
    [cluster] = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    return _normalised(cluster["Properties"])


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_user_app_gets_the_config_paths_cluster(path: str, templates: dict[str, dict[str, Any]]) -> None:
    """ "Same" means: the cluster resource's properties are equal once each Ref and GetAtt is reduced to its kind
    (and, for GetAtt, the attribute: a DNS name stays a DNS name); every literal (name, groups, counts, mode,
    subnet and security-group IDs, mount names and paths, the lifecycle prefix) must match as it is."""
    assert _cluster_properties(templates[path]) == _cluster_properties(templates[f"config:{path}"])


UNKNOWN_TO_CFN_LINT = "listclusteroperations"
"""cfn-lint 1.58's list of IAM actions (W3037) predates ``sagemaker:ListClusterOperations``, which botocore's
SageMaker model has and ``status`` calls (``grant_describe`` and so ``grant_operate`` allow it): cfn-lint flags a
policy that grants it, and nothing else may be flagged."""


@pytest.mark.parametrize("name", [*sorted(PATHS), "example"])
def test_cfn_lint_finds_nothing(name: str, templates: dict[str, dict[str, Any]]) -> None:
    import botocore.session

    assert "ListClusterOperations" in botocore.session.get_session().get_service_model("sagemaker").operation_names
    found = [f for f in cfn_lint(templates[name]) if not (f.startswith("W3037 ") and f"'{UNKNOWN_TO_CFN_LINT}'" in f)]
    assert found == []


@pytest.mark.compliance
def test_every_path_and_the_example_pass_cdk_nag(tmp_path: Path) -> None:
    app = fast_app(outdir=str(tmp_path))
    for build in PATHS.values():
        build(app)
    build_example(EXAMPLE, app)
    assert_nag_clean(app, tmp_path)


def test_an_unowned_import_creates_nothing_and_adds_no_rule(templates: dict[str, dict[str, Any]]) -> None:
    """The imported file system and its security group are the owner's: no resource of theirs, no rule on the
    group (the config path, which promises the rules, adds them itself); the nodes' given group gets none either."""
    resources = templates["unowned-imports"]["Resources"]
    assert not [k for k in resources if k.startswith(("Scratch", "Vpc", "Nodes"))]
    groups = {r["Properties"].get("GroupId") for r in resources.values() if r["Type"].startswith("AWS::EC2::Security")}
    assert groups.isdisjoint({FS_SG, NODES_SG})
    config = templates["config:unowned-imports"]["Resources"].values()
    assert any(r["Properties"].get("GroupId") == FS_SG for r in config if r["Type"] == "AWS::EC2::SecurityGroupIngress")


def test_an_unowned_openzfs_import_creates_nothing() -> None:
    stack = cdk.Stack(fast_app(), "zfs", env=ENV)
    homes = OpenZfsStorage.from_open_zfs_attributes(
        stack,
        "Homes",
        file_system_id=FS,
        dns_name=DNS,
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "HomesGroup", FS_SG),
    )
    network = ClusterNetwork(stack, "Network")
    _cluster(stack, network=network, openzfs=homes)
    resources = Template.from_stack(stack).to_json()["Resources"]
    assert not [k for k in resources if k.startswith(("Homes", "HomesGroup"))]
    assert all(r["Properties"].get("GroupId") != FS_SG for r in resources.values())


def test_the_cdk_file_system_admits_the_nodes_on_its_port_range(templates: dict[str, dict[str, Any]]) -> None:
    """A file system of the user's own (aws-cdk's L2): the nodes' new EFA group may reach it on LNet's ports."""
    resources = templates["cdk-interfaces"]["Resources"]
    ingress = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress" and "ClusterNodeSecurityGroup" in json.dumps(r["Properties"])
    ]
    assert {(r["FromPort"], r["ToPort"]) for r in ingress if "Scratch" in json.dumps(r["GroupId"])} == {(988, 1023)}


def test_network_or_vpc_one_of_them() -> None:
    stack = cdk.Stack(fast_app(), "bad", env=ENV)
    network = ClusterNetwork(stack, "Network")
    with pytest.raises(ConfigurationError, match="vpc: given with network"):
        _cluster(stack, network=network, vpc=network.vpc)
    with pytest.raises(ConfigurationError, match="network: required"):
        _cluster(cdk.Stack(fast_app(), "none", env=ENV))


def test_the_vpc_path_runs_the_network_rules_and_skips_tokens() -> None:
    """With ``vpc=`` the cluster runs the network rules itself: an AZ outside the Region is an error; an imported
    subnet without its AZ (unknown at synth) is not judged."""
    stack = cdk.Stack(fast_app(), "az", env=ENV)
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id=VPC, availability_zones=["eu-west-1a"], private_subnet_ids=[SUBNET]
    )
    with pytest.raises(ConfigurationError, match=r"vpc\.availability_zone"):
        _cluster(stack, vpc=vpc)
    other = cdk.Stack(fast_app(), "token", env=ENV)
    subnet = ec2.Subnet.from_subnet_id(other, "Subnet", SUBNET)
    _cluster(other, vpc=ec2.Vpc.from_vpc_attributes(other, "Vpc", vpc_id=VPC, availability_zones=[AZ]), subnets=subnet)


def test_the_configs_existing_storage_keeps_its_associations_under_the_import() -> None:
    """storage.existing with data repositories: the associations link the adopted file system (its literal ID),
    keep their logical IDs under ``Storage``, and the cluster waits for them."""
    existing = {"file_system_id": FS, "dns_name": DNS, "mount_name": MOUNT, "security_group_id": FS_SG}
    repository = {"name": "datasets", "file_system_path": "/datasets", "bucket_name": "team-datasets"}
    config = ClusterConfig.model_validate(
        {**CONFIGS["unowned-imports"], "storage": {"existing": existing, "data_repositories": [repository]}}
    )
    resources = Template.from_stack(TrainingClusterStack(fast_app(), "dra", config=config, env=ENV)).to_json()
    associations = {
        k: r for k, r in resources["Resources"].items() if r["Type"] == "AWS::FSx::DataRepositoryAssociation"
    }
    assert [
        (k.startswith("StorageRepositoryDatasets"), r["Properties"]["FileSystemId"]) for k, r in associations.items()
    ] == [(True, FS)]
    [cluster] = [r for r in resources["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert set(associations) <= set(cluster["DependsOn"])


def test_the_examples_operators_may_operate_its_cluster(templates: dict[str, dict[str, Any]]) -> None:
    """``examples/embed/app.py`` grants its operators' role ``grant_operate``: their policy allows every SageMaker
    call that reboot, replace and delete make (operator_permissions), on that cluster's ARN."""
    from hyperpod_cdk.core.operator_permissions import Resource, calls

    template = templates["example"]
    [cluster] = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::SageMaker::Cluster"]
    [role] = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role" and "Operators" in k]
    allowed: set[str] = set()
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy" or {"Ref": role} not in resource["Properties"].get("Roles", []):
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if {"Fn::GetAtt": [cluster, "ClusterArn"]} in resources:
                allowed.update(a for a in actions if a.startswith("sagemaker:"))
    wanted = {c.action for c in calls("operate") if c.resource == Resource.CLUSTER}
    assert {"sagemaker:BatchRebootClusterNodes", "sagemaker:BatchDeleteClusterNodes"} <= wanted
    assert wanted <= allowed, f"missing on the cluster: {sorted(wanted - allowed)}"
