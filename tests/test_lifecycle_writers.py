"""Who may write and read the lifecycle prefix, which runs as root on every node (security review M1): the bucket
policy denies every object write under the prefix to all but the upload's handler role, and the nodes read it only
from a bucket of the expected account (``aws:ResourceAccount``)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from builders import cluster_stack, new_stack, only
from hyperpod_cdk import LifecycleScripts, PublishedLifecycleScripts
from hyperpod_cdk.constructs.lifecycle import LIFECYCLE_WRITE_ACTIONS, WRITERS_SID
from support import fast_app

OTHER = "111122223333"


def writers_statement(template: Template) -> dict[str, Any]:
    [statement] = [
        s
        for policy in template.find_resources("AWS::S3::BucketPolicy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == WRITERS_SID
    ]
    return statement


def lifecycle_reads(template: Template) -> list[dict[str, Any]]:
    """The nodes' reads of the prefix, one per instance group's role: the ``s3:GetObject*`` statements of the
    policies not attached to a Lambda function's role (the upload handler also reads, from CDK's asset bucket)."""
    resources = template.to_json()["Resources"]
    function_roles = {
        r["Properties"]["Role"]["Fn::GetAtt"][0] for r in resources.values() if r["Type"] == "AWS::Lambda::Function"
    }
    reads = [
        s
        for policy in template.find_resources("AWS::IAM::Policy").values()
        if not {role["Ref"] for role in policy["Properties"]["Roles"]} & function_roles
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if "s3:GetObject*" in s["Action"]
    ]
    assert reads, "no node role reads the lifecycle prefix"
    return reads


def test_only_the_upload_handler_may_write_or_delete_under_the_prefix() -> None:
    stack, _ = cluster_stack()
    template = Template.from_stack(stack)
    bucket_id, _ = only(template, "AWS::S3::Bucket")
    statement = writers_statement(template)
    assert statement["Effect"] == "Deny" and statement["Principal"] == {"AWS": "*"}
    assert statement["Action"] == list(LIFECYCLE_WRITE_ACTIONS)
    assert {"s3:PutObject*", "s3:DeleteObject*"} <= set(statement["Action"])
    assert statement["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/lifecycle/*"]]}
    # The one principal excepted is the role the upload's Lambda function runs as.
    upload_id, upload = only(template, "Custom::CDKBucketDeployment")
    function_id = upload["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    role = template.to_json()["Resources"][function_id]["Properties"]["Role"]
    assert statement["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": role}}
    # The upload waits for the policy, so a new handler role is named before it writes.
    policy_id, _ = only(template, "AWS::S3::BucketPolicy")
    assert policy_id in template.to_json()["Resources"][upload_id]["DependsOn"]


def test_an_existing_bucket_keeps_its_owners_policy_and_the_construct_says_so() -> None:
    stack = new_stack()
    scripts = LifecycleScripts(stack, "Scripts", bucket=s3.Bucket.from_bucket_name(stack, "B", "team-lifecycle"))
    assert scripts.writers_restricted is False
    assert LifecycleScripts(new_stack(), "Scripts").writers_restricted is True


def test_the_nodes_read_the_prefix_only_from_a_bucket_of_the_expected_account() -> None:
    stack, _ = cluster_stack()
    for read in lifecycle_reads(Template.from_stack(stack)):
        assert read["Condition"] == {"StringEquals": {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}}}


def test_a_published_prefix_is_read_only_from_the_bucket_owner_publish_checked() -> None:
    from hyperpod_cdk import ClusterConfig, PublishedTrainingClusterStack, PublishTarget

    for owner, expected in ((OTHER, OTHER), (None, {"Ref": "AWS::AccountId"})):
        stack = PublishedTrainingClusterStack(
            fast_app(), "p", config=ClusterConfig(storage=None), target=PublishTarget("platform-templates", "", owner)
        )
        for read in lifecycle_reads(Template.from_stack(stack)):
            assert read["Condition"] == {"StringEquals": {"aws:ResourceAccount": expected}}


def test_a_published_prefix_refuses_an_owner_that_is_no_account_id() -> None:
    import pytest

    from hyperpod_cdk import ConfigurationError

    with pytest.raises(ConfigurationError, match="bucket_owner: got '1234'; expected a 12-digit AWS account ID"):
        PublishedLifecycleScripts(
            cdk.Stack(fast_app(), "s"), "S", bucket_name="platform-templates", bucket_owner="1234"
        )
