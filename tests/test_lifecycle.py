"""LifecycleScripts: a secure bucket, the scripts and runtime as plain files, the parameters file."""

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from builders import cluster_stack, new_stack, only
from hyperpod_cdk import ConfigurationError, LifecycleScripts
from hyperpod_cdk.constructs.lifecycle import staged_assets


@pytest.fixture(scope="module")
def template() -> Template:
    stack, _ = cluster_stack()
    return Template.from_stack(stack)


def test_bucket_is_private_encrypted_versioned_tls_only_and_retained(template: Template) -> None:
    template.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": Match.object_like(
                {
                    "PublicAccessBlockConfiguration": {
                        "BlockPublicAcls": True,
                        "BlockPublicPolicy": True,
                        "IgnorePublicAcls": True,
                        "RestrictPublicBuckets": True,
                    },
                    "BucketEncryption": {
                        "ServerSideEncryptionConfiguration": [
                            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                        ]
                    },
                    "VersioningConfiguration": {"Status": "Enabled"},
                }
            ),
            "DeletionPolicy": "Retain",
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def test_assets_are_plain_files_with_the_runtime_package() -> None:
    staged = staged_assets()
    names = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    assert {
        "on_create.sh",
        "on_init_complete.sh",
        "bootstrap.sh",
        "training_runtime/__main__.py",
        "training_runtime/params.py",
    } <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_upload_has_scripts_and_parameters_under_the_prefix(template: Template) -> None:
    _, upload = only(template, "Custom::CDKBucketDeployment")
    properties = upload["Properties"]
    assert properties["DestinationBucketKeyPrefix"] == "lifecycle/"
    assert len(properties["SourceObjectKeys"]) == 2  # the staged assets and the parameters file
    assert properties.get("RetainOnDelete", True) is not False


def test_every_execution_role_reads_only_the_prefix(template: Template) -> None:
    policies = template.find_resources(
        "AWS::IAM::Policy", {"Properties": {"PolicyName": Match.string_like_regexp("ExecutionRole")}}
    )
    assert len(policies) == 2  # the controller's role and the workers' (a role per group)
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        s3_statements = [s for s in statements if any(a.startswith("s3:") for a in _actions(s))]
        assert s3_statements, statements
        for statement in s3_statements:
            assert not any(a.startswith(("s3:Put", "s3:Delete")) for a in _actions(statement))
        resources = str(s3_statements)
        assert "/lifecycle/*" in resources


def _actions(statement: dict) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else actions


def test_empty_prefix_is_refused_because_the_upload_replaces_it() -> None:
    with pytest.raises(ConfigurationError, match="must not be empty"):
        LifecycleScripts(new_stack(), "Scripts", prefix="")


def test_existing_bucket_and_prefix() -> None:
    stack = new_stack()
    scripts = LifecycleScripts(
        stack, "Scripts", bucket=s3.Bucket.from_bucket_name(stack, "B", "sagemaker-lcs"), prefix="teams/a"
    )
    assert scripts.prefix == "teams/a/"
    assert stack.resolve(scripts.s3_uri) == "s3://sagemaker-lcs/teams/a/"
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    scripts.grant_read(role)
    scripts.add_parameters(_parameters())
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::S3::Bucket", 0)


def test_scripts_without_parameters_fail_synthesis() -> None:
    stack = new_stack()
    LifecycleScripts(stack, "Scripts")
    with pytest.raises(RuntimeError, match="no cluster parameters"):
        Template.from_stack(stack)


def test_parameters_can_be_added_once() -> None:
    scripts = LifecycleScripts(new_stack(), "Scripts")
    scripts.add_parameters(_parameters())
    with pytest.raises(ConfigurationError, match="already set for cluster 'c'"):
        scripts.add_parameters(_parameters())


def _parameters():  # type: ignore[no-untyped-def]
    from training_runtime.groups import GroupSpec
    from training_runtime.params import ProvisioningParameters

    return ProvisioningParameters(
        cluster_name="c",
        mode="api-driven",
        groups=(GroupSpec("c", "controller", "ml.m5.large"), GroupSpec("w", "compute", "ml.c5.large")),
    )
