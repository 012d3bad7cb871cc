"""NodeExecutionRole: what a HyperPod Slurm cluster's nodes may do, with least privilege, and ``grant_*`` for more."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from hyperpod_cdk.constructs.lifecycle import acknowledge_prefix_read
from hyperpod_cdk.constructs.nag import acknowledge, acknowledge_wildcard_resource
from hyperpod_cdk.model import InstanceGroup
from training_runtime.options import RuntimeOptions

MANAGED_INSTANCE_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"


class NodeExecutionRole(iam.Role):
    """The nodes' execution role (``ExecutionRole`` in the cluster): AWS's managed instance policy and the ENI
    permissions HyperPod needs in the cluster's subnets and security groups (a group's ``override_vpc`` ones too).

    It is an ``iam.Role`` (its logical ID is the one the function it replaces gave), so everything that takes a
    role takes it; ``grant_*`` add what the nodes may read beyond that.

    :param subnet_ids: the cluster's subnets.
    :param security_group_ids: the nodes' security groups.
    :param instance_groups: the cluster's groups (their ``override_vpc`` subnets and security groups).
    :param cluster_name: for the role's description.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        subnet_ids: Sequence[str],
        security_group_ids: Sequence[str],
        instance_groups: Sequence[InstanceGroup],
        cluster_name: str,
    ) -> None:
        super().__init__(
            scope,
            id,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"HyperPod nodes of cluster {cluster_name}",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(MANAGED_INSTANCE_POLICY)],
        )
        _node_permissions(
            self, subnet_ids=subnet_ids, security_group_ids=security_group_ids, instance_groups=instance_groups
        )

    def grant_read_bucket(self, bucket: s3.IBucket, prefix: str = "") -> iam.Grant:
        """Read of the objects under ``prefix`` (CDK's ``bucket.grant_read``: ``s3:GetObject*`` there,
        ``s3:GetBucket*``/``s3:List*`` on the bucket, and decrypt with the bucket's key if it has one).

        :param prefix: key prefix, e.g. ``datasets/``. Default: the whole bucket.
        """
        grant = bucket.grant_read(self, f"{prefix}*")
        acknowledge_prefix_read(self, bucket, prefix)
        return grant

    def grant_decrypt(self, key: kms.IKey) -> iam.Grant:
        """``kms:Decrypt`` with ``key`` (data the nodes read that ``key`` encrypts)."""
        return key.grant_decrypt(self)

    def grant_read_secret(self, secret: secretsmanager.ISecret) -> iam.Grant:
        """``secretsmanager:GetSecretValue`` and ``DescribeSecret`` on ``secret`` (and decrypt with its key)."""
        return secret.grant_read(self)


def node_execution_role(
    scope: Construct,
    *,
    subnet_ids: Sequence[str],
    security_group_ids: Sequence[str],
    instance_groups: Sequence[InstanceGroup],
    cluster_name: str,
) -> NodeExecutionRole:
    """The role ``ExecutionRole`` in ``scope`` (the cluster): a :class:`NodeExecutionRole`."""
    return NodeExecutionRole(
        scope,
        "ExecutionRole",
        subnet_ids=subnet_ids,
        security_group_ids=security_group_ids,
        instance_groups=instance_groups,
        cluster_name=cluster_name,
    )


def _node_permissions(
    role: iam.Role,
    *,
    subnet_ids: Sequence[str],
    security_group_ids: Sequence[str],
    instance_groups: Sequence[InstanceGroup],
) -> None:
    stack = Stack.of(role)

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


def grant_volume_keys(cluster: Construct, role: iam.IRole, instance_groups: Sequence[InstanceGroup]) -> None:
    """HyperPod creates grants on a group's volume key with the execution role (smcluster-cmk): it launches,
    adds and patches nodes with encrypted volumes that way."""
    keys = dict.fromkeys(g.volume_kms_key_arn for g in instance_groups if g.volume_kms_key_arn)
    for number, arn in enumerate(keys):
        key = kms.Key.from_key_arn(cluster, f"VolumeKey{number}", arn)
        key.grant(role, "kms:CreateGrant", "kms:DescribeKey")


def grant_runtime_secret(cluster: Construct, role: iam.IRole, options: RuntimeOptions) -> None:
    """Read on the external accounting database's secret for the nodes' execution role, whoever runs slurmdbd:
    the runtime reads the password at boot; with ``AccountingDatabase`` HyperPod's slurmdbd on the controller
    reads the secret (the grant is the same: one setting, one secret)."""
    arn = options.accounting.password_secret_arn
    if options.accounting.enabled and options.accounting.database == "external" and arn:
        secret = secretsmanager.Secret.from_secret_complete_arn(cluster, "AccountingDatabaseSecret", arn)
        secret.grant_read(role)
