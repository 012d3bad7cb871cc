"""Cluster and node lookups: DescribeCluster, ListClusterNodes, node references, SSM targets, log groups."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hyperpod_cdk.aws.clients import error_code, error_message
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.model import cluster_log_group
from training_runtime.node_names import address_of


@dataclass(frozen=True)
class Node:
    """One row of ListClusterNodes."""

    instance_id: str
    group: str
    instance_type: str
    status: str
    message: str
    hostname: str
    launch_time: datetime | None
    logical_id: str = ""

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> Node:
        state = summary.get("InstanceStatus") or {}
        dns = str(summary.get("PrivateDnsHostname") or "")
        return cls(
            instance_id=str(summary.get("InstanceId") or ""),
            group=str(summary.get("InstanceGroupName") or ""),
            instance_type=str(summary.get("InstanceType") or ""),
            status=str(state.get("Status") or ""),
            message=str(state.get("Message") or ""),
            hostname=dns.split(".", 1)[0],
            launch_time=summary.get("LaunchTime"),
            logical_id=str(summary.get("NodeLogicalId") or ""),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "group": self.group,
            "instance_type": self.instance_type,
            "status": self.status,
            "message": self.message,
            "hostname": self.hostname,
            "launch_time": self.launch_time.isoformat() if self.launch_time else None,
            "logical_id": self.logical_id or None,
        }


@dataclass
class Cluster:
    """DescribeCluster's answer for a Slurm-orchestrated cluster."""

    name: str
    arn: str
    status: str
    failure_message: str
    groups: list[dict[str, Any]]
    raw: dict[str, Any] = field(repr=False)

    @property
    def id(self) -> str:
        """The last segment of the ARN: what SSM targets and the log group use."""
        return self.arn.rsplit("/", 1)[-1]

    @property
    def log_group(self) -> str:
        return cluster_log_group(self.name, self.id)

    def ssm_target(self, node: Node) -> str:
        return f"sagemaker-cluster:{self.id}_{node.group}-{node.instance_id}"

    def group(self, name: str) -> dict[str, Any]:
        for group in self.groups:
            if group.get("InstanceGroupName") == name:
                return group
        known = ", ".join(str(g.get("InstanceGroupName")) for g in self.groups)
        raise OpsError(f"cluster {self.name} has no instance group {name!r} (groups: {known})", Exit.NOT_FOUND)

    @property
    def continuous(self) -> bool:
        """``NodeProvisioningMode: Continuous``: the cluster stays InService while its groups scale, and only
        such clusters have cluster events (API reference: DescribeCluster, ListClusterEvents)."""
        return self.raw.get("NodeProvisioningMode") == "Continuous"

    @property
    def controller_groups(self) -> dict[str, str]:
        """Each Slurm controller group and how it is known: ``SlurmConfig.NodeType`` Controller (API-driven
        clusters), else, where no group has a SlurmConfig (lifecycle-driven clusters name the controller group in
        provisioning_parameters.json, which the API does not return), a group named like a controller."""
        typed = {
            str(g["InstanceGroupName"]): "its SlurmConfig.NodeType is Controller"
            for g in self.groups
            if (g.get("SlurmConfig") or {}).get("NodeType") == "Controller"
        }
        if typed or any(g.get("SlurmConfig") for g in self.groups):
            return typed
        return {
            str(g["InstanceGroupName"]): "its name says controller (the cluster's groups have no SlurmConfig)"
            for g in self.groups
            if "controller" in str(g.get("InstanceGroupName", "")).lower()
        }

    @property
    def controller_group(self) -> str | None:
        """The first of :attr:`controller_groups`."""
        return next(iter(self.controller_groups), None)


