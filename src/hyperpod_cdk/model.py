"""The cluster's value objects and choices, shared by the config file and the constructs (no aws_cdk here).

``hyperpod-cdk validate`` and ``schema`` import this and the rules without importing CDK or starting Node.
"""

from __future__ import annotations

import enum
import re
import sys
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import ConfigDict, ValidatorFunctionWrapHandler, WrapValidator
from pydantic.dataclasses import dataclass

from training_runtime.groups import COMPUTE, CONTROLLER, LOGIN, ON_DEMAND, SPOT, GroupSpec
from training_runtime.params import API_DRIVEN, LIFECYCLE_DRIVEN
from training_runtime.params import DEFAULT_FSX_MOUNT_PATH as DEFAULT_FSX_MOUNT_PATH
from training_runtime.scaling import DEFAULT_IDLE_MINUTES, ScalingSpec

DEFAULT_LIFECYCLE_PREFIX = "lifecycle/"
DEFAULT_THROUGHPUT_MB_PER_TIB = 250
"""A new PERSISTENT_2 Lustre file system's per-unit storage throughput (MB/s/TiB) when the config sets none
(the FSx API requires ``PerUnitStorageThroughput`` for PERSISTENT types: CreateFileSystemLustreConfiguration).
The constructs apply it; the storage rules name it in their message."""


def cluster_log_group(cluster_name: str, cluster_id: str) -> str:
    """The CloudWatch Logs group HyperPod sends a cluster's lifecycle-script and health-agent output to (it
    creates the group when the first node runs its lifecycle script; AWS's managed policy
    AmazonSageMakerClusterInstanceRolePolicy grants ``log-group:/aws/sagemaker/Clusters/*``). The parts may be
    CDK tokens. Used by the observability construct (a metric filter) and the operator CLI (``logs``)."""
    return f"/aws/sagemaker/Clusters/{cluster_name}/{cluster_id}"


class SlurmMode(enum.StrEnum):
    """Who configures Slurm on the nodes."""

    API_DRIVEN = API_DRIVEN
    """HyperPod configures Slurm from each group's SlurmConfig and mounts FSx; our runtime runs after it
    (OnInitComplete). AWS's recommended model."""
    LIFECYCLE_DRIVEN = LIFECYCLE_DRIVEN
    """HyperPod runs our OnCreate script with provisioning_parameters.json; our runtime owns the node."""


class NodeRecovery(enum.StrEnum):
    AUTOMATIC = "Automatic"
    """Faulty nodes are rebooted or replaced automatically."""
    NONE = "None"
    """Faulty nodes are only labelled."""


class SlurmConfigStrategy(enum.StrEnum):
    """How UpdateCluster treats slurm.conf changes made on the controller (API-driven mode)."""

    MANAGED = "Managed"
    OVERWRITE = "Overwrite"
    MERGE = "Merge"


class NodeRole(enum.StrEnum):
    """The Slurm role of every node in a group."""

    CONTROLLER = CONTROLLER
    """Runs slurmctld (exactly one group)."""
    LOGIN = LOGIN
    """Where users log in and submit jobs (at most one group)."""
    COMPUTE = COMPUTE
    """Runs slurmd and training jobs; belongs to one partition."""


class ExecutionRoleChoice(enum.StrEnum):
    """Whose execution role an instance group's nodes assume (``ExecutionRole``)."""

    OWN = "own"
    """The group's own role: what its nodes need, nothing of the controller's (the scaler, the accounting secret)."""
    CONTROLLER = "controller"
    """The controller group's role, as every group had before roles per group: its nodes can then use the
    scaler's and the accounting secret's permissions. For a group deployed that way, until it is replaced: AWS's
    guide says to keep an existing group's IAM role in UpdateCluster (docs/execution-roles.md)."""


class DeepHealthCheck(enum.StrEnum):
    """HyperPod's deep health checks, run when nodes start (OnStartDeepHealthChecks)."""

    INSTANCE_STRESS = "InstanceStress"
    INSTANCE_CONNECTIVITY = "InstanceConnectivity"


class DataRepositoryEvent(enum.StrEnum):
    """Changes that a data repository association imports from or exports to S3 automatically."""

    NEW = "NEW"
    CHANGED = "CHANGED"
    DELETED = "DELETED"


