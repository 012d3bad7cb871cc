"""The one definition of a hyperpod-cdk bucket's security defaults."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_cdk.constructs.scanners import ACCESS_LOGS_REASON, MISSING_ACCESS_LOGS, explain


def secure_bucket(
    scope: Construct,
    id: str,
    *,
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    server_access_logs_bucket: s3.IBucket | None = None,
) -> s3.Bucket:
    """A private, TLS-only (1.2+), S3-encrypted, versioned bucket that survives stack deletion by default.

    Objects are never deleted with the bucket (no auto-delete): removing data is the owner's decision.
    """
    bucket = s3.Bucket(
        scope,
        id,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        versioned=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        removal_policy=removal_policy,
        server_access_logs_bucket=server_access_logs_bucket,
    )
    if server_access_logs_bucket is None:
        explain(bucket, ACCESS_LOGS_REASON, checkov=[MISSING_ACCESS_LOGS], nag=["AwsSolutions-S1"])
    return bucket
