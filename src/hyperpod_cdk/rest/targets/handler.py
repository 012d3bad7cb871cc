"""Keeps a load balancer's target group pointing at one instance group's running nodes, by IP: the controller for
the REST API (:mod:`hyperpod_cdk.constructs.rest_api`), the login group for the login pool
(:mod:`hyperpod_cdk.constructs.login_pool`); one function, its group, target group and port from its environment.

HyperPod's nodes are not EC2 instances of the account (no instance a target group could name by ID); their
addresses are known only once they run: ``DescribeClusterNode`` gives ``PrivatePrimaryIp`` ("The private primary
IPv4 address of the SageMaker HyperPod cluster node", SageMaker API reference, ClusterNodeDetails). So the target
group's type is ``ip`` and this function reconciles it (RegisterTargets / DeregisterTargets) on every HyperPod event
of the cluster and every few minutes: a replaced or rebooted node is registered again by itself. Stdlib and
boto3 only (the Lambda Python runtime's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

CLUSTER_ENV = "HYPERPOD_CLUSTER_NAME"
GROUP_ENV = "HYPERPOD_INSTANCE_GROUP"
TARGET_GROUP_ENV = "HYPERPOD_TARGET_GROUP_ARN"
PORT_ENV = "HYPERPOD_TARGET_PORT"
SERVING = ("Running",)
"""ClusterInstanceStatus values whose node serves: a Pending node has no slurmrestd or sshd yet, a failing one
none."""


def group_ips(sagemaker: Any, cluster: str, group: str) -> list[str]:
    """The private IPv4 addresses of ``group``'s serving nodes (``ListClusterNodes``, ``DescribeClusterNode``)."""
    found = []
    pages = sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=cluster, InstanceGroupNameContains=group)
    for page in pages:
        for node in page.get("ClusterNodeSummaries", []):
            status = (node.get("InstanceStatus") or {}).get("Status")
            if node.get("InstanceGroupName") != group or status not in SERVING:
                continue
            details = sagemaker.describe_cluster_node(ClusterName=cluster, NodeId=node["InstanceId"])["NodeDetails"]
            if details.get("PrivatePrimaryIp"):
                found.append(str(details["PrivatePrimaryIp"]))
    return sorted(set(found))


def registered(elbv2: Any, target_group: str) -> dict[str, int]:
    """The target group's targets: IP -> port."""
    described = elbv2.describe_target_health(TargetGroupArn=target_group)["TargetHealthDescriptions"]
    return {str(t["Target"]["Id"]): int(t["Target"]["Port"]) for t in described}


def reconcile(sagemaker: Any, elbv2: Any, *, cluster: str, group: str, target_group: str, port: int) -> dict[str, Any]:
    """Register ``group``'s addresses on ``port`` and deregister every other target; what changed."""
    wanted = group_ips(sagemaker, cluster, group)
    current = registered(elbv2, target_group)
    stale = [{"Id": ip, "Port": p} for ip, p in sorted(current.items()) if ip not in wanted or p != port]
    new = [{"Id": ip, "Port": port} for ip in wanted if current.get(ip) != port]
    if stale:
        elbv2.deregister_targets(TargetGroupArn=target_group, Targets=stale)
    if new:
        elbv2.register_targets(TargetGroupArn=target_group, Targets=new)
    return {"targets": wanted, "registered": _ids(new), "deregistered": _ids(stale)}


def _ids(targets: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(t["Id"]) for t in targets]


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Lambda's entry point (``targets.handler.handler``): an EventBridge event or a schedule's, same work."""
    import boto3  # the Lambda runtime's own

    result = reconcile(
        boto3.client("sagemaker"),
        boto3.client("elbv2"),
        cluster=os.environ[CLUSTER_ENV],
        group=os.environ[GROUP_ENV],
        target_group=os.environ[TARGET_GROUP_ENV],
        port=int(os.environ[PORT_ENV]),
    )
    print(json.dumps({"event": event.get("detail-type", "schedule"), **result}))
    return result
