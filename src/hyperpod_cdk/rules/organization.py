"""Rules on the ``organization`` section: a platform team's permission boundary, tags, name prefix, KMS key
and access-log bucket (applied to every resource by ``hyperpod_cdk.organization``; docs/organization.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_cdk.model import prefixed
from hyperpod_cdk.rules.cluster import tag_problems
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.repositories import S3_PREFIX, bucket_name_problem
from hyperpod_cdk.rules.shapes import field_of, matches
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.groups import MAX_NAME_LENGTH
from training_runtime.problems import Problem

BOUNDARY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::([0-9]{12}|aws):policy/[\w+=,.@/-]{1,512}$")
"""A managed policy's ARN (an account's own, or an AWS managed policy)."""
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[a-zA-Z0-9-]{1,128}$")
"""A KMS key's ARN: S3, FSx, CloudWatch Logs and HyperPod all take it (Logs takes no alias)."""
NAME_PREFIX = re.compile(r"^[a-z0-9][a-z0-9-]*$")
"""Lowercase letters, digits and hyphens: valid at the start of every name it reaches (S3 is the strictest)."""
MAX_NAME_PREFIX = 24
"""Leaves at least 39 characters of a 63-character name (S3 buckets, HyperPod clusters) to the name itself."""
SCRATCH_TYPES = ("SCRATCH_1", "SCRATCH_2")

rule = REGISTRY.rule


def _at(view: ClusterView, field: str) -> str:
    return view.path("organization", field)


boundary_arn = rule(
    "ORG-BOUNDARY-ARN", "organization", "organization.permission_boundary_arn", source="IAM PermissionsBoundary"
)(
    matches(
        "The permission boundary is a managed policy's ARN.",
        field_of("organization", lambda view: view.organization, "permission_boundary_arn"),
        BOUNDARY_ARN,
        "expected a managed policy ARN such as 'arn:aws:iam::111122223333:policy/TeamBoundary'",
    )
)


@rule("ORG-TAG-KEY", "organization", "organization.required_tags.<key>", source="AWS tagging limits")
def required_tag_keys(view: ClusterView) -> Iterator[Problem]:
    """A required tag's key and value are within AWS's tag limits (as for ``tags``)."""
    org = view.organization
    for key, value in (org.required_tags if org is not None else {}).items():
        if view.concrete(key):
            yield from tag_problems(_at(view, f"required_tags.{key}"), key, value, view)


@rule(
    "ORG-TAG-MISSING",
    "organization",
    "organization.required_tags.<key>",
    needs=("cluster",),
    source="hyperpod-cdk (docs/organization.md)",
)
def required_tag_values(view: ClusterView) -> Iterator[Problem]:
    """A required tag without a value here must get one from ``tags``."""
    org = view.organization
    for key, value in (org.required_tags if org is not None else {}).items():
        if value is None and key not in view.tags:
            yield Problem(
                _at(view, f"required_tags.{key}"),
                "a required tag with no value here, and `tags` does not set it either",
                fix=f"add {key}: <value> under tags (or give the value here)",
            )


@rule("ORG-NAME-PREFIX", "organization", "organization.name_prefix", source="S3, IAM and SageMaker naming rules")
def name_prefix(view: ClusterView) -> Iterator[Problem]:
    """The name prefix is 1-24 lowercase letters, digits and hyphens, starting with a letter or digit."""
    org = view.organization
    prefix = org.name_prefix if org is not None else None
    if view.concrete(prefix) and not (NAME_PREFIX.fullmatch(str(prefix)) and len(str(prefix)) <= MAX_NAME_PREFIX):
        yield Problem(
            _at(view, "name_prefix"),
            f"use 1-{MAX_NAME_PREFIX} lowercase letters, digits and hyphens, starting with a letter or digit "
            "(it starts S3 bucket names too)",
            got=prefix,
        )


@rule(
    "ORG-PREFIXED-NAME",
    "organization",
    "cluster_name",
    needs=("cluster",),
    source="AWS::SageMaker::Cluster ClusterName",
)
def prefixed_cluster_name(view: ClusterView) -> Iterator[Problem]:
    """The cluster name with the organization's prefix is at most 63 characters."""
    org = view.organization
    prefix = org.name_prefix if org is not None else None
    if not (view.concrete(prefix) and view.concrete(view.cluster_name)):
        return
    name = prefixed(str(prefix), view.cluster_name)
    if len(name) > MAX_NAME_LENGTH:
        yield Problem(
            view.path("cluster", "cluster_name"),
            f"with the prefix {prefix!r} the name is {name!r}, {len(name)} characters; HyperPod allows "
            f"{MAX_NAME_LENGTH}",
            got=view.cluster_name,
            fix=f"shorten it to at most {MAX_NAME_LENGTH - len(str(prefix))} characters",
        )


kms_key_arn = rule("ORG-KMS-ARN", "organization", "organization.kms_key_arn", source="AWS KMS key ARN")(
    matches(
        "The customer-managed key is given by its key ARN (not an alias: CloudWatch Logs takes none).",
        field_of("organization", lambda view: view.organization, "kms_key_arn"),
        KMS_KEY_ARN,
        "expected a key ARN such as 'arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab'",
    )
)


@rule(
    "ORG-KMS-SCRATCH",
    "organization",
    "organization.kms_key_arn",
    needs=("storage",),
    source="FSx for Lustre CreateFileSystem: KmsKeyId",
)
def kms_key_scratch(view: ClusterView) -> Iterator[Problem]:
    """A SCRATCH file system cannot take a customer-managed key (FSx encrypts it with its own)."""
    org, storage = view.organization, view.storage
    if org is None or org.kms_key_arn is None or storage is None or storage.existing is not None:
        return
    if storage.deployment_type in SCRATCH_TYPES:
        yield Problem(
            _at(view, "kms_key_arn"),
            f"storage.deployment_type {storage.deployment_type} cannot be encrypted with a customer-managed key",
            fix="use PERSISTENT_1 or PERSISTENT_2",
        )


@rule("ORG-ACCESS-LOGS", "organization", "organization.access_logs_bucket", source="Amazon S3 server access logging")
def access_logs(view: ClusterView) -> Iterator[Problem]:
    """The access-log bucket has a valid S3 bucket name and its prefix uses S3-safe characters."""
    org = view.organization
    if org is None:
        return
    if view.concrete(org.access_logs_bucket):
        problem = bucket_name_problem(str(org.access_logs_bucket))
        if problem:
            yield Problem(_at(view, "access_logs_bucket"), problem, got=org.access_logs_bucket)
    if view.concrete(org.access_logs_prefix) and not S3_PREFIX.fullmatch(org.access_logs_prefix):
        yield Problem(_at(view, "access_logs_prefix"), "use S3-safe characters", got=org.access_logs_prefix)
    if org.access_logs_prefix and org.access_logs_bucket is None:
        yield Problem(_at(view, "access_logs_prefix"), "set without access_logs_bucket", fix="set both or neither")
