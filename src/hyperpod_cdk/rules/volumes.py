"""Rules on the key of a group's volumes (``volume_kms_key_arn``): its form, the provisioning mode HyperPod needs for
it, and its agreement with the organization's key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperpod_cdk.aws_data.api_support import api_rule
from hyperpod_cdk.aws_data.quotes import KEY_PER_GROUP_QUOTE
from hyperpod_cdk.model import NodeProvisioningMode
from hyperpod_cdk.rules.field_values import scoped_values
from hyperpod_cdk.rules.groups import each_group, group_path
from hyperpod_cdk.rules.organization import KMS_KEY_ARN
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import matches, needs
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

CMK_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html"
NODE_VOLUMES_NEED_CONTINUOUS = (
    "the nodes' volumes keep AWS's key: HyperPod encrypts node volumes with a customer managed key only in "
    "clusters with continuous node provisioning"
)
"""Why the organization's key does not reach the node volumes of another cluster (validate and the aspect)."""

rule = REGISTRY.rule


volume_key = rule(
    "GRP-VOLUME-KEY",
    "instance_groups",
    "instance_groups[*].volume_kms_key_arn",
    source=f"AWS::SageMaker::Cluster ClusterEbsVolumeConfig.VolumeKmsKeyId; {CMK_DOC}",
)(
    matches(
        "A group's volume key is a KMS key's ARN (the execution role is granted on it).",
        each_group("volume_kms_key_arn"),
        KMS_KEY_ARN,
        "expected a KMS key ARN such as 'arn:aws:kms:us-east-1:111122223333:key/<key-id>' (not an alias)",
    )
)


volume_key_continuous = api_rule(
    rule, "volume-key-continuous", "instance_groups", "instance_groups[*].volume_kms_key_arn", needs=("cluster",)
)(
    needs(
        "A group's volume key needs node_provisioning_mode continuous: HyperPod supports customer keys only there "
        "(every field that sets VolumeKmsKeyId, by the field map; the organization's key reaches it only there).",
        lambda view: scoped_values(view, "volume-key-continuous"),
        lambda view: view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS,
        "HyperPod encrypts node volumes with a customer managed key only in clusters with continuous node provisioning",
        fix="set node_provisioning_mode: continuous (new clusters only), or remove the key",
    )
)


@rule(
    "GRP-VOLUME-KEY-SHARED",
    "instance_groups",
    "instance_groups[*].volume_kms_key_arn",
    level=WARNING,
    source=f"{CMK_DOC} (How to use your KMS key)",
)
def volume_key_shared(view: ClusterView) -> Iterator[Problem]:
    """Each group's volume key is its own: AWS strongly recommends a different KMS key for each instance group (a
    grant revoked for one group is not revoked for the others); the organization's one key is a platform's choice."""
    first: dict[str, str] = {}
    for index, group in enumerate(view.groups):
        key = group.volume_kms_key_arn
        if not view.concrete(key):
            continue
        if str(key) in first:
            yield Problem(
                group_path(view, index, "volume_kms_key_arn"),
                f"the same key as group {first[str(key)]!r}; AWS: {KEY_PER_GROUP_QUOTE} ({CMK_DOC})",
                got=key,
                fix="give each instance group a key of its own",
            )
        else:
            first[str(key)] = group.name


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


def _organization_key(view: ClusterView) -> list[tuple[str, Any]]:
    """The organization's key when it is a concrete key ARN (ORG-KMS-ARN reports one that is not)."""
    key = view.organization.kms_key_arn if view.organization is not None else None
    if not view.concrete(key) or not KMS_KEY_ARN.fullmatch(str(key)):
        return []
    return [(view.path("organization", "kms_key_arn"), key)]


organization_key_needs_continuous = rule(
    "ORG-VOLUME-KEY-CONTINUOUS",
    "organization",
    "organization.kms_key_arn",
    needs=("instance_groups",),
    level=WARNING,
    source=f"{CMK_DOC} (customer managed keys only with the continuous node provisioning mode)",
)(
    needs(
        "The organization's key reaches the node volumes only with node_provisioning_mode continuous.",
        _organization_key,
        lambda view: view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS,
        NODE_VOLUMES_NEED_CONTINUOUS,
        fix="set node_provisioning_mode: continuous (new clusters only) to encrypt them with the organization's key",
        show_value=False,
    )
)
