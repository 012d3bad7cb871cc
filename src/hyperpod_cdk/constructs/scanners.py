"""Reasons, in the template, for the findings IaC scanners raise on purpose-made choices.

A platform team's security reviewer runs scanners such as checkov over the template it publishes. Every
finding we leave in place carries its reason as CloudFormation resource metadata, in the form the scanner
reads (``Metadata.checkov.skip: [{id, comment}]``), so the reviewer reads the reason next to the resource.
cdk-nag findings are acknowledged with the same sentences (``nag.acknowledge``); each reason is defined
once here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aws_cdk import CfnResource
from constructs import IConstruct

from hyperpod_cdk.constructs.nag import acknowledge

MISSING_ACCESS_LOGS = "CKV_AWS_18"
"""checkov's finding for a bucket without server access logs."""
LOG_GROUP_WITHOUT_KEY = "CKV_AWS_158"
"""checkov's finding for a log group without a customer-managed key."""
SECRET_WITHOUT_KEY = "CKV_AWS_149"
"""checkov's finding for a Secrets Manager secret without a customer-managed key."""
DEFAULT_SG_FINDING = "CKV2_AWS_12"
"""The scanners' finding "the VPC's default security group does not restrict all traffic" (checkov's id)."""

ACCESS_LOGS_REASON = (
    "Server access logging needs a log bucket the organisation owns; pass server_access_logs_bucket (or set "
    "organization.access_logs_bucket) to enable it (CloudTrail data events are the usual alternative)"
)
LOG_GROUP_KEY_REASON = (
    "CloudWatch Logs encrypts every log group at rest with a service-owned key; a customer-managed key is the "
    "organisation's choice (organization.kms_key_arn adds one)"
)
SECRET_KEY_REASON = (
    "Secrets Manager encrypts every secret at rest with its AWS managed key (aws/secretsmanager); a customer-managed "
    "key is the organisation's choice (organization.kms_key_arn adds one)"
)
DEFAULT_SG_REASON = (
    "Nothing in this stack uses the VPC's default security group (the nodes and the file system have their "
    "own groups). Closing it needs a Lambda-backed custom resource, which published templates leave out "
    "(no CDK assets or Lambda functions); the account baseline closes it (AWS Config rule "
    "vpc-default-security-group-closed, Security Hub EC2.2)."
)
# The Lambda functions CDK itself adds to run deploy-time custom resources (the lifecycle upload, the
# default security group's rule removal). CloudFormation invokes them synchronously during stack
# operations only; they are not part of the training cluster's data path.
DEPLOY_TIME_HANDLER_REASONS = {
    "CKV_AWS_115": "Deploy-time custom-resource handler owned by CDK: CloudFormation calls it once per stack "
    "operation, so reserved concurrency would only hold capacity idle",
    "CKV_AWS_116": "Deploy-time custom-resource handler owned by CDK: CloudFormation invokes it synchronously and "
    "reports a failure as a failed stack operation; a dead-letter queue would never receive anything",
    "CKV_AWS_117": "Deploy-time custom-resource handler owned by CDK: it calls only the S3/EC2 APIs and needs no "
    "access to the cluster's VPC",
    "CKV_AWS_173": "Deploy-time custom-resource handler owned by CDK: its environment holds no secret (only "
    "CDK's own settings), so the default encryption of environment variables is enough",
}


def cfn_resource(scope: IConstruct) -> CfnResource:
    """``scope`` itself when it is an L1 resource, else its default child (an L2's resource)."""
    if isinstance(scope, CfnResource):
        return scope
    child = scope.node.default_child
    if not isinstance(child, CfnResource):
        raise TypeError(f"{scope.node.path} has no CloudFormation resource to explain")
    return child


def skip_checkov(scope: IConstruct, check_id: str, reason: str) -> None:
    """Record in the resource's metadata that checkov's ``check_id`` is by design, and why."""
    resource = cfn_resource(scope)
    current: Any = resource.get_metadata("checkov") or {}
    skips = [s for s in current.get("skip", []) if s.get("id") != check_id]
    skips.append({"id": check_id, "comment": reason})
    resource.add_metadata("checkov", {**current, "skip": skips})


def unskip_checkov(resource: CfnResource, check_id: str) -> None:
    """Drop the reason for ``check_id`` from the metadata: something (an organization rule) fixed the finding."""
    current: Any = resource.get_metadata("checkov")
    if not current or not any(s.get("id") == check_id for s in current.get("skip", [])):
        return
    skips = [s for s in current["skip"] if s.get("id") != check_id]
    resource.add_metadata("checkov", {**current, "skip": skips})


def explain(scope: IConstruct, reason: str, *, checkov: Iterable[str] = (), nag: Iterable[str] = ()) -> None:
    """One reason for the same choice, as each scanner reads it (checkov metadata, cdk-nag acknowledgement)."""
    for check_id in checkov:
        skip_checkov(scope, check_id, reason)
    for finding in nag:
        acknowledge(scope, finding, reason)


def explain_deploy_time_handler(function: IConstruct) -> None:
    """The checkov findings on a CDK-owned custom-resource Lambda, each with its reason."""
    for check_id, reason in DEPLOY_TIME_HANDLER_REASONS.items():
        skip_checkov(function, check_id, reason)