ALL_EVENTS: tuple[DataRepositoryEvent, ...] = tuple(DataRepositoryEvent)


class Capacity(enum.StrEnum):
    """Where a group's instances come from (``CapacityRequirements``)."""

    SPOT = SPOT
    """EC2 Spot capacity: cheaper, and reclaimed when EC2 needs it back."""
    ON_DEMAND = ON_DEMAND
    """On-Demand capacity."""


class NodeProvisioningMode(enum.StrEnum):
    """How HyperPod provisions the cluster's nodes (``NodeProvisioningMode``)."""

    CONTINUOUS = "continuous"
    """Accept partial capacity: the cluster is InService once its controller (and login) node runs; worker
    launches are retried in the background."""

    @property
    def cfn(self) -> str:
        """The value as ``AWS::SageMaker::Cluster`` spells it (``Continuous``)."""
        return self.value.capitalize()


class NetworkInterfaceType(enum.StrEnum):
    """The interface HyperPod gives a group's EFA devices (``NetworkInterface.InterfaceType``)."""

    EFA = "efa"
    """EFA devices that also carry IP traffic."""
    EFA_ONLY = "efa-only"
    """EFA devices without an IP address (RDMA only)."""


class PatchingStrategy(enum.StrEnum):
    """When HyperPod applies a security patch to a group's nodes (``AutoPatchConfig.PatchingStrategy``)."""

    WHEN_IDLE = "when-idle"
    """Cordon every node and patch each one as soon as it runs no job; nodes that never go idle keep the old AMI."""
    WHEN_ALL_IDLE = "when-all-idle"
    """Cordon every node and patch the group only once all of its nodes are idle; otherwise nothing is patched."""


class BatchSizeType(enum.StrEnum):
    """How a rolling update counts its batch (``CapacitySizeConfig.Type``)."""

    INSTANCE_COUNT = "INSTANCE_COUNT"
    CAPACITY_PERCENTAGE = "CAPACITY_PERCENTAGE"


_STRICT = ConfigDict(extra="forbid", use_attribute_docstrings=True)


@dataclass(frozen=True, kw_only=True, config=_STRICT)
class BatchSize:
    """How many of a group's instances a rolling update replaces at a time."""

    type: BatchSizeType
    """INSTANCE_COUNT (a number of instances) or CAPACITY_PERCENTAGE (a share of the group, 1-100)."""
    value: int
    """The number of instances (at least 1, at most the group's count) or the percentage."""


@dataclass(frozen=True, kw_only=True, config=_STRICT)
class RollingDeployment:
    """How HyperPod rolls a new AMI through a group (``DeploymentConfig``)."""

    maximum_batch_size: BatchSize | None = None
    """Instances updated at a time (``RollingUpdatePolicy.MaximumBatchSize``). Default: HyperPod's."""
    rollback_maximum_batch_size: BatchSize | None = None
    """Instances rolled back at a time (``RollbackMaximumBatchSize``); needs ``maximum_batch_size``.
    Default: HyperPod's."""
    wait_interval_s: int | None = None
    """Seconds HyperPod waits between batches, 0-3600 (``WaitIntervalInSeconds``). Default: HyperPod's."""
    rollback_alarms: Sequence[str] = ()
    """CloudWatch alarm names (1-10) that roll the update back when they fire (``AutoRollbackConfiguration``).
    Default: none."""


@dataclass(frozen=True, kw_only=True, config=_STRICT)
class ScheduledUpdate:
    """A schedule on which HyperPod updates a group's AMI (``ScheduledUpdateConfig``)."""

    schedule_expression: str
    """When, as ``cron(minute hour day-of-month month day-of-week year)``, e.g. ``cron(0 3 ? * SUN *)``."""
    deployment: RollingDeployment | None = None
    """How the update rolls through the group in batches: refused on Slurm clusters (GRP-UPDATE-BATCHES-SLURM; AWS
    offers updates in batches to EKS clusters only). Default: the whole group at once."""


@dataclass(frozen=True, kw_only=True, config=_STRICT)
class AutoPatch:
    """HyperPod applies security-only AMI patches to a group's nodes as they go idle (``AutoPatchConfig``)."""

    strategy: PatchingStrategy
    """when-idle (node by node) or when-all-idle (the whole group at once)."""
    deployment: RollingDeployment | None = None
    """How the patch rolls through the group, as for ``scheduled_update``. Default: HyperPod's."""


