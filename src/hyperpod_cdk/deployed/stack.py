"""What is deployed for a config: the stack's template and parameters (CloudFormation DescribeStacks and
GetTemplate), the parameters file the construct uploaded next to the lifecycle scripts (S3 GetObject at the
stack's ``LifecycleBucket``/``LifecyclePrefix`` outputs), and the cluster as HyperPod runs it (DescribeCluster,
ListClusterNodes). ``hyperpod-cdk plan`` reads it once and compares it with the new config.

Sources (API references): DescribeStacks
(https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html), GetTemplate
(https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_GetTemplate.html), DescribeCluster
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeCluster.html), ListClusterNodes
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ListClusterNodes.html).

No ``aws_cdk`` import; the clients are the caller's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from hyperpod_cdk.core.stack_outputs import LIFECYCLE_BUCKET, LIFECYCLE_PREFIX

CLUSTER_TYPE = "AWS::SageMaker::Cluster"
LUSTRE_TYPE = "AWS::FSx::FileSystem"


@dataclass(frozen=True)
class Deployed:
    """The deployed stack and cluster of one config; each part None where it does not exist (or was not read)."""

    stack_name: str
    cluster_name: str
    template: Mapping[str, Any] | None = None
    """The stack's template as deployed (GetTemplate, stage Original)."""
    stack_parameters: Mapping[str, str] = field(default_factory=dict)
    """The stack's parameter values (DescribeStacks): what a ``Ref`` to a launch choice was deployed with."""
    parameters_file: Mapping[str, Any] | None = None
    """The parameters file the nodes read (the construct's upload)."""
    described: Mapping[str, Any] | None = None
    """DescribeCluster's answer."""
    nodes: Mapping[str, int] = field(default_factory=dict)
    """Nodes per instance group (ListClusterNodes)."""
    notes: tuple[str, ...] = ()
    """What could not be read, and why."""
    region: str = ""
    """The Region it was read in."""

    @property
    def exists(self) -> bool:
        return self.template is not None or self.described is not None

    def resource(self, resource_type: str) -> Mapping[str, Any] | None:
        """The first resource of ``resource_type`` in the template (its whole entry), or None."""
        for resource in ((self.template or {}).get("Resources") or {}).values():
            if isinstance(resource, dict) and resource.get("Type") == resource_type:
                return resource
        return None

    def cluster_properties(self) -> Mapping[str, Any]:
        """The template's ``AWS::SageMaker::Cluster`` properties ({} without one)."""
        found = self.resource(CLUSTER_TYPE)
        return (found or {}).get("Properties") or {}

    def template_groups(self) -> dict[str, Mapping[str, Any]]:
        """The template's instance groups by name."""
        groups = self.cluster_properties().get("InstanceGroups") or []
        return {str(g.get("InstanceGroupName")): g for g in groups if isinstance(g, dict)}

    def live_groups(self) -> dict[str, Mapping[str, Any]]:
        """DescribeCluster's instance groups by name."""
        groups = (self.described or {}).get("InstanceGroups") or []
        return {str(g.get("InstanceGroupName")): g for g in groups}

    def value(self, raw: Any) -> Any:
        """A template value as deployed: a ``Ref`` to a stack parameter is its deployed value (numbers as int);
        any other intrinsic (GetAtt, Join, a resource's Ref) is None, unknown here."""
        if isinstance(raw, dict):
            if set(raw) == {"Ref"} and raw["Ref"] in self.stack_parameters:
                text = self.stack_parameters[raw["Ref"]]
                return int(text) if text.lstrip("-").isdigit() else text
            return None
        if isinstance(raw, list):
            return [self.value(v) for v in raw]
        return raw


def _not_found(error: Exception) -> bool:
    from hyperpod_cdk.aws.clients import error_code, error_message

    code, message = error_code(error), error_message(error).lower()
    return code in ("ResourceNotFound", "ResourceNotFoundException", "NoSuchKey", "404") or (
        code in ("ValidationException", "ValidationError") and ("not find" in message or "does not exist" in message)
    )


