"""HyperPodCluster: both Slurm modes, the execution role, creation order, group options, validation."""

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from builders import CONTROLLER, WORKERS, cluster_stack, only
from hyperpod_cdk import (
    ClusterNetwork,
    ConfigurationError,
    DeepHealthCheck,
    HyperPodCluster,
    InstanceGroup,
    LifecycleScripts,
    NodeRole,
    SlurmMode,
)

LOGIN = InstanceGroup(name="login", role=NodeRole.LOGIN, instance_type="ml.m5.large", count=1)
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-weeks"
GPU = InstanceGroup(
    name="gpu",
    instance_type="ml.p5.48xlarge",
    count=4,
    partition="train",
    threads_per_core=2,
    ebs_volume_gib=500,
    deep_health_checks=(DeepHealthCheck.INSTANCE_STRESS, DeepHealthCheck.INSTANCE_CONNECTIVITY),
    training_plan_arn=PLAN,
)


@pytest.fixture(scope="module")
def api_driven() -> Template:
    stack, _ = cluster_stack(groups=(CONTROLLER, LOGIN, GPU), tags={"team": "fm"})
    return Template.from_stack(stack)


def groups_of(template: Template) -> dict[str, dict]:
    _, cluster = only(template, "AWS::SageMaker::Cluster")
    return {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}


def test_api_driven_groups_carry_slurm_config_and_fsx(api_driven: Template) -> None:
    groups = groups_of(api_driven)
    assert groups["controller"]["SlurmConfig"] == {"NodeType": "Controller"}
    assert groups["login"]["SlurmConfig"] == {"NodeType": "Login"}
    assert groups["gpu"]["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["train"]}
    for group in groups.values():
        assert group["LifeCycleConfig"]["OnInitComplete"] == "on_init_complete.sh"
        assert "OnCreate" not in group["LifeCycleConfig"]
        fsx_configs = [c["FsxLustreConfig"] for c in group["InstanceStorageConfigs"] if "FsxLustreConfig" in c]
        assert fsx_configs and fsx_configs[0]["MountPath"] == "/fsx"
    api_driven.has_resource_properties(
        "AWS::SageMaker::Cluster",
        {
            "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Merge"}},
            "NodeRecovery": "Automatic",
            "ClusterName": "test-cluster",
        },
    )


def test_group_options_are_rendered(api_driven: Template) -> None:
    gpu = groups_of(api_driven)["gpu"]
    assert gpu["ThreadsPerCore"] == 2
    assert gpu["InstanceCount"] == 4
    assert gpu["TrainingPlanArn"] == PLAN
    assert gpu["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert {"EbsVolumeConfig": {"VolumeSizeInGB": 500}} in gpu["InstanceStorageConfigs"]


def test_vpc_config_uses_the_node_subnet_and_group(api_driven: Template) -> None:
    _, cluster = only(api_driven, "AWS::SageMaker::Cluster")
    vpc_config = cluster["Properties"]["VpcConfig"]
    (subnet,) = vpc_config["Subnets"]
    assert "NodesSubnet" in subnet["Ref"]
    assert "NetworkNodeSecurityGroup" in str(vpc_config["SecurityGroupIds"])


def test_execution_role_trust_managed_policy_and_scoped_eni_permissions(api_driven: Template) -> None:
    api_driven.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"})
                ]
            },
            "ManagedPolicyArns": [
                {
                    "Fn::Join": [
                        "",
                        Match.array_with([":iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"]),
                    ]
                }
            ],
        },
    )
    policy = json.dumps(api_driven.find_resources("AWS::IAM::Policy"))
    assert '"Sid": "CreateNodeInterfaces"' in policy
    create = next(
        s
        for p in api_driven.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "CreateNodeInterfaces"
    )
    rendered = json.dumps(create["Resource"])
    assert ":subnet/" in rendered and ":security-group/" in rendered


