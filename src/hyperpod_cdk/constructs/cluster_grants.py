"""ClusterBase: what a HyperPod cluster, owned or imported, lets a principal do with the operator CLI (``grant_*``).

Each grant is the union of its commands' rows in :mod:`hyperpod_cdk.core.operator_permissions` (the table
docs/operations.md "Permissions" is generated from), on this cluster's resources only: its ARN, its log group, and
the session documents the commands use. tests/test_cluster_grants.py runs the commands against moto and checks
both ways that every call is allowed and every granted action is called.
"""

from __future__ import annotations

import warnings

from aws_cdk import ArnFormat, Fn, Stack, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_cdk.constructs.nag import acknowledge_wildcard_resource
from hyperpod_cdk.core.operator_permissions import Resource, actions, documents
from hyperpod_cdk.model import cluster_log_group

LOG_GROUP_REASON = (
    "the cluster's own log group in the ARN form CloudWatch Logs' API reference tells IAM policies to use (trailing :*)"
)


class ClusterBase(Construct):
    """A HyperPod Slurm cluster that principals may be granted the operator CLI's commands on.

    Subclasses set :attr:`cluster_name` and give :attr:`cluster_arn`. The grants add statements to the grantee's
    policy (``iam.Grant.add_to_principal``), as aws-cdk-lib's ``grant*`` methods do, and return the
    ``iam.Grant``.
    """

    cluster_name: str
    """The cluster's name (may be a token)."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)

    @property
    def cluster_arn(self) -> str:
        """``arn:<partition>:sagemaker:<region>:<account>:cluster/<cluster-id>``."""
        raise NotImplementedError

    @property
    def cluster_id(self) -> str:
        """The 12-character ID at the end of the cluster's ARN (what SSM targets and the log group use)."""
        arn = self.cluster_arn
        if not Token.is_unresolved(arn):
            return arn.rsplit("/", 1)[-1]
        return Fn.select(1, Fn.split("cluster/", arn))

    @property
    def ssm_target_prefix(self) -> str:
        """``aws ssm start-session --target <prefix><group>-<instance-id>`` reaches a node."""
        return Fn.join("", ["sagemaker-cluster:", self.cluster_id, "_"])

    @property
    def log_group_name(self) -> str:
        """The CloudWatch Logs group HyperPod writes the nodes' lifecycle and health-agent output to."""
        return cluster_log_group(self.cluster_name, self.cluster_id)

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """What ``status``, ``wait``, ``events`` and ``logs`` call: DescribeCluster, ListClusterNodes,
        ListClusterEvents, ListClusterOperations and ListTags on the cluster, ``logs:FilterLogEvents`` on its log
        group."""
        return self._grant(grantee, "describe")

    def grant_operate(self, grantee: iam.IGrantable) -> iam.Grant:
        """:meth:`grant_describe` and what ``reboot``, ``replace`` and ``delete`` call:
        BatchRebootClusterNodes, BatchReplaceClusterNodes and BatchDeleteClusterNodes on the cluster (no
        BatchAddClusterNodes: no command adds nodes; ``scale`` is :meth:`grant_reconfigure`)."""
        return self._grant(grantee, "operate")

    def grant_reconfigure(self, grantee: iam.IGrantable) -> iam.Grant:
        """What ``status``, ``wait`` and ``scale`` call: ``sagemaker:UpdateCluster``, ListTags and the describe calls
        on the cluster (no log group).

        Equivalent to cluster admin: UpdateCluster is the whole reconfiguration API, not a count setter. With it a
        principal can delete instance groups (``InstanceGroupsToDelete``), point every group at other lifecycle
        scripts (``LifeCycleConfig``: root on every new node), change the AMI (``ImageId``) and the groups'
        subnets and security groups (``OverrideVpcConfig``). IAM cannot narrow it to counts: UpdateCluster has no
        condition key on the request (:data:`hyperpod_cdk.core.operator_permissions.UPDATE_CLUSTER_CONDITION_KEYS`).
        Give it to whom you would give the cluster."""
        return self._grant(grantee, "reconfigure")

    def grant_scale(self, grantee: iam.IGrantable) -> iam.Grant:
        """Deprecated alias of :meth:`grant_reconfigure`, whose name says what it allows (cluster admin, not a count
        setter)."""
        warnings.warn(
            "grant_scale is grant_reconfigure: sagemaker:UpdateCluster is the whole reconfiguration API (cluster "
            "admin), which IAM cannot limit to counts; call grant_reconfigure",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.grant_reconfigure(grantee)

    def grant_connect(self, grantee: iam.IGrantable) -> iam.Grant:
        """What ``connect``, ``port-forward``, ``ssh-config`` and the session of ``status --slurm`` call:
        DescribeCluster and ListClusterNodes to find the node, ``ssm:StartSession`` on the cluster and on the
        four session documents the commands use (SSM-SessionManagerRunShell, AWS-StartPortForwardingSession,
        AWS-StartSSHSession, AWS-StartNonInteractiveCommand). HyperPod's guide grants StartSession on ``*``;
        the cluster's ARN as the ``sagemaker-cluster:`` target's resource is inferred and unverified
        (:mod:`hyperpod_cdk.core.operator_permissions`): wrong, it denies, it never widens. The commands never call
        ``ssm:TerminateSession`` (sessions end themselves); it is not granted."""
        return self._grant(grantee, "connect")

    def _grant(self, grantee: iam.IGrantable, name: str) -> iam.Grant:
        grant = iam.Grant.add_to_principal(
            grantee=grantee, actions=actions(name, Resource.CLUSTER), resource_arns=[self.cluster_arn]
        )
        on_logs = actions(name, Resource.LOG_GROUP)
        if on_logs:
            log_groups = self._log_group_arns()
            grant = grant.combine(
                iam.Grant.add_to_principal(grantee=grantee, actions=on_logs, resource_arns=log_groups)
            )
            if isinstance(grantee, Construct) and self.cluster_id != "*":  # a name-only import's wildcards show
                for arn in log_groups:
                    acknowledge_wildcard_resource(grantee, arn, LOG_GROUP_REASON)
        names = documents(name)
        if names:
            stack = Stack.of(self)
            arns = [
                stack.format_arn(
                    service="ssm",
                    resource="document",
                    resource_name=document,
                    account="" if document.startswith("AWS-") else None,  # AWS's documents: no account
                )
                for document in names
            ]
            on_documents = actions(name, Resource.DOCUMENT)
            grant = grant.combine(iam.Grant.add_to_principal(grantee=grantee, actions=on_documents, resource_arns=arns))
        return grant

    def _log_group_arns(self) -> list[str]:
        """The log group's ARN with the trailing ``:*``: "Use this version to refer to the ARN in IAM policies when
        specifying permissions for most API actions" (CloudWatch Logs API reference, LogGroup ``arn``,
        https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_LogGroup.html); this group only."""
        return [
            Stack.of(self).format_arn(
                service="logs",
                resource="log-group",
                resource_name=f"{self.log_group_name}:*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
        ]


class ImportedCluster(ClusterBase):
    """A cluster deployed elsewhere (:meth:`HyperPodCluster.from_cluster_attributes`): nothing is created; the
    grants name its ARN."""

    def __init__(self, scope: Construct, id: str, *, cluster_name: str, cluster_arn: str | None = None) -> None:
        super().__init__(scope, id)
        self.cluster_name = cluster_name
        self.arn_given = cluster_arn is not None
        self._arn = cluster_arn or Stack.of(self).format_arn(service="sagemaker", resource="cluster", resource_name="*")

    @property
    def cluster_arn(self) -> str:
        """The ARN given, else ``arn:<partition>:sagemaker:<region>:<account>:cluster/*``: a HyperPod cluster's ARN
        ends in its ID, which its name does not give, so a name-only import matches every cluster of the stack's
        account and Region."""
        return self._arn

    @property
    def cluster_id(self) -> str:
        return super().cluster_id if self.arn_given else "*"
