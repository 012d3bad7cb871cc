"""Rules on the key of a group's volumes (``volume_kms_key_arn``): its form, the provisioning mode HyperPod needs for
it, and its agreement with the organization's key."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.api_support import api_rule
from hyperpod_cdk.model import NodeProvisioningMode
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.organization import KMS_KEY_ARN
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

CMK_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html"
NODE_VOLUMES_NEED_CONTINUOUS = (
    "the nodes' volumes keep AWS's key: HyperPod encrypts node volumes with a customer managed key only in "
    "clusters with continuous node provisioning"
)
"""Why the organization's key does not reach the node volumes of another cluster (validate and the aspect)."""

rule = REGISTRY.rule


@rule(
    "GRP-VOLUME-KEY",
    "instance_groups",
    "instance_groups[*].volume_kms_key_arn",
    source=f"AWS::SageMaker::Cluster ClusterEbsVolumeConfig.VolumeKmsKeyId; {CMK_DOC}",
)
def volume_key(view: ClusterView) -> Iterator[Problem]:
    """A group's volume key is a KMS key's ARN (the execution role is granted on it)."""
    for index, group in enumerate(view.groups):
        arn = group.volume_kms_key_arn
        if view.concrete(arn) and not KMS_KEY_ARN.match(str(arn)):
            yield Problem(
                group_path(view, index, "volume_kms_key_arn"),
                "expected a KMS key ARN such as 'arn:aws:kms:us-east-1:111122223333:key/<key-id>' (not an alias)",
                got=arn,
            )


@api_rule(rule, "volume-key-continuous", "instance_groups", "instance_groups[*].volume_kms_key_arn", needs=("cluster",))
def volume_key_continuous(view: ClusterView) -> Iterator[Problem]:
    """A group's volume key needs node_provisioning_mode continuous: HyperPod supports customer keys only there."""
    if view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS:
        return
    for index, group in enumerate(view.groups):
        if group.volume_kms_key_arn is not None:
            yield Problem(
                group_path(view, index, "volume_kms_key_arn"),
                "HyperPod encrypts node volumes with a customer managed key only in clusters with continuous node "
                "provisioning",
                got=group.volume_kms_key_arn,
                fix="set node_provisioning_mode: continuous (new clusters only), or remove the key",
            )


@rule(
    "ORG-VOLUME-KEY",
    "organization",
    "instance_groups[*].volume_kms_key_arn",
    needs=("instance_groups",),
    source="hyperpod-cdk (docs/organization.md: the organization's key is enforced on every node volume)",
)
def organization_volume_key(view: ClusterView) -> Iterator[Problem]:
    """With organization.kms_key_arn, a group's volume key is that key or none: the organization's key is enforced."""
    org_key = view.organization.kms_key_arn if view.organization is not None else None
    if not view.concrete(org_key):
        return
    for index, group in enumerate(view.groups):
        arn = group.volume_kms_key_arn
        if view.concrete(arn) and arn != org_key:
            yield Problem(
                group_path(view, index, "volume_kms_key_arn"),
                f"differs from organization.kms_key_arn {org_key}: the organization's key encrypts every node volume",
                got=arn,
                fix="remove it (the organization's key applies), or use the organization's key",
            )


@rule(
    "ORG-VOLUME-KEY-CONTINUOUS",
    "organization",
    "organization.kms_key_arn",
    needs=("instance_groups",),
    level=WARNING,
    source=f"{CMK_DOC} (customer managed keys only with the continuous node provisioning mode)",
)
def organization_key_needs_continuous(view: ClusterView) -> Iterator[Problem]:
    """The organization's key reaches the node volumes only with node_provisioning_mode continuous."""
    org = view.organization
    key = org.kms_key_arn if org is not None else None
    if not view.concrete(key) or not KMS_KEY_ARN.match(str(key)):
        return  # no key, or one ORG-KMS-ARN reports
    if view.node_provisioning_mode != NodeProvisioningMode.CONTINUOUS:
        yield Problem(
            view.path("organization", "kms_key_arn"),
            NODE_VOLUMES_NEED_CONTINUOUS,
            fix="set node_provisioning_mode: continuous (new clusters only) to encrypt them with the organization's "
            "key",
        )