def test_cluster_waits_for_upload_role_policy_and_storage(api_driven: Template) -> None:
    _, cluster = only(api_driven, "AWS::SageMaker::Cluster")
    depends = cluster["DependsOn"]
    (upload_id,) = api_driven.find_resources("Custom::CDKBucketDeployment")
    (fs_id,) = api_driven.find_resources("AWS::FSx::FileSystem")
    policy_ids = [k for k in api_driven.find_resources("AWS::IAM::Policy") if "ExecutionRole" in k]
    assert upload_id in depends and len(policy_ids) >= 2 and set(policy_ids) <= set(depends)  # every group's role
    rules = api_driven.find_resources("AWS::EC2::SecurityGroupIngress")
    storage_rules = [k for k, r in rules.items() if r["Properties"]["GroupId"]["Fn::GetAtt"][0].startswith("Storage")]
    assert storage_rules and set(storage_rules) <= set(depends)
    # What a GetAtt already orders is not repeated (cfn-lint W3005): the role and the file system.
    role_ids = [k for k in api_driven.find_resources("AWS::IAM::Role") if k.startswith("ClusterExecutionRole")]
    properties = json.dumps(cluster["Properties"])
    assert role_ids and all(f'"{role_id}"' in properties for role_id in role_ids) and f'"{fs_id}"' in properties
    assert not set(role_ids) & set(depends) and fs_id not in depends


def test_lifecycle_driven_the_cluster_waits_for_the_file_system_no_storage_config_names() -> None:
    stack, _ = cluster_stack(groups=(CONTROLLER, LOGIN, GPU), mode=SlurmMode.LIFECYCLE_DRIVEN)
    template = Template.from_stack(stack)
    _, cluster = only(template, "AWS::SageMaker::Cluster")
    (fs_id,) = template.find_resources("AWS::FSx::FileSystem")
    assert f'"{fs_id}"' not in json.dumps(cluster["Properties"]) and fs_id in cluster["DependsOn"]


def test_tags_reach_cluster_and_role(api_driven: Template) -> None:
    api_driven.has_resource_properties("AWS::SageMaker::Cluster", {"Tags": [{"Key": "team", "Value": "fm"}]})
    api_driven.has_resource_properties(
        "AWS::IAM::Role", {"Tags": [{"Key": "team", "Value": "fm"}], "Description": Match.any_value()}
    )


