"""Rules on the lifecycle-script location."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.repositories import bucket_name_problem
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

PREFIX = re.compile(r"^[a-zA-Z0-9!_.*'()-]+(/[a-zA-Z0-9!_.*'()-]+)*/?$")
MAX_SOURCE_URI = 1024
"""LifeCycleConfig.SourceS3Uri is at most 1024 characters."""

rule = REGISTRY.rule


@rule("LC-PREFIX", "lifecycle", "lifecycle.prefix", source="AWS::SageMaker::Cluster LifeCycleConfig.SourceS3Uri")
def prefix(view: ClusterView) -> Iterator[Problem]:
    """The scripts' key prefix is non-empty, has no leading slash and uses S3-safe characters."""
    lifecycle = view.lifecycle
    if lifecycle is None or not view.concrete(lifecycle.prefix):
        return
    if not PREFIX.fullmatch(lifecycle.prefix):
        yield Problem(
            view.path("lifecycle", "prefix"),
            "expected a non-empty key prefix such as 'lifecycle/' (no leading slash; S3-safe characters). It must "
            "not be empty: the upload replaces everything under it",
            got=lifecycle.prefix,
        )
    elif len(f"s3://{lifecycle.bucket_name or 'x' * 63}/{lifecycle.prefix}") > MAX_SOURCE_URI:
        yield Problem(view.path("lifecycle", "prefix"), f"s3://bucket/prefix is at most {MAX_SOURCE_URI} characters")


@rule("LC-BUCKET", "lifecycle", "lifecycle.bucket_name", source="Amazon S3 bucket naming rules")
def bucket(view: ClusterView) -> Iterator[Problem]:
    """An existing lifecycle bucket has a valid S3 bucket name."""
    lifecycle = view.lifecycle
    if lifecycle is not None and view.concrete(lifecycle.bucket_name):
        problem = bucket_name_problem(lifecycle.bucket_name)  # type: ignore[arg-type]
        if problem:
            yield Problem(view.path("lifecycle", "bucket_name"), problem, got=lifecycle.bucket_name)


@rule(
    "LC-BUCKET-ACCESS",
    "lifecycle",
    "lifecycle.bucket_name",
    level=WARNING,
    source="SageMaker ClusterLifeCycleConfig; AmazonSageMakerClusterInstanceRolePolicy",
)
def bucket_access(view: ClusterView) -> Iterator[Problem]:
    """An existing bucket's own policy or KMS key can still stop HyperPod reading the scripts, and its writers are its
    owner's to limit."""
    lifecycle = view.lifecycle
    if lifecycle is None or not view.concrete(lifecycle.bucket_name):
        return
    if not str(lifecycle.bucket_name).startswith("sagemaker-"):
        yield Problem(
            view.path("lifecycle", "bucket_name"),
            "an existing bucket: the execution role gets read access through a grant, but HyperPod's managed "
            "policy covers only sagemaker-* buckets, and a bucket policy or KMS key of this bucket can still "
            "deny the nodes; and the stack cannot limit who writes the prefix (its scripts run as root on every "
            "node), as it does in a bucket it creates",
            got=lifecycle.bucket_name,
            fix="`hyperpod-cdk preflight` checks the bucket policy and key policy against the account (AWS-BUCKET); "
            "add a Deny of s3:PutObject* and s3:DeleteObject* on the prefix to all but the upload's role "
            "(docs/architecture.md, Security defaults); or let the stack create the bucket",
        )