def get_cluster(sagemaker: Any, name: str) -> Cluster:
    """DescribeCluster; one clear error for an unknown cluster and for one that is not Slurm-orchestrated."""
    from botocore.exceptions import ClientError

    try:
        raw = sagemaker.describe_cluster(ClusterName=name)
    except ClientError as error:
        code, message = error_code(error), error_message(error)
        # The service answers ResourceNotFound; some endpoints (moto) answer ValidationException "Could not find".
        if code in ("ResourceNotFound", "ResourceNotFoundException") or (
            code in ("ValidationException", "ValidationError") and "not find" in message.lower()
        ):
            region = sagemaker.meta.region_name
            raise OpsError(
                f"no HyperPod cluster named {name!r} in {region}: check the name (`aws sagemaker list-clusters`) "
                "and the Region (--region / AWS_REGION)",
                Exit.NOT_FOUND,
            ) from None
        raise
    orchestrator = raw.get("Orchestrator") or {}
    if "Eks" in orchestrator:
        raise OpsError(
            f"cluster {name} is orchestrated by Amazon EKS, not Slurm: use AWS's `hyp` CLI "
            "(package sagemaker-hyperpod) for EKS clusters",
            Exit.UNSUPPORTED,
        )
    return Cluster(
        name=str(raw.get("ClusterName") or name),
        arn=str(raw["ClusterArn"]),
        status=str(raw.get("ClusterStatus") or ""),
        failure_message=str(raw.get("FailureMessage") or ""),
        groups=list(raw.get("InstanceGroups") or []),
        raw=raw,
    )


def list_nodes(sagemaker: Any, cluster: str, group: str | None = None, *, logical_ids: bool = False) -> list[Node]:
    """Every node (ListClusterNodes through its paginator), optionally of groups whose name contains ``group``.

    ``logical_ids``: also the nodes still being provisioned, which have a NodeLogicalId and no instance id yet
    (``IncludeNodeLogicalIds``; Continuous provisioning, API reference: ListClusterNodes)."""
    params: dict[str, Any] = {"ClusterName": cluster}
    if logical_ids:
        params["IncludeNodeLogicalIds"] = True
    if group:
        params["InstanceGroupNameContains"] = group
    nodes: list[Node] = []
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(**params):
        nodes.extend(Node.from_summary(s) for s in page.get("ClusterNodeSummaries", []))
    if group:
        nodes = [n for n in nodes if n.group == group]
    return nodes


def resolve_nodes(nodes: Sequence[Node], refs: Iterable[str], cluster: str) -> list[Node]:
    """Nodes named by instance id, Slurm hostname (ip-10-1-2-3) or private IP; every unknown one reported."""
    by_key: dict[str, Node] = {}
    for node in nodes:
        by_key[node.instance_id] = node
        if node.hostname:
            by_key[node.hostname] = node
            address = address_of(node.hostname)  # the inverse of the runtime's one naming rule
            if address:
                by_key[address] = node
        if node.logical_id:
            by_key[node.logical_id] = node
    found: list[Node] = []
    unknown: list[str] = []
    for ref in refs:
        key = ref.split(".", 1)[0] if ref.startswith("ip-") else ref
        hit = by_key.get(key)
        if hit is None:
            unknown.append(ref)
        elif hit not in found:
            found.append(hit)
    if unknown:
        raise OpsError(
            f"cluster {cluster} has no node {', '.join(unknown)}: give instance ids (i-...) or Slurm hostnames "
            "(ip-a-b-c-d) as `hyperpod-cdk status` lists them",
            Exit.NOT_FOUND,
        )
    return found


def pick_node(cluster: Cluster, nodes: Sequence[Node], group: str | None, node: str | None) -> Node:
    """The node a session goes to: --node, else the first Running node of --group, else of the controller group."""
    if node:
        return resolve_nodes(nodes, [node], cluster.name)[0]
    target_group = group or cluster.controller_group
    if target_group is None:
        raise OpsError(
            f"cluster {cluster.name} has no group with SlurmConfig NodeType Controller: pass --group or --node",
            Exit.USAGE,
        )
    cluster.group(target_group)
    members = [n for n in nodes if n.group == target_group]
    running = [n for n in members if n.status == "Running"] or members
    if not running:
        raise OpsError(f"group {target_group} of cluster {cluster.name} has no nodes yet", Exit.NOT_FOUND)
    return running[0]


LOG_STREAM_PREFIXES = {"lifecycle": "LifecycleConfig", "health": "SagemakerHealthMonitoringAgent"}
"""CloudWatch Logs streams in the cluster's log group: ``<prefix>/<instance-group>/<instance-id>``."""


def log_stream(source: str, node: Node) -> str:
    return f"{LOG_STREAM_PREFIXES[source]}/{node.group}/{node.instance_id}"
