"""One instance group's running nodes as the IP targets of a load balancer's target group: the function that keeps
them registered (:mod:`hyperpod_cdk.rest.targets`), its permissions and the two rules that run it (HyperPod's events
of the cluster, and every five minutes as a missed event's backstop).

HyperPod's nodes are not the account's EC2 instances, so a target group cannot name them by instance ID: it is of
type ``ip`` and this function registers each ``Running`` node's ``PrivatePrimaryIp``. The REST API registers the
controller group (:class:`~hyperpod_cdk.constructs.rest_api.SlurmRestApi`), the login pool the login group
(:class:`~hyperpod_cdk.constructs.login_pool.LoginPool`); both call :func:`register_group_nodes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_cdk.constructs.hyperpod_events import CLUSTER_EVENT, CLUSTER_STATE_CHANGE, EVENT_SOURCE, NODE_HEALTH_EVENT
from hyperpod_cdk.constructs.nag import acknowledge
from hyperpod_cdk.constructs.rest_functions import RestFunction
from hyperpod_cdk.model import InstanceGroup
from hyperpod_cdk.rest.targets import handler as targets

SYNC_EVERY = Duration.minutes(5)


class ServedCluster(ec2.IConnectable, Protocol):
    """What a load balancer in front of the cluster's nodes needs of it (``HyperPodCluster`` is one)."""

    @property
    def instance_groups(self) -> Sequence[InstanceGroup]: ...

    @property
    def cluster_name(self) -> str: ...

    @property
    def cluster_arn(self) -> str: ...


def register_group_nodes(
    scope: Construct,
    *,
    cluster: ServedCluster,
    group: str,
    target_group: elbv2.INetworkTargetGroup,
    port: int,
    nodes: str,
    service: str,
    sid: str,
) -> RestFunction:
    """Keep ``group``'s running nodes registered by IP on ``port`` in ``target_group``: the function ``Registration``
    and the rules ``ClusterChanges`` and ``Every5Minutes``, in ``scope``. ``nodes`` (the controller, the login
    nodes) and ``service`` (the Slurm REST API, the login pool) word the descriptions; ``sid`` names the policy
    statements (``<sid>Nodes``, ``Register<sid>``)."""
    registration = RestFunction(
        scope,
        "Registration",
        folder="targets",
        description=f"Registers the HyperPod {nodes}' addresses with the {service}'s target group",
        environment={
            targets.CLUSTER_ENV: cluster.cluster_name,
            targets.GROUP_ENV: group,
            targets.TARGET_GROUP_ENV: target_group.target_group_arn,
            targets.PORT_ENV: str(port),
        },
        timeout_s=60,
    )
    role = registration.role
    role.add_to_policy(
        iam.PolicyStatement(
            sid=f"{sid}Nodes",
            actions=["sagemaker:ListClusterNodes", "sagemaker:DescribeClusterNode"],
            resources=[cluster.cluster_arn],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid=f"Register{sid}",
            actions=["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
            resources=[target_group.target_group_arn],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(sid="ReadTargets", actions=["elasticloadbalancing:DescribeTargetHealth"], resources=["*"])
    )
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::*]",
        "elasticloadbalancing:DescribeTargetHealth supports no resource-level permission (Service Authorization "
        "Reference, Elastic Load Balancing V2: no resource type), so it is granted on *; it only reads",
    )
    function = events_targets.LambdaFunction(registration.function)
    events.Rule(
        scope,
        "ClusterChanges",
        description=f"The cluster's nodes changed: re-register the {nodes} with the {service}'s target group",
        event_pattern=events.EventPattern(
            source=[EVENT_SOURCE],
            detail_type=[CLUSTER_STATE_CHANGE, NODE_HEALTH_EVENT, CLUSTER_EVENT],
            resources=[cluster.cluster_arn],
        ),
        targets=[function],
    )
    events.Rule(
        scope,
        "Every5Minutes",
        description=f"Re-register the {nodes} with the {service}'s target group (a missed event's backstop)",
        schedule=events.Schedule.rate(SYNC_EVERY),
        targets=[function],
    )
    return registration
