"""NodeExecutionRole: what a HyperPod Slurm cluster's nodes may do, with least privilege, and ``grant_*`` for more.

One role per instance group (docs/execution-roles.md): the cluster gives each group its own, and only the
controller's carries the scaler's policy and the accounting database's secret. Every role has what every node
needs: AWS's managed instance policy, the ENI permissions HyperPod uses in the group's subnets (conditioned on
those subnets, M5 of the 2026-12-04 security review), and ``kms:CreateGrant`` on the group's volume key with the
three conditions AWS's HyperPod examples use (:func:`grant_volume_key`).
"""

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
from training_runtime.directory import S3_URI, Directory, secret_resource
from training_runtime.options import RuntimeOptions

MANAGED_INSTANCE_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"
ENI_ACTIONS = (
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DetachNetworkInterface",
)
"""What HyperPod does to the node ENIs it created, each on ``network-interface`` resources, whose condition keys
include ``ec2:Subnet`` (Service Authorization Reference, Amazon EC2)."""
ENI_CONDITION_KEY = "ec2:Subnet"
"""The ENI actions are allowed only on interfaces in the group's subnets: ``ArnEquals`` on this key, as AWS's IAM
examples limit EC2 actions to a VPC's resources (IAM User Guide, "Amazon EC2: Allows managing security groups
associated with a specific VPC": ``"Condition": {"ArnEquals": {"ec2:Vpc": "arn:aws:ec2:*:*:vpc/vpc-vpc-id"}}``).
The subnet is narrower than the VPC and is what ``CreateNetworkInterface`` is already limited to."""
CMK_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html"
AUTOSCALING_ROLE_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling-iam.html"
VOLUME_GRANT_OPERATIONS = (
    "CreateGrant",
    "Decrypt",
    "DescribeKey",
    "GenerateDataKeyWithoutPlaintext",
    "ReEncryptTo",
    "ReEncryptFrom",
    "RetireGrant",
)
"""The operations a grant HyperPod creates on a volume key may hold: AWS's HyperPod autoscaling role example
(AUTOSCALING_ROLE_PAGE) allows ``kms:CreateGrant`` with ``"ForAllValues:StringEquals": {"kms:GrantOperations":
["CreateGrant", "Decrypt", "DescribeKey", "GenerateDataKeyWithoutPlaintext", "ReEncryptTo", "ReEncryptFrom",
"RetireGrant"]}`` beside ``"Bool": {"kms:GrantIsForAWSResource": "true"}`` and ``kms:ViaService``."""


