"""Who the stack's resources belong to: a permission boundary on every IAM role, and required tags."""

from __future__ import annotations

from collections.abc import Mapping

import jsii
from aws_cdk import Annotations, Aspects, CfnResource, IAspect, TagManager
from constructs import IConstruct

BOUNDED_TYPES = ("AWS::IAM::Role", "AWS::IAM::User")
"""Resource types that take a ``PermissionsBoundary``."""


@jsii.implements(IAspect)
class PermissionBoundary:
    """Sets ``PermissionsBoundary`` on every IAM role and user, by resource type: CDK's own roles too (a
    BucketDeployment's handler role, and custom resource providers' roles, which CDK writes as plain
    ``CfnResource`` objects of type ``AWS::IAM::Role``)."""

    def __init__(self, policy_arn: str) -> None:
        self.policy_arn = policy_arn

    def visit(self, node: IConstruct) -> None:
        if CfnResource.is_cfn_resource(node) and node.cfn_resource_type in BOUNDED_TYPES:  # type: ignore[attr-defined]
            node.add_property_override("PermissionsBoundary", self.policy_arn)  # type: ignore[attr-defined]


def boundary_of(scope: IConstruct) -> str | None:
    """The permission boundary ``OrganizationRules`` puts on the roles under ``scope`` (set on it or the nearest scope
    above it), or None: what a role that creates those roles must require (``iam:PermissionsBoundary``)."""
    node: IConstruct | None = scope
    while node is not None:
        for aspect in Aspects.of(node).all:
            if isinstance(aspect, PermissionBoundary):
                return aspect.policy_arn
        node = node.node.scope
    return None


@jsii.implements(IAspect)
class RequiredTagsCheck:
    """An error on every taggable resource that lacks a required tag key (runs after the tags are applied)."""

    def __init__(self, keys: Mapping[str, str | None]) -> None:
        self.keys = tuple(keys)

    def visit(self, node: IConstruct) -> None:
        if not (CfnResource.is_cfn_resource(node) and TagManager.is_taggable(node)):
            return
        present = node.tags.tag_values()  # type: ignore[attr-defined]
        missing = [key for key in self.keys if key not in present]
        if missing:
            Annotations.of(node).add_error(
                f"{node.node.path}: the organization requires tag(s) {', '.join(map(repr, missing))} on every "
                "taggable resource and none has a value here. Fix: give the value in the organization's "
                "required_tags, or add the tag with Tags.of(scope).add(key, value) (config: `tags`)"
            )
