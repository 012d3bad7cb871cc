"""The instance count a template gives a scaled group, so a stack update and the scaler agree.

The scaler changes a group's count with ``BatchAddClusterNodes`` and ``BatchDeleteClusterNodes``; CloudFormation
still holds the ``InstanceCount`` of the last template. Whenever an update changes anything in the
``AWS::SageMaker::Cluster`` resource, CloudFormation sends the template's instance groups to HyperPod
(``UpdateCluster``), and an ``InstanceCount`` below the group's count makes HyperPod terminate nodes it "randomly
chooses" (https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-scale-down.html), busy ones included; one above
it launches nodes nobody asked for. So the template carries the deployed group's ``TargetCount``
(:func:`template_counts`), read at synth by :func:`deployed_counts`: the update then changes no count. Design,
sources and what AWS leaves unsaid: docs/scaler-cloudformation.md.

No ``aws_cdk`` import; boto3 is used only through the client the caller passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hyperpod_cdk.model import InstanceGroup
from training_runtime.problems import Problem

COUNTS_CONTEXT = "scaler_counts"
"""The app's context key (``-c scaler_counts=config``): synthesize with the config's counts instead of the
deployed cluster's, for a template that will not update a running cluster (offline synth, a first look)."""
CONFIG_COUNTS = "config"


def template_counts(
    groups: Sequence[InstanceGroup], deployed: Mapping[str, int] | None, where: str = "instance_groups"
) -> tuple[dict[str, int], list[Problem]]:
    """The ``InstanceCount`` of each scaled group in a template that updates a cluster whose groups have the
    ``deployed`` counts (None: no cluster yet), and the problems that forbid such a template.

    * no cluster, or a group it does not have yet: the config's ``count`` (the group's size at creation);
    * the deployed count within ``scaling.min``..``scaling.max``: that count, so the update changes nothing;
    * below ``min`` (min raised): ``min``, HyperPod launches the difference and removes no node;
    * above ``max`` (max lowered): a problem, since HyperPod would terminate nodes of its choosing, busy or not.
    """
    counts: dict[str, int] = {}
    problems: list[Problem] = []
    for index, group in enumerate(groups):
        scaling = group.scaling
        if scaling is None:
            continue
        live = None if deployed is None else deployed.get(group.name)
        if live is None:
            counts[group.name] = group.count
        elif live > scaling.max:
            problems.append(
                Problem(
                    f"{where}[{index}].scaling.max",
                    f"below the deployed group's {live} instances: this deploy would send InstanceCount {scaling.max} "
                    "and HyperPod would terminate the nodes it chooses, jobs or not",
                    got=scaling.max,
                    fix=f"keep max at {live} or more until the scaler has shrunk the group (or drain and delete "
                    "nodes first: hyperpod-cdk scale), then lower it",
                    rule="GRP-SCALING-DEPLOYED",
                )
            )
        else:
            counts[group.name] = max(live, scaling.min)
    return counts, problems


def deployed_counts(sagemaker: Any, cluster_name: str) -> dict[str, int] | None:
    """Each group's ``TargetCount`` (else ``CurrentCount``) in the deployed cluster, from ``DescribeCluster``;
    None when there is no such cluster (the service answers ResourceNotFound, some endpoints a
    ValidationException "Could not find"). Any other error propagates: a synth must not guess."""
    from botocore.exceptions import ClientError

    from hyperpod_cdk.aws.clients import error_code, error_message

    try:
        described = sagemaker.describe_cluster(ClusterName=cluster_name)
    except ClientError as error:
        code, message = error_code(error), error_message(error)
        if code in ("ResourceNotFound", "ResourceNotFoundException") or (
            code in ("ValidationException", "ValidationError") and "not find" in message.lower()
        ):
            return None
        raise
    return counts_of(described)


def counts_of(described: Mapping[str, Any]) -> dict[str, int]:
    """A ``DescribeCluster`` answer's count per group: ``TargetCount`` (what HyperPod is bringing the group to,
    the scaler's last call included), else ``CurrentCount``."""
    counts: dict[str, int] = {}
    for group in described.get("InstanceGroups", []):
        count = group.get("TargetCount", group.get("CurrentCount"))
        if count is not None:
            counts[str(group["InstanceGroupName"])] = int(count)
    return counts
