"""The emulated control plane's state: the cluster, its instance groups and nodes, and the API's errors.

Statuses are AWS's: a node is ``Pending`` from the request until its lifecycle script has run, then ``Running``;
``ShuttingDown`` while it is removed (``ClusterInstanceStatus``,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceStatusDetails.html). A group's
``TargetCount`` is what was asked for and ``CurrentCount`` the nodes that run
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceGroupDetails.html).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PENDING = "Pending"
RUNNING = "Running"
SHUTTING_DOWN = "ShuttingDown"
FAILURE = "Failure"
CONTROLLER = "Controller"
LOGIN = "Login"
COMPUTE = "Compute"


class ApiError(Exception):
    """An error answer: botocore raises ``ClientError`` with ``code`` and ``message`` (awsJson1_1 ``__type``)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def validation(message: str) -> ApiError:
    return ApiError("ValidationException", message)


@dataclass
class Group:
    """One instance group as DescribeCluster shows it."""

    name: str
    node_type: str
    """``SlurmConfig.NodeType``: Controller, Login or Compute."""
    instance_type: str
    target: int
    execution_role: str
    lifecycle: dict[str, str]
    partition: str | None = None
    min_count: int | None = None
    threads_per_core: int = 1
    capacity: str | None = None
    """``CapacityRequirements`` as created: ``Spot``, ``OnDemand`` or None (not given)."""
    override_vpc: dict[str, Any] | None = None
    """``OverrideVpcConfig`` as created (``Subnets``, ``SecurityGroupIds``), or None."""
    volume_kms_key_id: str | None = None
    """``InstanceStorageConfigs[].EbsVolumeConfig.VolumeKmsKeyId`` as created, or None."""

    def describe(self, current: int) -> dict[str, Any]:
        slurm: dict[str, Any] = {"NodeType": self.node_type}
        if self.partition:
            slurm["PartitionNames"] = [self.partition]
        found: dict[str, Any] = {
            "InstanceGroupName": self.name,
            "InstanceType": self.instance_type,
            "CurrentCount": current,
            "TargetCount": self.target,
            "LifeCycleConfig": dict(self.lifecycle),
            "ExecutionRole": self.execution_role,
            "ThreadsPerCore": self.threads_per_core,
            "Status": "InService",
            "SlurmConfig": slurm,
        }
        if self.min_count is not None:
            found["MinCount"] = self.min_count
        return found


@dataclass
class Instance:
    """What the backend gives a node it allocates: EC2's id, its address and DNS name, the emulator's name."""

    instance_id: str
    ip: str
    dns: str
    name: str


@dataclass
class Node:
    """One node: known by its logical id from the request on, by its instance once allocated."""

    logical_id: str
    group: str
    instance_type: str
    status: str
    created: float
    ready_at: float = 0.0
    """When its launch may start: the request time plus the emulated launch latency (then retries)."""
    message: str = ""
    instance: Instance | None = None
    launching: bool = False
    capacity_short: bool = False

    @property
    def instance_id(self) -> str | None:
        return self.instance.instance_id if self.instance else None

    def summary(self) -> dict[str, Any]:
        """``ClusterNodeSummary`` (ListClusterNodes)."""
        found: dict[str, Any] = {
            "InstanceGroupName": self.group,
            "InstanceId": self.instance_id or "",
            "NodeLogicalId": self.logical_id,
            "InstanceType": self.instance_type,
            "LaunchTime": self.created,
            "InstanceStatus": self.status_details(),
        }
        if self.instance:
            found["PrivateDnsHostname"] = self.instance.dns
        return found

    def status_details(self) -> dict[str, str]:
        return {"Status": self.status, **({"Message": self.message} if self.message else {})}

    def details(self, group: Group) -> dict[str, Any]:
        """``ClusterNodeDetails`` (DescribeClusterNode)."""
        found = {
            **{k: v for k, v in self.summary().items() if k != "PrivateDnsHostname"},
            "LifeCycleConfig": dict(group.lifecycle),
            "ThreadsPerCore": group.threads_per_core,
        }
        if not self.instance_id:
            del found["InstanceId"]
        if self.instance:
            found["PrivatePrimaryIp"] = self.instance.ip
            found["PrivateDnsHostname"] = self.instance.dns
        return found


@dataclass
class ClusterInfo:
    name: str
    arn: str
    continuous: bool
    created: float
    tags: dict[str, str] = field(default_factory=dict)
