"""The scaler's permissions: what the controller's scaler may call, on its own cluster only.

The scaler runs on the controller with the controller group's execution role (docs/scaler.md), and the policy is
attached to that role alone: no login or compute group's role can add, delete or tag the cluster's nodes (each
group has its own role, docs/execution-roles.md), so a job cannot use the scaler's permissions, nor forge its
heartbeat tag, through its node's instance metadata. Its cluster's ARN exists only once the cluster does, and the
cluster needs the role before it is created; so the grant is a policy of its own, created after the cluster (it
names the cluster's ARN) and attached to the role: cluster -> role, policy -> cluster and role, no cycle.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from training_runtime.scaler.heartbeat import TAG_KEY as HEARTBEAT_TAG

SCALER_ACTIONS = (
    "sagemaker:BatchAddClusterNodes",
    "sagemaker:BatchDeleteClusterNodes",
    "sagemaker:DescribeCluster",
    "sagemaker:ListClusterNodes",
)
"""The calls the scaler makes on its cluster (Service Authorization Reference, Amazon SageMaker: each takes the
``cluster`` resource type)."""

SAR = "https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html"


class ScalerPolicy(Construct):
    """The scaler's policy on the cluster ``cluster_arn``, attached to ``role``.

    ``sagemaker:AddTags`` is limited to the heartbeat tag's key with ``aws:TagKeys``, which the Service Authorization
    Reference lists for AddTags on every resource type, the cluster included (SAR above).

    :param role: the controller group's execution role (where the scaler runs; no other group's).
    :param cluster_arn: the cluster's ARN (its ``GetAtt``), which makes the policy depend on the cluster.
    """

    def __init__(self, scope: Construct, id: str, *, role: iam.IRole, cluster_arn: str) -> None:
        super().__init__(scope, id)
        self.policy = iam.Policy(
            self,
            "Policy",
            roles=[role],
            statements=[
                iam.PolicyStatement(sid="ScaleOwnCluster", actions=list(SCALER_ACTIONS), resources=[cluster_arn]),
                iam.PolicyStatement(
                    sid="ScalerHeartbeatTag",
                    actions=["sagemaker:AddTags"],
                    resources=[cluster_arn],
                    # ForAllValues: every key the request adds is the heartbeat's (AddTags needs at least one).
                    conditions={"ForAllValues:StringEquals": {"aws:TagKeys": [HEARTBEAT_TAG]}},
                ),
            ],
        )
