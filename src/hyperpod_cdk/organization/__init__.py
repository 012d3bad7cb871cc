"""Organization rules a platform team applies to any stack that uses these constructs, without forking one.

``OrganizationRules(...).apply(scope)`` adds aspects (and, for buckets, a property injector) to ``scope``:
an app, a stack or a ``ProductStack``. Apply it before adding constructs to the scope: a property injector
sees only constructs created after it. docs/organization.md says what each rule reaches and what it cannot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aws_cdk import ArnFormat, AspectPriority, Aspects, CfnParameter, PropertyInjectors, Stack, Tags, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_cdk.constructs.nag import acknowledge
from hyperpod_cdk.model import prefixed
from hyperpod_cdk.organization.access_logs import AccessLogs
from hyperpod_cdk.organization.encryption import BucketKeyInjector, KmsEncryption, SecretKeyInjector
from hyperpod_cdk.organization.identity import PermissionBoundary, RequiredTagsCheck, boundary_of
from hyperpod_cdk.organization.names import NAMED_TYPES, NamePrefix

if TYPE_CHECKING:
    from hyperpod_cdk.core.config import OrganizationConfig

KEY_GRANT_WILDCARDS = ("kms:GenerateDataKey*", "kms:ReEncrypt*")
"""The wildcard actions CDK's read-write grant on a KMS-encrypted bucket adds for its key."""
IMPORTED_KEY_ID = "OrganizationKmsKey"
"""The construct ID of the key imported from an ARN, one per stack."""


@dataclass(frozen=True)
class OrganizationRules:
    """A platform team's rules for every resource under a scope.

    :param permission_boundary_arn: managed policy set as ``PermissionsBoundary`` of every IAM role and user.
    :param required_tags: tags every taggable resource must carry; a value applies the tag, ``None`` only
        requires it (synth reports, by resource path, every resource that ends up without it).
    :param name_prefix: prefix of every concrete physical name (names.NAMED_TYPES); a prefixed name over
        its service's limit is an error, never cut short.
    :param kms_key: customer-managed key (an ``IKey`` or a key ARN) for new buckets (SSE-KMS with an S3
        Bucket Key), FSx file systems (not SCRATCH: an error), log groups, Prometheus workspaces and HyperPod
        node volumes.
    :param access_logs_bucket: bucket (or its name) for every other bucket's S3 server access logs.
    :param access_logs_prefix: key prefix of those logs. Default: none.
    """

    permission_boundary_arn: str | None = None
    required_tags: Mapping[str, str | None] = field(default_factory=dict)
    name_prefix: str | None = None
    kms_key: kms.IKey | str | None = None
    access_logs_bucket: s3.IBucket | str | None = None
    access_logs_prefix: str = ""

    @classmethod
    def from_config(cls, config: OrganizationConfig) -> OrganizationRules:
        return cls(
            permission_boundary_arn=config.permission_boundary_arn,
            required_tags=dict(config.required_tags),
            name_prefix=config.name_prefix,
            kms_key=config.kms_key_arn,
            access_logs_bucket=config.access_logs_bucket,
            access_logs_prefix=config.access_logs_prefix,
        )

    def prefixed(self, name: str) -> str:
        """``name`` as the prefix rule leaves it."""
        return prefixed(self.name_prefix, name) if self.name_prefix and not Token.is_unresolved(name) else name

    def constrain_name_parameter(self, parameter: CfnParameter | None) -> None:
        """A name chosen at launch (a CloudFormation parameter: a token the prefix rule cannot change) must
        start with the prefix: the parameter's ``AllowedPattern`` says so."""
        if parameter is None or not self.name_prefix:
            return
        pattern = parameter.allowed_pattern or ".*"
        parameter.allowed_pattern = f"^(?={re.escape(self.name_prefix)}){pattern.removeprefix('^')}"
        parameter.constraint_description = (
            f"{parameter.constraint_description or ''} It starts with the organization's prefix {self.name_prefix!r}."
        ).strip()

    def apply(self, scope: Construct) -> None:
        """Add the rules to ``scope`` (before its constructs are added: see the module's docstring)."""
        aspects = Aspects.of(scope)
        if self.permission_boundary_arn:
            aspects.add(PermissionBoundary(self.permission_boundary_arn), priority=AspectPriority.MUTATING)
        for key, value in self.required_tags.items():
            if value is not None:
                Tags.of(scope).add(key, value)
        if self.required_tags:
            aspects.add(RequiredTagsCheck(self.required_tags), priority=AspectPriority.READONLY)
        if self.name_prefix:
            aspects.add(NamePrefix(self.name_prefix), priority=AspectPriority.MUTATING)
        if self.kms_key is not None:
            if isinstance(self.kms_key, kms.Key):
                self.kms_key.add_to_resource_policy(_logs_may_use_key(self.kms_key))
            PropertyInjectors.of(scope).add(BucketKeyInjector(self._key_of), SecretKeyInjector(self._key_of))
            for action in KEY_GRANT_WILDCARDS:
                acknowledge(
                    scope,
                    f"AwsSolutions-IAM5[Action::{action}]",
                    "CDK's grants on a bucket encrypted with the organization's key; the statement names that key",
                )
            aspects.add(KmsEncryption(self._key_of, self._is_log_bucket), priority=AspectPriority.MUTATING)
        if self.access_logs_bucket is not None:
            aspects.add(
                AccessLogs(self._log_bucket_name, self.access_logs_prefix, self._is_log_bucket),
                priority=AspectPriority.MUTATING,
            )

    def _key_of(self, scope: Construct) -> kms.IKey:
        if not isinstance(self.kms_key, str):
            assert self.kms_key is not None
            return self.kms_key
        stack = Stack.of(scope)
        found = stack.node.try_find_child(IMPORTED_KEY_ID)
        return found if found is not None else kms.Key.from_key_arn(stack, IMPORTED_KEY_ID, self.kms_key)  # type: ignore[return-value]

    @property
    def _log_bucket_name(self) -> str:
        bucket = self.access_logs_bucket
        return bucket if isinstance(bucket, str) else bucket.bucket_name  # type: ignore[union-attr]

    def _is_log_bucket(self, bucket: s3.CfnBucket) -> bool:
        if self.access_logs_bucket is None:
            return False
        stack = Stack.of(bucket)
        name = stack.resolve(self._log_bucket_name)
        return bool(
            stack.resolve(bucket.ref) == name or (bucket.bucket_name is not None and bucket.bucket_name == name)
        )


def _logs_may_use_key(key: kms.Key) -> iam.PolicyStatement:
    """CloudWatch Logs encrypts a log group only with a key whose policy lets the service use it."""
    stack = Stack.of(key)
    return iam.PolicyStatement(
        sid="CloudWatchLogsUseKey",
        principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
        actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
        resources=["*"],
        conditions={
            "ArnLike": {
                "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                    service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                )
            }
        },
    )


__all__ = ["IMPORTED_KEY_ID", "NAMED_TYPES", "OrganizationRules", "boundary_of"]