def template_body(body: Any) -> Mapping[str, Any]:
    """GetTemplate's TemplateBody: botocore decodes a JSON body into a dict; a YAML one stays text."""
    if isinstance(body, Mapping):
        return body
    try:
        decoded = json.loads(body)
        return decoded if isinstance(decoded, dict) else {}
    except ValueError:
        loaded = yaml.safe_load(body)
        return loaded if isinstance(loaded, dict) else {}


def parameters_of(stack: Mapping[str, Any]) -> dict[str, str]:
    """A DescribeStacks stack's parameters as the stack resolved them (an SSM parameter's value, not its name)."""
    return {
        str(p["ParameterKey"]): str(p.get("ResolvedValue", p.get("ParameterValue", "")))
        for p in stack.get("Parameters") or []
    }


def read_deployed(aws: Any, stack_name: str, cluster_name: str, file_names: Sequence[str]) -> Deployed:
    """Everything :class:`Deployed` holds, read with ``aws`` (:class:`hyperpod_cdk.aws.clients.Aws`). A stack or
    cluster that does not exist is None; any other error propagates (the plan must not guess). ``file_names``:
    the parameters file's possible names, the new config's mode's first (the name depends on the mode)."""
    from botocore.exceptions import ClientError

    notes: list[str] = []
    template: Mapping[str, Any] | None = None
    stack_parameters: dict[str, str] = {}
    parameters_file: Mapping[str, Any] | None = None
    cloudformation = aws.client("cloudformation")
    try:
        stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    except ClientError as error:
        if not _not_found(error):
            raise
        stack = None
        notes.append(f"no CloudFormation stack {stack_name!r}: the old values are the cluster's alone")
    if stack is not None:
        stack_parameters = parameters_of(stack)
        body = cloudformation.get_template(StackName=stack_name, TemplateStage="Original")["TemplateBody"]
        template = template_body(body)
        outputs = {str(o["OutputKey"]): str(o.get("OutputValue", "")) for o in stack.get("Outputs") or []}
        bucket, prefix = outputs.get(LIFECYCLE_BUCKET), outputs.get(LIFECYCLE_PREFIX, "")
        if bucket:
            parameters_file = _parameters_file(aws.client("s3"), bucket, prefix, file_names)
            if parameters_file is None:
                notes.append(
                    f"no parameters file under s3://{bucket}/{prefix} ({', '.join(file_names)}): the mode and "
                    "partitions are not compared"
                )
        else:
            notes.append(f"stack {stack_name!r} has no {LIFECYCLE_BUCKET} output: the parameters file is not read")
    described: Mapping[str, Any] | None = None
    nodes: Counter[str] = Counter()
    try:
        described = aws.sagemaker.describe_cluster(ClusterName=cluster_name)
    except ClientError as error:
        if not _not_found(error):
            raise
        notes.append(f"no HyperPod cluster {cluster_name!r}: no drift to show")
    if described is not None:
        for page in aws.sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster_name):
            nodes.update(str(s.get("InstanceGroupName")) for s in page.get("ClusterNodeSummaries", []))
    return Deployed(
        stack_name=stack_name,
        cluster_name=cluster_name,
        template=template,
        stack_parameters=stack_parameters,
        parameters_file=parameters_file,
        described=described,
        nodes=dict(nodes),
        notes=tuple(notes),
        region=str(aws.region),
    )


def _parameters_file(s3: Any, bucket: str, prefix: str, file_names: Sequence[str]) -> Mapping[str, Any] | None:
    from botocore.exceptions import ClientError

    for name in file_names:
        try:
            found = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}{name}")["Body"].read())
        except ClientError as error:
            if not _not_found(error):
                raise
            continue
        return found if isinstance(found, dict) else None
    return None
