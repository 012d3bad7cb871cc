"""Compliance: every example passes cdk-nag (AwsSolutions) and CDK's built-in validator in strict mode.

This is the one place the built-in validator runs (~5 s per synth); unit tests keep it off.
"""

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import Validations
from cdk_nag import AwsSolutionsChecks

from support import EXAMPLES, STRICT_VALIDATION, assert_nag_clean, build_example, validation_report

pytestmark = pytest.mark.compliance


@pytest.mark.slow  # handed out first (tests/conftest.py)
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_nag_and_strict_validator_find_nothing(example: Path, tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    build_example(example, app)
    assert_nag_clean(app, tmp_path)


def test_nag_catches_an_unacknowledged_finding(tmp_path: Path) -> None:
    """The harness fails when something is wrong: an unencrypted, public-readable bucket is flagged."""
    from aws_cdk import aws_s3 as s3

    app = cdk.App(outdir=str(tmp_path), builtin_cloud_formation_validation=False)
    stack = cdk.Stack(app, "Bad")
    s3.Bucket(stack, "Plain")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert any("AwsSolutions-S10" in line for line in validation_report(tmp_path))


def test_strict_validator_catches_a_schema_error(tmp_path: Path) -> None:
    """The built-in validator runs in strict mode here: a schema violation fails synthesis."""
    from aws_cdk import aws_sagemaker as sagemaker

    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    stack = cdk.Stack(app, "Bad")
    sagemaker.CfnCluster(stack, "Cluster", cluster_name="-not-a-valid-name-", node_recovery="Automatic")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert any("3031" in line for line in validation_report(tmp_path))


def test_a_template_validator_finding_is_a_problem_by_config_field(tmp_path: Path) -> None:
    """CDK's built-in validator runs on every synth; app.py fails on any finding, named by config field."""
    from hyperpod_cdk import ClusterConfig, TrainingClusterStack
    from hyperpod_cdk.core.template_findings import findings_in

    app = cdk.App(outdir=str(tmp_path))
    stack = TrainingClusterStack(app, "s", config=ClusterConfig())
    # An escape hatch can put into the template what the rules would refuse in the config.
    stack.cluster.resource.add_property_override("InstanceGroups.0.InstanceCount", -3)
    assembly = app.synth()
    problems = findings_in(assembly.directory)
    assert [(p.path, p.rule) for p in problems] == [("instance_groups[0].count", "CFN-F3034")]
    assert "-3 is less than the minimum of 0" in problems[0]


def test_a_published_template_passes_nag_and_the_strict_validator(tmp_path: Path) -> None:
    """The published variant (its own lifecycle prefix, grants and VPC) is as clean as the deployable one; its
    lifecycle read grant is acknowledged once the prefix's hash is known, at synth."""
    from hyperpod_cdk import ClusterConfig, PublishedTrainingClusterStack, PublishTarget

    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    PublishedTrainingClusterStack(
        app, "published", config=ClusterConfig(), target=PublishTarget("platform-templates", "teams/ml/")
    )
    assert_nag_clean(app, tmp_path)


def test_homes_on_openzfs_beside_lustre_pass_cfn_lint_nag_and_the_strict_validator(tmp_path: Path) -> None:
    """A new FSx for OpenZFS at /home beside the default Lustre at /fsx, with the organization's key on both."""
    from hyperpod_cdk import TrainingClusterStack, parse_config
    from support import cfn_lint, template_of

    key = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    config = parse_config(
        {"storage_openzfs": {"deployment_type": "SINGLE_AZ_HA_2"}, "organization": {"kms_key_arn": key}}
    )
    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    stack = TrainingClusterStack(app, "homes", config=config)
    assert_nag_clean(app, tmp_path)
    template = template_of(stack)
    assert cfn_lint(template) == []
    kinds = [
        r["Properties"].get("FileSystemType")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::FSx::FileSystem"
    ]
    assert sorted(kinds) == ["LUSTRE", "OPENZFS"]


@pytest.mark.parametrize(
    "observability",
    [
        {"grafana": True, "alarms": {"emails": ["ops@example.com"]}},
        {"workspace_arn": "arn:aws:aps:us-west-2:111122223333:workspace/ws-1234", "grafana": True},
    ],
    ids=["new-workspace-grafana", "existing-workspace-grafana"],
)
def test_observability_with_grafana_passes_nag_and_the_strict_validator(
    observability: dict[str, object], tmp_path: Path
) -> None:
    """The examples leave Grafana off (it needs IAM Identity Center); its role and workspace are as clean."""
    from hyperpod_cdk import ClusterConfig, TrainingClusterStack

    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    config = ClusterConfig.model_validate({"observability": observability, "storage": None})
    TrainingClusterStack(app, "observed", config=config)
    assert_nag_clean(app, tmp_path)


def test_a_scaled_cluster_passes_nag_and_the_strict_validator(tmp_path: Path) -> None:
    """A group with ``scaling`` adds the scaler's policy (its own cluster's ARN, no wildcard): nothing to
    acknowledge."""
    from hyperpod_cdk import TrainingClusterStack, parse_config

    config = parse_config(
        {
            "node_provisioning_mode": "continuous",
            "instance_groups": [
                {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
                {"name": "gpu", "instance_type": "ml.g5.xlarge", "count": 0, "scaling": {"min": 0, "max": 8}},
            ],
        }
    )
    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    stack = TrainingClusterStack(app, "scaled", config=config, deployed_counts={"gpu": 3})
    assert stack.cluster.scaler_policy is not None
    assert_nag_clean(app, tmp_path)


def test_a_cluster_with_every_grant_passes_nag_and_the_strict_validator(tmp_path: Path) -> None:
    """The grants name the cluster's ARN and documents exactly; the log group's ``:*`` form (the one IAM policies
    use, CloudWatch Logs' reference) is the one wildcard, acknowledged on the grantee with its reason."""
    from aws_cdk import aws_iam as iam

    from hyperpod_cdk import TrainingClusterStack, parse_config

    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    stack = TrainingClusterStack(app, "granted", config=parse_config({}))
    operators = iam.Role(stack, "Operators", assumed_by=iam.AccountRootPrincipal())
    for grant in (stack.cluster.grant_describe, stack.cluster.grant_operate, stack.cluster.grant_reconfigure):
        grant(operators)
    stack.cluster.grant_connect(operators)
    assert_nag_clean(app, tmp_path)


def test_an_internet_facing_login_pool_with_a_kms_key_passes_nag_and_the_strict_validator(tmp_path: Path) -> None:
    """The production example has an internal pool; the public one (the new VPC's public subnet, an allow-list) and
    the host keys' secret under the organization's key add nothing to acknowledge."""
    from hyperpod_cdk import TrainingClusterStack, parse_config

    config = parse_config(
        {
            "instance_groups": [
                {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
                {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 2},
                {"name": "workers", "instance_type": "ml.c5.xlarge", "count": 1},
            ],
            "login_pool": {"scheme": "internet-facing", "allowed_cidrs": ["203.0.113.0/24"]},
            "organization": {
                "kms_key_arn": "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
            },
        }
    )
    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    stack = TrainingClusterStack(app, "pooled", config=config, env=cdk.Environment(region="us-west-2"))
    assert stack.login_pool is not None and stack.login_pool.key_arn is not None
    assert_nag_clean(app, tmp_path)
