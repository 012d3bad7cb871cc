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

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.core.errors import ConfigurationError, raise_if_any
from hyperpod_cdk.model import InstanceGroup
from training_runtime.problems import Problem

if TYPE_CHECKING:
    from hyperpod_cdk.core.deployment import Deployment

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


def at_template_counts(
    groups: Sequence[InstanceGroup], deployed: Mapping[str, int] | None, subject: str
) -> list[InstanceGroup]:
    """``groups`` with each scaled group's count as :func:`template_counts` decides; ConfigurationError (about
    ``subject``) when a template may not be built."""
    counts, problems = template_counts(groups, deployed)
    raise_if_any(subject, problems)
    return [dataclasses.replace(g, count=counts[g.name]) if g.name in counts else g for g in groups]


def describe_deployed(sagemaker: Any, cluster_name: str) -> Mapping[str, Any] | None:
    """``DescribeCluster``'s answer for the deployed cluster; None when there is no such cluster (the service
    answers ResourceNotFound, some endpoints a ValidationException "Could not find"). Any other error propagates:
    a synth must not guess."""
    from botocore.exceptions import ClientError

    from hyperpod_cdk.aws.clients import error_code, error_message

    try:
        described: Mapping[str, Any] = sagemaker.describe_cluster(ClusterName=cluster_name)
    except ClientError as error:
        code, message = error_code(error), error_message(error)
        if code in ("ResourceNotFound", "ResourceNotFoundException") or (
            code in ("ValidationException", "ValidationError") and "not find" in message.lower()
        ):
            return None
        raise
    return described


def deployed_counts(sagemaker: Any, cluster_name: str) -> dict[str, int] | None:
    """Each group's ``TargetCount`` (else ``CurrentCount``) in the deployed cluster (:func:`describe_deployed`);
    None when there is no such cluster."""
    described = describe_deployed(sagemaker, cluster_name)
    return None if described is None else counts_of(described)


def counts_of(described: Mapping[str, Any]) -> dict[str, int]:
    """A ``DescribeCluster`` answer's count per group: ``TargetCount`` (what HyperPod is bringing the group to,
    the scaler's last call included), else ``CurrentCount``."""
    counts: dict[str, int] = {}
    for group in described.get("InstanceGroups", []):
        count = group.get("TargetCount", group.get("CurrentCount"))
        if count is not None:
            counts[str(group["InstanceGroupName"])] = int(count)
    return counts


def sagemaker_client() -> Any:
    """A SageMaker client in the Region the CDK CLI gives the app (``CDK_DEFAULT_REGION``), else the standard AWS
    settings' (``AWS_REGION``, the profile)."""
    from hyperpod_cdk.aws.session import make_session

    return make_session(None, os.environ.get("CDK_DEFAULT_REGION")).client("sagemaker")


def counts_for_synth(
    deployed: Deployment, context: object, client: Callable[[], Any] = sagemaker_client
) -> dict[str, int] | None:
    """What an app passes as ``deployed_counts`` for a deployment (:func:`hyperpod_cdk.core.deployment.deployment`):
    None without a scaled group (no AWS call: such a synth needs no credentials) or with the context value
    ``config`` (:data:`COUNTS_CONTEXT`); else the deployed cluster's counts (None when it does not exist yet). A
    failed look-up is a :class:`ConfigurationError`: a template with guessed counts could terminate busy nodes."""
    if not any(g.scaling is not None for g in deployed.config.instance_groups) or context == CONFIG_COUNTS:
        return None
    name = deployed.cluster_name
    try:
        return deployed_counts(client(), name)
    except Exception as error:  # any failure: credentials, access, network; the message names it
        raise ConfigurationError(
            "cluster configuration",
            [
                Problem(
                    "instance_groups[*].scaling",
                    f"a scaled group's template count is the deployed cluster's, and DescribeCluster on {name!r} "
                    f"failed: {type(error).__name__}: {error}",
                    fix="synthesize with credentials that may call sagemaker:DescribeCluster in the cluster's Region, "
                    f"or pass -c {COUNTS_CONTEXT}={CONFIG_COUNTS} for a template that will not update a running "
                    "cluster",
                    rule="GRP-SCALING-DEPLOYED",
                )
            ],
        ) from None
