"""A customer-managed KMS key on buckets, the file system, log groups and the HyperPod nodes' volumes.

Buckets get the key through a property injector on ``s3.Bucket``, so the key is the bucket's own
``encryption_key`` and every CDK grant on the bucket (``grant_read``, a BucketDeployment's
``grant_read_write``) also grants the key actions it needs: no policy is patched after the fact. The
other resources take the key by an aspect on their L1 resources (their users need no key permission of
their own: the services encrypt for them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsii
from aws_cdk import Annotations, CfnResource, IAspect, IPropertyInjector, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IConstruct

from hyperpod_cdk.constructs.execution_role import grant_volume_key
from hyperpod_cdk.constructs.scanners import LOG_GROUP_WITHOUT_KEY, unskip_checkov
from hyperpod_cdk.core.merged_values import organization_volume_key, volume_keying
from hyperpod_cdk.rules.organization import SCRATCH_TYPES
from hyperpod_cdk.rules.volumes import NODE_VOLUMES_NEED_CONTINUOUS

KeyOf = Callable[[Construct], kms.IKey]
"""The organization's key as seen from a construct's stack."""


@jsii.implements(IPropertyInjector)
class BucketKeyInjector:
    """Every ``s3.Bucket`` created under the scope is SSE-KMS with the key and an S3 Bucket Key."""

    def __init__(self, key_of: KeyOf) -> None:
        self._key_of = key_of

    @property
    def construct_unique_id(self) -> str:
        return str(s3.Bucket.PROPERTY_INJECTION_ID)

    def inject(self, original_props: Any, *, scope: Construct, id: str) -> Any:
        # jsii hands the props over with their JavaScript names.
        return {
            **dict(original_props),
            "encryption": s3.BucketEncryption.KMS,
            "encryptionKey": self._key_of(scope),
            "bucketKeyEnabled": True,
        }


@jsii.implements(IPropertyInjector)
class SecretKeyInjector:
    """Every ``secretsmanager.Secret`` created under the scope (the REST API's signing key) is encrypted with the key,
    so the secret's own grants and its readers' ``kms:Decrypt`` name it."""

    def __init__(self, key_of: KeyOf) -> None:
        self._key_of = key_of

    @property
    def construct_unique_id(self) -> str:
        return str(secretsmanager.Secret.PROPERTY_INJECTION_ID)

    def inject(self, original_props: Any, *, scope: Construct, id: str) -> Any:
        return {**dict(original_props), "encryptionKey": self._key_of(scope)}


@jsii.implements(IAspect)
class KmsEncryption:
    """The key on every log group, FSx file system, Prometheus workspace and HyperPod node volume; an error on a
    bucket that did not get the key (created before the rules were applied, or as an L1), on an access-log bucket
    that did (S3 cannot deliver logs to it) and on a SCRATCH file system."""

    def __init__(self, key_of: KeyOf, is_log_bucket: Callable[[s3.CfnBucket], bool]) -> None:
        self._key_of = key_of
        self._is_log_bucket = is_log_bucket

    def visit(self, node: IConstruct) -> None:
        if not CfnResource.is_cfn_resource(node):
            return
        if isinstance(node, s3.CfnBucket):
            self._check_bucket(node)
        elif isinstance(node, logs.CfnLogGroup):
            node.kms_key_id = self._key_of(node).key_arn
            unskip_checkov(node, LOG_GROUP_WITHOUT_KEY)
        elif isinstance(node, fsx.CfnFileSystem):
            self._file_system(node)
        elif isinstance(node, sagemaker.CfnCluster):
            self._node_volumes(node)
        elif isinstance(node, aps.CfnWorkspace):
            node.kms_key_arn = self._key_of(node).key_arn

    def _key_arn(self, node: Construct) -> Any:
        return Stack.of(node).resolve(self._key_of(node).key_arn)

    def _check_bucket(self, bucket: s3.CfnBucket) -> None:
        encryption = Stack.of(bucket).resolve(bucket.bucket_encryption) or {}
        rules = _field(encryption, "ServerSideEncryptionConfiguration", "serverSideEncryptionConfiguration") or []
        defaults = [_field(r, "ServerSideEncryptionByDefault", "serverSideEncryptionByDefault") or {} for r in rules]
        if self._is_log_bucket(bucket):
            if any(_field(d, "SSEAlgorithm", "sseAlgorithm") != "AES256" for d in defaults):
                Annotations.of(bucket).add_error(
                    f"{bucket.node.path}: the access-log bucket must use SSE-S3 (S3 delivers server access logs to "
                    "no other encryption). Fix: create it with BucketEncryption.S3_MANAGED before applying the "
                    "rules, or outside their scope"
                )
            return
        keys = [_field(d, "KMSMasterKeyID", "kmsMasterKeyId") for d in defaults]
        if self._key_arn(bucket) not in keys:
            Annotations.of(bucket).add_error(
                f"{bucket.node.path}: this bucket is not encrypted with the organization's KMS key (it was "
                "created before OrganizationRules.apply() or as a CfnBucket, so its grants lack the key). Fix: "
                "apply the rules to the app or stack before adding constructs to it"
            )

    def _file_system(self, file_system: fsx.CfnFileSystem) -> None:
        lustre = Stack.of(file_system).resolve(file_system.lustre_configuration) or {}
        deployment = _field(lustre, "DeploymentType", "deploymentType")
        if deployment in SCRATCH_TYPES:
            Annotations.of(file_system).add_error(
                f"{file_system.node.path}: FSx for Lustre {deployment} cannot be encrypted with the "
                "organization's KMS key (FSx encrypts SCRATCH file systems with its own key). Fix: use "
                "PERSISTENT_1 or PERSISTENT_2"
            )
            return
        file_system.kms_key_id = self._key_of(file_system).key_arn

    def _node_volumes(self, cluster: sagemaker.CfnCluster) -> None:
        """``VolumeKmsKeyId`` on each group's extra EBS volume, and a root-volume entry with the key; an error on a
        group whose own volume key (``volume_kms_key_arn``) is another key: the organization's key is enforced.

        HyperPod takes a customer managed key for node volumes only in clusters with continuous node provisioning
        (rules.volumes.CMK_DOC), so another cluster keeps AWS's key, with a warning saying how to apply the
        organization's; the execution roles get the ``kms:CreateGrant`` the volumes need."""
        key = organization_volume_key(self._key_arn(cluster), Stack.of(cluster).resolve(cluster.node_provisioning_mode))
        if key is None:
            Annotations.of(cluster).add_warning_v2(
                "hyperpod-cdk:organization-node-volumes",
                f"{cluster.node.path}: {NODE_VOLUMES_NEED_CONTINUOUS}. Fix: set node_provisioning_mode: continuous "
                "(new clusters only) to encrypt them with the organization's key",
            )
            return
        groups = Stack.of(cluster).resolve(cluster.instance_groups) or []
        self._grant_execution_roles(cluster, groups if isinstance(groups, list) else [])
        root = {"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": key}}
        for index, group in enumerate(groups if isinstance(groups, list) else []):
            at = f"InstanceGroups.{index}.InstanceStorageConfigs"
            configs = _field(group, "InstanceStorageConfigs", "instanceStorageConfigs") or []
            if not configs:
                cluster.add_property_override(at, [root])
                continue
            keying = volume_keying([_volume(config) for config in configs], key)
            for position in keying.keyed:
                cluster.add_property_override(f"{at}.{position}.EbsVolumeConfig.VolumeKmsKeyId", key)
            for own in dict.fromkeys(keying.other_keys):
                name = _field(group, "InstanceGroupName", "instanceGroupName")
                Annotations.of(cluster).add_error(
                    f"{cluster.node.path}: instance group {name!r} encrypts its volumes with {own}, not the "
                    "organization's KMS key. Fix: remove the group's volume_kms_key_arn (the organization's key "
                    "applies to every node volume), or give it the organization's key"
                )
            if keying.append_root:
                cluster.add_property_override(f"{at}.{len(configs)}", root)

    def _grant_execution_roles(self, cluster: sagemaker.CfnCluster, groups: list[Any]) -> None:
        """``kms:CreateGrant`` and ``kms:DescribeKey`` on the key, with the conditions AWS's examples use
        (:func:`~hyperpod_cdk.constructs.execution_role.grant_volume_key`), for each group's execution role that
        this stack defines (HyperPod creates the volumes' grants as that role); an imported role is its owner's to
        grant."""
        stack = Stack.of(cluster)
        wanted = set()
        for group in groups:
            role_arn = _field(group, "ExecutionRole", "executionRole")
            if isinstance(role_arn, dict) and "Fn::GetAtt" in role_arn:
                wanted.add(role_arn["Fn::GetAtt"][0])
        for node in stack.node.find_all():
            if isinstance(node, iam.CfnRole) and stack.resolve(node.logical_id) in wanted:
                role = node.node.scope
                if isinstance(role, iam.Role):
                    grant_volume_key(role, self._key_of(cluster).key_arn)


def _volume(config: Any) -> tuple[bool, bool, Any]:
    """A resolved storage config as :func:`~hyperpod_cdk.core.merged_values.volume_keying` reads it."""
    ebs = _field(config, "EbsVolumeConfig", "ebsVolumeConfig")
    root = bool(_field(ebs, "RootVolume", "rootVolume"))
    return ebs is not None, root, _field(ebs, "VolumeKmsKeyId", "volumeKmsKeyId")


def _field(value: Any, *names: str) -> Any:
    """A resolved L1 property's field: the L1's own props resolve with JavaScript names, overrides with
    CloudFormation's."""
    if not isinstance(value, dict):
        return None
    return next((value[name] for name in names if name in value), None)
