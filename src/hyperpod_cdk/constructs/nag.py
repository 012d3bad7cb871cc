"""Reasoned acknowledgements for cdk-nag (AwsSolutions) and cfn-lint findings that are by design.

cdk-nag 3 matches a finding by its exact ID, e.g. ``AwsSolutions-IAM5[Resource::<Bucket.Arn>/lifecycle/*]``,
so wildcard-resource findings are acknowledged with the resource rendered the way cdk-nag renders it.
Acknowledgements have no effect unless the app runs cdk-nag.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


RULE_ORDER = (
    "W3005",
    "the file system waits for its security group's construct, whose children are the rules FSx checks at creation "
    "(rules added later included); CDK's dependency on a construct includes the group itself, which "
    "SecurityGroupIds already implies",
)
"""cfn-lint's W3005 (a DependsOn that a Ref or GetAtt already implies) on a file system, and why it is by design."""


def lint_accepts(resource: CfnResource, finding: tuple[str, str]) -> None:
    """Tell cfn-lint to skip the rule of ``finding`` (rule id, reason) on ``resource`` alone (its ``cfn-lint``
    metadata, which plain ``cfn-lint`` honours); the reason lives with the rule id in the code."""
    found = resource.get_metadata("cfn-lint") or {}
    checks = list(found.get("config", {}).get("ignore_checks", []))
    rule, _reason = finding
    if rule not in checks:
        checks.append(rule)
    resource.add_metadata("cfn-lint", {**found, "config": {**found.get("config", {}), "ignore_checks": checks}})


def acknowledge_wildcard_resource(scope: IConstruct, resource: str, reason: str) -> None:
    """Acknowledge ``AwsSolutions-IAM5`` for one resource ARN pattern (which may contain tokens)."""
    rendered = _render(Stack.of(scope).resolve(resource))
    acknowledge(scope, f"AwsSolutions-IAM5[Resource::{rendered}]", reason)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">") if "${" in value else value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return f"<{argument}>"
        if function == "Fn::GetAtt":
            return f"<{argument[0]}.{argument[1]}>"
        if function == "Fn::Join":
            return str(argument[0]).join(_render(part) for part in argument[1])
        if function == "Fn::Sub" and isinstance(argument, str):
            return _render(argument)
        if function in ("Fn::Select", "Fn::Split"):  # cdk-nag writes other intrinsics as compact JSON
            return json.dumps(value, separators=(",", ":"))
    raise ValueError(f"cannot render {value!r} the way cdk-nag does")
