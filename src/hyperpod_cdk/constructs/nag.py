"""Reasoned acknowledgements for cdk-nag (AwsSolutions) findings that are by design, and explanations
of IaC-scanner findings carried in the template (:func:`explain`).

cdk-nag 3 matches a finding by its exact ID, e.g. ``AwsSolutions-IAM5[Resource::<Bucket.Arn>/lifecycle/*]``,
so wildcard-resource findings are acknowledged with the resource rendered the way cdk-nag renders it.
Acknowledgements have no effect unless the app runs cdk-nag.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=finding, reason=reason))


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
    raise ValueError(f"cannot render {value!r} the way cdk-nag does")


SCANNER_METADATA_KEY = "checkov"
"""Where a resource's explained findings live in its CloudFormation ``Metadata`` (checkov's own format:
``checkov: {skip: [{id, comment}]}``, which checkov honours and a reviewer reads in the template)."""


def explain(resource: CfnResource, finding_id: str, reason: str) -> None:
    """Record in ``resource``'s template metadata why a scanner finding is by design.

    Unlike :func:`acknowledge` (cdk-nag, at synth), the reason travels in the published template, where
    a platform team's IaC scanner and its security reviewer see it. Repeated calls add findings.
    """
    metadata = resource.get_metadata(SCANNER_METADATA_KEY) or {}
    skips = [s for s in metadata.get("skip", []) if s.get("id") != finding_id]
    skips.append({"id": finding_id, "comment": reason})
    resource.add_metadata(SCANNER_METADATA_KEY, {**metadata, "skip": skips})
