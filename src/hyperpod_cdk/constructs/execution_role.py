"""The nodes' execution role: what a HyperPod Slurm cluster's nodes may do, with least privilege."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_cdk.constructs.nag import acknowledge, acknowledge_wildcard_resource
from hyperpod_cdk.model import InstanceGroup

MANAGED_INSTANCE_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"


def node_execution_role(
    scope: Construct,
    *,
    subnet_ids: Sequence[str],
    security_group_ids: Sequence[str],
    instance_groups: Sequence[InstanceGroup],
    cluster_name: str,
) -> iam.Role:
    """The role ``ExecutionRole`` in ``scope`` (the cluster): AWS's managed instance policy and the ENI permissions
    HyperPod needs in the cluster's subnets and security groups (a group's ``override_vpc`` ones too)."""
    role = iam.Role(
        scope,
        "ExecutionRole",
        assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
        description=f"HyperPod nodes of cluster {cluster_name}",
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(MANAGED_INSTANCE_POLICY)],
    )
    stack = Stack.of(scope)

    def ec2_arn(resource: str, name: str) -> str:
        return stack.format_arn(service="ec2", resource=resource, resource_name=name)

    enis = ec2_arn("network-interface", "*")
    # A group with its own subnets and security groups (override_vpc) attaches its ENIs there.
    overrides = [g.override_vpc for g in instance_groups if g.override_vpc is not None]
    subnets = dict.fromkeys([*subnet_ids, *(s for o in overrides for s in o.subnet_ids)])
    groups = dict.fromkeys([*security_group_ids, *(g for o in overrides for g in o.security_group_ids)])
    # HyperPod attaches the nodes' ENIs in our subnet with our security group.
    role.add_to_policy(
        iam.PolicyStatement(
            sid="CreateNodeInterfaces",
            actions=["ec2:CreateNetworkInterface"],
            resources=[
                enis,
                *(ec2_arn("subnet", s) for s in subnets),
                *(ec2_arn("security-group", g) for g in groups),
            ],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="ManageNodeInterfaces",
            actions=[
                "ec2:CreateNetworkInterfacePermission",
                "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission",
                "ec2:DetachNetworkInterface",
            ],
            resources=[enis],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="TagNodeInterfaces",
            actions=["ec2:CreateTags"],
            resources=[enis],
            conditions={"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}},
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="DescribeNetwork",
            actions=[
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeVpcs",
            ],
            resources=["*"],
        )
    )
    reasons = {
        f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{MANAGED_INSTANCE_POLICY}]": (
            "HyperPod's developer guide requires this AWS managed policy on Slurm cluster nodes"
        ),
        "AwsSolutions-IAM5[Resource::*]": "EC2 Describe* actions support no resource-level permissions",
    }
    for finding, reason in reasons.items():
        acknowledge(role, finding, reason)
    # Rendered as cdk-nag renders it: a stack with an environment names its Region and account.
    acknowledge_wildcard_resource(role, enis, "HyperPod creates the node ENIs; their IDs are unknown until then")
    return role