@dataclass(frozen=True, kw_only=True, config=_STRICT)
class OverrideVpc:
    """The group's own subnets and security groups instead of the cluster's (``OverrideVpcConfig``)."""

    subnet_ids: Sequence[str]
    """1-16 subnet IDs in the cluster's VPC."""
    security_group_ids: Sequence[str]
    """1-5 security group IDs; they must admit the other groups' nodes and the file system."""


@dataclass(frozen=True, kw_only=True, config=_STRICT)
class Scaling:
    """The scaler on the controller grows and shrinks the group with its partition's queue (docs/scaler.md):
    jobs pending for resources add nodes (``BatchAddClusterNodes``), nodes idle ``idle_minutes`` are drained and
    deleted (``BatchDeleteClusterNodes``). Continuous node provisioning and compute groups only."""

    min: int
    """Fewest instances the scaler keeps (0 lets an idle group go to no node)."""
    max: int
    """Most instances the scaler launches (at least 1, at least ``min``)."""
    idle_minutes: int = DEFAULT_IDLE_MINUTES
    """Minutes a node has run no job before the scaler drains and deletes it (1 to 10080, a week). Default: 10."""

    def spec(self) -> ScalingSpec:
        """As the parameters file carries it (``groups[].scaling``)."""
        return ScalingSpec(self.min, self.max, self.idle_minutes)