def test_lifecycle_driven_mode_uses_on_create_and_no_slurm_config() -> None:
    stack, cluster = cluster_stack(mode=SlurmMode.LIFECYCLE_DRIVEN)
    template = Template.from_stack(stack)
    for group in groups_of(template).values():
        assert group["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
        assert "SlurmConfig" not in group
        assert "InstanceStorageConfigs" not in group  # the runtime mounts FSx itself
    _, resource = only(template, "AWS::SageMaker::Cluster")
    assert "Orchestrator" not in resource["Properties"]
    assert cluster.mode == SlurmMode.LIFECYCLE_DRIVEN


def test_parameters_file_content(tmp_path: Path) -> None:
    app = cdk.App(builtin_cloud_formation_validation=False, outdir=str(tmp_path))
    stack = cdk.Stack(app, "Test")
    network = ClusterNetwork(stack, "Network")
    lifecycle = LifecycleScripts(stack, "Scripts")
    HyperPodCluster(
        stack,
        "Cluster",
        cluster_name="c1",
        network=network,
        lifecycle=lifecycle,
        instance_groups=[CONTROLLER, LOGIN, WORKERS],
        mode=SlurmMode.LIFECYCLE_DRIVEN,
    )
    app.synth()
    (path,) = tmp_path.glob("asset.*/provisioning_parameters.json")
    document = json.loads(path.read_text())
    assert document["controller_group"] == "controller"
    assert document["login_group"] == "login"
    assert document["worker_groups"] == [{"instance_group_name": "workers", "partition_name": "workers"}]
    assert document["hyperpod_cdk"]["mode"] == "lifecycle-driven"
    assert "fsx_dns_name" not in document


def test_runtime_options_and_smt_reach_the_parameters_file(tmp_path: Path) -> None:
    options = {
        "slurm": {"slurmd_timeout": 600, "requeue": False},
        "accounting": {"enabled": True},
        "health": {"dcgm_level": 0},
        "pytorch": {"version": "2.9.0", "packages": ["numpy==2.1.0"]},
    }
    app = cdk.App(builtin_cloud_formation_validation=False, outdir=str(tmp_path))
    stack = cdk.Stack(app, "Test")
    smt = InstanceGroup(name="smt", instance_type="ml.c5.4xlarge", count=2, threads_per_core=2)
    HyperPodCluster(
        stack,
        "Cluster",
        cluster_name="c1",
        network=ClusterNetwork(stack, "Network"),
        lifecycle=LifecycleScripts(stack, "Scripts"),
        instance_groups=[CONTROLLER, smt],
        runtime_options=options,
    )
    app.synth()
    (path,) = tmp_path.glob("asset.*/hyperpod_cdk_parameters.json")
    document = json.loads(path.read_text())
    assert document["hyperpod_cdk"]["options"] == options
    groups = {g["name"]: g for g in document["hyperpod_cdk"]["groups"]}
    assert groups["smt"]["threads_per_core"] == 2 and groups[CONTROLLER.name]["threads_per_core"] == 1


def test_ssm_target_prefix_derives_from_the_arn() -> None:
    stack, cluster = cluster_stack(storage=False)
    arn = {"Fn::GetAtt": [stack.resolve(stack.get_logical_id(cluster.resource)), "ClusterArn"]}
    assert stack.resolve(cluster.ssm_target_prefix) == {
        "Fn::Join": ["", ["sagemaker-cluster:", {"Fn::Select": [1, {"Fn::Split": ["cluster/", arn]}]}, "_"]]
    }


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigurationError) as error:
        cluster_stack(
            storage=False,
            groups=(
                CONTROLLER,
                InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.large", count=1),
                InstanceGroup(
                    name="bad_name", instance_type="p5.48xlarge", count=-1, threads_per_core=3, partition="-x"
                ),
                InstanceGroup(name="login", role=NodeRole.LOGIN, instance_type="ml.m5.large", count=1, partition="p"),
            ),
            fsx_mount_path="fsx/",
        )
    text = str(error.value)
    for expected in (
        "instance_groups[1].name: 'controller' is already used by instance_groups[0]",
        "instance_groups[2].name: got 'bad_name'",
        "instance_groups[2].partition: got '-x'",
        "instance_groups[3].partition: got 'p'; only compute groups belong to a partition",
        "instance_groups: found 2 controller groups",
        "instance_groups[2].instance_type: got 'p5.48xlarge'",
        "instance_groups[2].count: got -1",
        "instance_groups[2].threads_per_core: got 3",
        "fsx_mount_path: got 'fsx/'",
    ):
        assert expected in text, expected


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ((WORKERS,), "found 0 controller groups"),
        ((CONTROLLER,), "no compute group"),
        ((), "got 0 groups"),
    ],
)
def test_required_groups(groups: tuple[InstanceGroup, ...], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        cluster_stack(storage=False, groups=groups)


def test_cluster_name_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="cluster_name: got 'my_cluster'"):
        cluster_stack(storage=False, cluster_name="my_cluster")


def test_deep_health_checks_are_unique() -> None:
    twice = InstanceGroup(
        name="w",
        instance_type="ml.p5.48xlarge",
        count=1,
        deep_health_checks=(DeepHealthCheck.INSTANCE_STRESS, DeepHealthCheck.INSTANCE_STRESS),
    )
    with pytest.raises(ConfigurationError, match="list each check once"):
        cluster_stack(storage=False, groups=(CONTROLLER, twice))


def test_external_accounting_secret_is_readable_by_the_nodes_and_nothing_else() -> None:
    arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:slurmdb-AbCdEf"
    external = {"enabled": True, "database": "external", "host": "db.internal", "password_secret_arn": arn}
    options = {"accounting": {**external, "ca_bundle_sha256": "0" * 64}}
    stack, _ = cluster_stack(runtime_options=options)
    template = Template.from_stack(stack)
    statements = [
        s
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    reads = [s for s in statements if "secretsmanager:GetSecretValue" in s["Action"]]
    assert len(reads) == 1 and reads[0]["Resource"] == arn


def test_runtime_options_are_checked_at_synth() -> None:
    with pytest.raises(ConfigurationError, match=r"runtime_options\.slurm\.cred_expire: got 5"):
        cluster_stack(runtime_options={"slurm": {"cred_expire": 5}})
