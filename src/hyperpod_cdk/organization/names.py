"""A name prefix on every physical name a stack sets, checked against each service's limit."""

from __future__ import annotations

import re
from dataclasses import dataclass

import jsii
from aws_cdk import Annotations, CfnResource, IAspect, Token
from constructs import IConstruct

from hyperpod_cdk.model import prefixed
from hyperpod_cdk.rules.repositories import bucket_name_problem
from training_runtime.groups import MAX_NAME_LENGTH, NAME_PATTERN


@dataclass(frozen=True)
class NamedType:
    """Where a resource type keeps its physical name, and what the service allows."""

    attribute: str
    """The L1 class's Python attribute (``CfnRole.role_name``)."""
    limit: int
    pattern: re.Pattern[str] | None = None
    """A stricter shape the whole name must have; None: any characters the prefix rules allow."""


NAMED_TYPES: dict[str, NamedType] = {
    "AWS::IAM::Role": NamedType("role_name", 64),
    "AWS::IAM::User": NamedType("user_name", 64),
    "AWS::IAM::ManagedPolicy": NamedType("managed_policy_name", 128),
    "AWS::IAM::InstanceProfile": NamedType("instance_profile_name", 128),
    "AWS::Logs::LogGroup": NamedType("log_group_name", 512),
    "AWS::S3::Bucket": NamedType("bucket_name", 63),
    "AWS::Lambda::Function": NamedType("function_name", 64),
    "AWS::EC2::SecurityGroup": NamedType("group_name", 255),
    "AWS::SageMaker::Cluster": NamedType("cluster_name", MAX_NAME_LENGTH, NAME_PATTERN),
}
"""The named resource types the prefix reaches (their L1 classes; CDK's unnamed internals need none)."""
SERVICE_OWNED_LOG_GROUPS = "/aws/"
"""Log groups a service names itself (``/aws/lambda/<function>``): renaming them breaks the link."""


def name_problem(resource_type: str, name: str) -> str:
    """What is wrong with a prefixed physical name of ``resource_type``, or ''."""
    kind = NAMED_TYPES[resource_type]
    if resource_type == "AWS::S3::Bucket":
        return bucket_name_problem(name)
    if len(name) > kind.limit:
        return f"{len(name)} characters; {resource_type} allows {kind.limit}"
    if kind.pattern is not None and not kind.pattern.fullmatch(name):
        return f"not a valid {resource_type} name"
    return ""


@jsii.implements(IAspect)
class NamePrefix:
    """Prefixes every concrete physical name of the types in :data:`NAMED_TYPES`; an error (never a silent
    cut) names the resource whose prefixed name breaks its service's limit. Tokens are left alone."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def visit(self, node: IConstruct) -> None:
        if not CfnResource.is_cfn_resource(node):
            return
        kind = NAMED_TYPES.get(node.cfn_resource_type)  # type: ignore[attr-defined]
        name = getattr(node, kind.attribute, None) if kind is not None else None
        if kind is None or not isinstance(name, str) or Token.is_unresolved(name):
            return
        if name.startswith(SERVICE_OWNED_LOG_GROUPS):
            return
        new = prefixed(self.prefix, name)
        problem = name_problem(node.cfn_resource_type, new)  # type: ignore[attr-defined]
        if problem:
            Annotations.of(node).add_error(
                f"{node.node.path}: the organization's name prefix makes the name {new!r}: {problem}. Fix: "
                f"shorten {name!r} (the prefix {self.prefix!r} takes {len(self.prefix)} characters)"
            )
            return
        setattr(node, kind.attribute, new)