class NodeExecutionRole(iam.Role):
    """The execution role of one instance group's nodes (``ExecutionRole`` in the cluster): AWS's managed instance
    policy and the ENI permissions HyperPod needs in the cluster's subnets and security groups (the groups'
    ``override_vpc`` ones too), the ENI actions only on interfaces in those subnets.

    It is an ``iam.Role``, so everything that takes a role takes it; ``grant_*`` add what the nodes may read beyond
    that.

    :param subnet_ids: the cluster's subnets.
    :param security_group_ids: the nodes' security groups.
    :param instance_groups: the groups whose nodes assume this role (their ``override_vpc`` subnets and security
        groups, and the role's description).
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
        names = ", ".join(g.name for g in instance_groups)
        super().__init__(
            scope,
            id,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"HyperPod nodes of cluster {cluster_name}" + (f", instance groups {names}" if names else ""),
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
    subnet_arns = [ec2_arn("subnet", s) for s in subnets]
    # HyperPod attaches the nodes' ENIs in our subnet with our security group.
    role.add_to_policy(
        iam.PolicyStatement(
            sid="CreateNodeInterfaces",
            actions=["ec2:CreateNetworkInterface"],
            resources=[enis, *subnet_arns, *(ec2_arn("security-group", g) for g in groups)],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="ManageNodeInterfaces",
            actions=list(ENI_ACTIONS),
            resources=[enis],
            conditions={"ArnEquals": {ENI_CONDITION_KEY: subnet_arns}},
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


def volume_key_conditions(scope: Construct) -> dict[str, dict[str, object]]:
    """The conditions on ``kms:CreateGrant`` for a volume key: the grant is for an AWS resource, made through
    SageMaker in this Region, and holds only the volumes' operations. AWS's key policy for HyperPod's customer
    managed keys (CMK_PAGE) allows the execution role ``kms:CreateGrant`` with ``"StringEquals": {"kms:ViaService":
    "sagemaker.us-east-1.amazonaws.com"}, "Bool": {"kms:GrantIsForAWSResource": "true"}``; its autoscaling role
    example adds ``kms:GrantOperations`` (:data:`VOLUME_GRANT_OPERATIONS`)."""
    return {
        "StringEquals": {"kms:ViaService": via_sagemaker(scope)},
        "Bool": {"kms:GrantIsForAWSResource": "true"},
        "ForAllValues:StringEquals": {"kms:GrantOperations": list(VOLUME_GRANT_OPERATIONS)},
    }


def via_sagemaker(scope: Construct) -> str:
    """``sagemaker.<region>.amazonaws.com``: the ``kms:ViaService`` of a request SageMaker makes in the stack's
    Region (CMK_PAGE's key policy conditions both CreateGrant and DescribeKey on it)."""
    return f"sagemaker.{Stack.of(scope).region}.amazonaws.com"


def grant_volume_key(role: iam.IGrantable, key_arn: str) -> iam.Grant:
    """What HyperPod needs of a volume key as the execution role (CMK_PAGE: "The ``kms:CreateGrant`` permission
    allows HyperPod to take the following actions using permissions to your KMS key: Scaling out your instance
    count (UpdateCluster operations), Adding cluster nodes (BatchAddClusterNodes operations), Patching software
    (UpdateClusterSoftware operations)"): ``kms:CreateGrant`` with :func:`volume_key_conditions`, and
    ``kms:DescribeKey`` through SageMaker only, both on the one key."""
    scope = role if isinstance(role, Construct) else None
    if scope is None:
        raise TypeError("grant_volume_key: the role must be a construct (its stack gives the Region)")
    grant = iam.Grant.add_to_principal(
        grantee=role,
        actions=["kms:CreateGrant"],
        resource_arns=[key_arn],
        conditions=volume_key_conditions(scope),
    )
    return grant.combine(
        iam.Grant.add_to_principal(
            grantee=role,
            actions=["kms:DescribeKey"],
            resource_arns=[key_arn],
            conditions={"StringEquals": {"kms:ViaService": via_sagemaker(scope)}},
        )
    )


def grant_volume_keys(roles: dict[str, iam.IRole], instance_groups: Sequence[InstanceGroup]) -> None:
    """HyperPod creates grants on a group's volume key with the group's execution role (smcluster-cmk): it
    launches, adds and patches nodes with encrypted volumes that way. Each role gets its own groups' keys only."""
    for group in instance_groups:
        if group.volume_kms_key_arn:
            grant_volume_key(roles[group.name], group.volume_kms_key_arn)


def grant_runtime_secret(cluster: Construct, role: iam.IRole, options: RuntimeOptions) -> None:
    """Read on the external accounting database's secret for the controller's execution role, whoever runs
    slurmdbd there: the runtime's accounting step reads the password at boot on the controller; with
    ``AccountingDatabase`` HyperPod's slurmdbd on the controller reads the secret (the grant is the same: one
    setting, one secret). No other group's role gets it."""
    arn = options.accounting.password_secret_arn
    if options.accounting.enabled and options.accounting.database == "external" and arn:
        secret = secretsmanager.Secret.from_secret_complete_arn(cluster, "AccountingDatabaseSecret", arn)
        secret.grant_read(role)


def grant_directory_secret(roles: Sequence[iam.IRole], directory: Directory | None) -> None:
    """Every group's role may read the directory's bind password (every node runs SSSD) and nothing else of Secrets
    Manager: ``secretsmanager:GetSecretValue`` on that one secret; ``kms:Decrypt`` on its customer-managed key only
    through Secrets Manager (``kms:ViaService``) when the config names one; ``s3:GetObject`` on the CA certificate's
    object when it lives in S3."""
    if directory is None:
        return
    arn = directory.bind_password_secret_arn
    partition, region = arn.split(":")[1], directory.secret_region
    for role in roles:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadDirectoryBindPassword",
                actions=["secretsmanager:GetSecretValue"],
                resources=[secret_resource(arn)],
            )
        )
        if directory.bind_password_kms_key_arn:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="DecryptDirectoryBindPassword",
                    actions=["kms:Decrypt"],
                    resources=[directory.bind_password_kms_key_arn],
                    conditions={"StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}},
                )
            )
        ca = S3_URI.fullmatch(directory.ca_certificate or "")
        if ca is not None:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="ReadDirectoryCaCertificate",
                    actions=["s3:GetObject"],
                    resources=[f"arn:{partition}:s3:::{ca.group(1)}/{ca.group(2)}"],
                )
            )