def _int_or_token(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A whole number, or a CDK token standing for one (e.g. a ``CfnParameter``'s ``value_as_number``).

    CDK encodes a number token as a huge float that no int check accepts; a token can only exist once
    ``aws_cdk`` is imported, so a config file read without CDK never takes this path."""
    cdk = sys.modules.get("aws_cdk")
    if isinstance(value, float) and cdk is not None and cdk.Token.is_unresolved(value):
        return value
    return handler(value)


Count = Annotated[int, WrapValidator(_int_or_token)]
"""An instance count: an int, or a CDK number token (its value is judged by CloudFormation's constraints)."""


@dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="forbid"))
class InstanceGroup:
    """One instance group.

    :param name: instance-group name; also the Slurm partition of a compute group unless ``partition``
        is given. Letters, digits and hyphens, 1-63 characters.
    :param instance_type: SageMaker instance type, e.g. ``ml.p5.48xlarge``. Give this or ``instance_types``.
        Default: none (``instance_types`` is used).
    :param instance_types: a flexible group's instance types, in priority order (1-20, no repeats): HyperPod
        launches the first type it has capacity for, so one group may hold several types at once
        (``InstanceRequirements.InstanceTypes``). Each node takes its own type's Slurm size, GPUs and launcher
        environment. Default: none (``instance_type`` is used).
    :param count: number of instances (0-6758; at least 1 for controller and login groups), or a CDK token
        such as a ``CfnParameter``'s ``value_as_number``.
    :param role: Slurm role. Default: ``NodeRole.COMPUTE``.
    :param partition: Slurm partition of a compute group. Default: the group's name.
    :param threads_per_core: 1 disables SMT (recommended for training), 2 enables it. Default: 1.
    :param ebs_volume_gib: size of an extra EBS volume mounted at /opt/sagemaker. Default: none.
    :param deep_health_checks: deep health checks to run when nodes start. Default: none.
    :param training_plan_arn: SageMaker training plan that reserves this group's capacity. Default: none.
    :param capacity: ``Capacity.SPOT`` or ``Capacity.ON_DEMAND`` (compute groups only for Spot). Default:
        HyperPod's (nothing written).
    :param min_count: fewest instances for the group to be InService (any group, at most ``count``; continuous
        provisioning only). Default: none.
    :param image_id: a custom AMI (``ami-`` + 8 or 17 hex digits; unencrypted, in this account) built from
        HyperPod's AMI. Default: HyperPod's AMI.
    :param scheduled_update: a schedule and rolling deployment for AMI updates. Default: none.
    :param override_vpc: the group's own subnets and security groups (existing VPC only). Default: the
        cluster's.
    :param network_interface: ``efa`` or ``efa-only`` for types with EFA. Default: HyperPod's.
    :param auto_patch: AWS documents auto-patching for EKS clusters only, so a Slurm cluster refuses it
        (GRP-AUTO-PATCH-SLURM); use ``scheduled_update``. Default: none.
    :param volume_kms_key_arn: customer-managed KMS key (ARN) for the nodes' root volume and the extra EBS
        volume (continuous provisioning only). Default: AWS-owned keys (or the organization's key).
    :param scaling: ``{min, max, idle_minutes}``: the scaler grows and shrinks this compute group with its queue
        (continuous provisioning only); ``count`` is then the count at creation, and a deploy keeps the deployed
        cluster's count (docs/scaler.md). Default: none (the group keeps ``count``).
    :param execution_role: ``own``: the group's nodes assume a role of their own, with what they need and nothing
        of the controller's; ``controller``: they assume the controller group's role, as every group did before
        roles per group, for a group deployed that way (rule GRP-CONTROLLER-ROLE warns;
        docs/execution-roles.md). The controller group always has its own. Default: ``own``.
    :param image_release_version: the HyperPod AMI version (``MAJOR.MINOR.PATCH``) the group runs: the API's
        ``ImageReleaseVersion``, which CloudFormation documents for EKS clusters only, so a Slurm cluster refuses it
        (GRP-IMAGE-RELEASE-VERSION); pin an AMI with ``image_id``. Default: none (the latest).
    """

    name: str
    count: Count
    instance_type: str | None = None
    instance_types: Sequence[str] = ()
    role: NodeRole = NodeRole.COMPUTE
    partition: str | None = None
    threads_per_core: int = 1
    ebs_volume_gib: int | None = None
    deep_health_checks: Sequence[DeepHealthCheck] = ()
    training_plan_arn: str | None = None
    capacity: Capacity | None = None
    min_count: Count | None = None
    image_id: str | None = None
    scheduled_update: ScheduledUpdate | None = None
    override_vpc: OverrideVpc | None = None
    network_interface: NetworkInterfaceType | None = None
    auto_patch: AutoPatch | None = None
    volume_kms_key_arn: str | None = None
    scaling: Scaling | None = None
    execution_role: ExecutionRoleChoice = ExecutionRoleChoice.OWN
    image_release_version: str | None = None

    @property
    def shares_controller_role(self) -> bool:
        """Whether the group's nodes assume the controller group's role (``execution_role: controller`` on a login
        or compute group)."""
        return self.role != NodeRole.CONTROLLER and self.execution_role == ExecutionRoleChoice.CONTROLLER

    @property
    def partition_name(self) -> str | None:
        """The Slurm partition this group's nodes join (compute groups only)."""
        if self.role != NodeRole.COMPUTE:
            return None
        return self.partition or self.name

    @property
    def peak_count(self) -> Count:
        """The most instances the group may hold: ``scaling.max`` for a group the scaler grows, else ``count``
        (what quotas and subnets must allow)."""
        return self.scaling.max if self.scaling is not None else self.count

    @property
    def flexible(self) -> bool:
        """Whether the group lists several candidate types (``instance_types``) instead of one."""
        return bool(self.instance_types)

    @property
    def types(self) -> tuple[str, ...]:
        """Every instance type the group's nodes may have: ``instance_types``, else ``instance_type``."""
        if self.instance_types:
            return tuple(self.instance_types)
        return () if self.instance_type is None else (self.instance_type,)

    def spec(self) -> GroupSpec:
        """This group as the node runtime sees it (the parameters contract). A flexible group has no one
        type: each node reads its own from HyperPod's resource config."""
        return GroupSpec(
            self.name,
            str(self.role),
            None if self.flexible else self.instance_type,
            self.partition_name,
            threads_per_core=self.threads_per_core,
            instance_types=tuple(self.instance_types),
            capacity=str(self.capacity) if self.capacity is not None else None,
            scaling=self.scaling.spec() if self.scaling is not None else None,
        )


def pascal_case(name: str) -> str:
    """A user-given name as a construct-ID fragment: ``training-data`` -> ``TrainingData``."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^a-zA-Z0-9]+", name) if part)


def prefixed(prefix: str, name: str) -> str:
    """``name`` with an organization's name ``prefix``, unchanged when it already has it (so applying twice changes
    nothing). The one home of the prefix rule: the rules, the organization's aspects and
    :func:`hyperpod_cdk.core.deployment.deployment` use it."""
    return name if name.startswith(prefix) else prefix + name
