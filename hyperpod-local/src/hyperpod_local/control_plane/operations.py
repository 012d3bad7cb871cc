"""The HyperPod cluster API of one cluster, on AWS's terms, over a :class:`Backend` that runs the instances.

Each operation takes the request's parameters (JSON, as botocore serializes them) and returns the response's,
or raises :class:`~hyperpod_local.control_plane.model.ApiError`. What each does, from the API reference
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_<Operation>.html):

- ``BatchAddClusterNodes``: "Adds nodes to a HyperPod cluster by incrementing the target count for one or more
  instance groups", returning a ``NodeLogicalId`` per node; "only supported for clusters using Continuous as the
  NodeProvisioningMode"; ``ClientToken`` "valid for 8 hours. If you retry the request with the same client token
  within this timeframe and the same parameters, the API returns the same set of NodeLogicalIds with their latest
  status". AWS does not say what a reused token with other parameters gets: here a ValidationException.
- ``BatchDeleteClusterNodes``: "you cannot remove instances that are configured as Slurm controller nodes": such a
  node is Failed with ``InvalidNodeStatus`` (AWS names no code for it; that is the closest of the three the model
  has). The nodes' group loses one from its target per node.
- ``BatchRebootClusterNodes`` / ``BatchReplaceClusterNodes``: a node must be Running (else
  ``InvalidInstanceStatus``); replacing a Slurm controller is refused ("you cannot replace instances that are
  configured as Slurm controller nodes"). While rebooted or replaced a node shows ``Pending``: AWS does not say
  which status it shows meanwhile.
- ``UpdateCluster``: the emulator changes instance counts (and ``MinInstanceCount``) only; a group's other
  fields must be as they are. A member AWS says cannot change once the group exists (NodeType,
  CapacityRequirements, OverrideVpcConfig, the volume KMS key: :mod:`.refusals`) gets a ValidationException
  quoting AWS, and the request changes nothing. A lower count removes Pending nodes first, then the newest
  Running ones (AWS does not say which nodes a lower count removes). Controller and login groups keep their counts.
- ``CreateCluster`` / ``UpdateCluster``: a request that breaks the API model's constraints (botocore's
  service-2.json: required members, enums, ranges, lengths, patterns) gets the ValidationException the service
  gives (:func:`.validation.api_model`) before anything else. The emulator holds one cluster: a valid CreateCluster
  of its own name is ``ResourceInUse``; of another name ``ResourceLimitExceeded`` (a code of CreateCluster's; the
  emulator does not create a second cluster).
- ``UpdateClusterSoftware``: :mod:`.software` (no DeploymentConfig on Slurm; every node of the named groups
  re-imaged).
- Launches, capacity and retries: :mod:`.fleet`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hyperpod_local.control_plane import validation as check
from hyperpod_local.control_plane.fleet import Fleet
from hyperpod_local.control_plane.model import (
    CONTROLLER,
    RUNNING,
    SHUTTING_DOWN,
    SYSTEM_UPDATING,
    ApiError,
    ClusterInfo,
    Node,
    validation,
)
from hyperpod_local.control_plane.refusals import refused
from hyperpod_local.control_plane.software import update_cluster_software

CLIENT_TOKEN_TTL_S = 8 * 3600.0
DEFAULT_PAGE = 100
"""ListClusterNodes / ListClusterEvents without MaxResults: AWS does not document the default page size."""


class ControlPlane:
    """One cluster's API over its :class:`~hyperpod_local.control_plane.fleet.Fleet`."""

    def __init__(self, cluster: ClusterInfo, fleet: Fleet) -> None:
        self.cluster = cluster
        self.fleet = fleet
        self.tokens: dict[str, tuple[str, float, list[str]]] = {}

    # --- dispatch -------------------------------------------------------------------------------
    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"op_{operation}", None)
        if handler is None:
            raise ApiError("UnknownOperationException", f"{operation} is not emulated by hyperpod-local")
        with self.fleet.lock:
            self.fleet.reconcile()
            answer: dict[str, Any] = handler(params)
            self.fleet.reconcile()
            return answer

    def _cluster(self, params: dict[str, Any], key: str = "ClusterName") -> None:
        name = params.get(key)
        if name not in (self.cluster.name, self.cluster.arn):
            raise ApiError("ResourceNotFound", f"Cluster {name} not found")

    # --- reads ----------------------------------------------------------------------------------
    def op_DescribeCluster(self, params: dict[str, Any]) -> dict[str, Any]:
        self._cluster(params)
        groups = [g.describe(self.fleet.current(g.name)) for g in self.fleet.groups.values()]
        changing = any(g["CurrentCount"] != g["TargetCount"] for g in groups)
        status = "Updating" if changing and not self.cluster.continuous else "InService"
        found: dict[str, Any] = {
            "ClusterArn": self.cluster.arn,
            "ClusterName": self.cluster.name,
            # Continuous provisioning "stays InService while it scales"; otherwise the cluster is Updating.
            # While UpdateClusterSoftware re-images nodes: SystemUpdating (:mod:`.software`).
            "ClusterStatus": "SystemUpdating" if any(n.status == SYSTEM_UPDATING for n in self.fleet.nodes) else status,
            "CreationTime": self.cluster.created,
            "InstanceGroups": groups,
            "NodeRecovery": "Automatic",
            "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}},
        }
        if self.cluster.continuous:
            found["NodeProvisioningMode"] = "Continuous"
        return found

    def op_ListClusterNodes(self, params: dict[str, Any]) -> dict[str, Any]:
        self._cluster(params)
        problems: list[str] = []
        size = check.integer(params, "MaxResults", 1, check.LIST_MAX, problems) or DEFAULT_PAGE
        check.check(problems)
        contains = params.get("InstanceGroupNameContains") or ""
        after, before = params.get("CreationTimeAfter"), params.get("CreationTimeBefore")
        nodes = [
            n
            for n in self.fleet.nodes
            # Nodes with no instance yet are known by their logical id only when asked for.
            if (n.instance_id or params.get("IncludeNodeLogicalIds"))
            and contains in n.group
            and (after is None or n.created > float(after))
            and (before is None or n.created < float(before))
        ]
        key = (lambda n: n.instance_id or n.logical_id) if params.get("SortBy") == "NAME" else (lambda n: n.created)
        nodes.sort(key=key, reverse=params.get("SortOrder") == "Descending")
        page, token = _page(nodes, params.get("NextToken"), size)
        summaries = []
        for node in page:
            summary = node.summary()
            if not params.get("IncludeNodeLogicalIds"):
                del summary["NodeLogicalId"]
            summaries.append(summary)
        return {"ClusterNodeSummaries": summaries, **({"NextToken": token} if token else {})}

    def op_DescribeClusterNode(self, params: dict[str, Any]) -> dict[str, Any]:
        self._cluster(params)
        node_id, logical = params.get("NodeId"), params.get("NodeLogicalId")
        if bool(node_id) == bool(logical):
            raise validation("give exactly one of NodeId and NodeLogicalId")
        node = self.fleet.find(node_id, logical)
        if node is None:
            raise ApiError("ResourceNotFound", f"Node {node_id or logical} not found in cluster {self.cluster.name}")
        return {"NodeDetails": node.details(self.fleet.group(node.group))}

    def op_ListClusterEvents(self, params: dict[str, Any]) -> dict[str, Any]:
        self._cluster(params)
        if not self.cluster.continuous:
            raise validation("Cluster events are available for clusters with NodeProvisioningMode Continuous only")
        problems: list[str] = []
        size = check.integer(params, "MaxResults", 1, check.LIST_MAX, problems) or DEFAULT_PAGE
        check.check(problems)
        page, token = _page(self.fleet.events.select(params), params.get("NextToken"), size)
        events = [e.summary(self.cluster.name, self.cluster.arn) for e in page]
        return {"Events": events, **({"NextToken": token} if token else {})}

    def op_ListTags(self, params: dict[str, Any]) -> dict[str, Any]:
        self._resource(params)
        problems: list[str] = []
        check.integer(params, "MaxResults", 50, None, problems)
        check.check(problems)
        return {"Tags": [{"Key": k, "Value": v} for k, v in self.cluster.tags.items()]}

    def op_AddTags(self, params: dict[str, Any]) -> dict[str, Any]:
        self._resource(params)
        tags = params.get("Tags") or []
        merged = {**self.cluster.tags, **{t["Key"]: t["Value"] for t in tags}}
        problems = [
            f"Tags[{i}]: key {t.get('Key')!r} or value of {len(str(t.get('Value')))} characters; allowed: a key of "
            "1 to 128 characters and a value of at most 256"
            for i, t in enumerate(tags)
            if not 1 <= len(str(t.get("Key", ""))) <= 128 or len(str(t.get("Value", ""))) > 256
        ]
        if len(tags) > check.TAGS_MAX or len(merged) > check.TAGS_MAX:
            problems.append(f"Tags: the resource would have {len(merged)} tags; allowed: at most {check.TAGS_MAX}")
        check.check(problems)
        self.cluster.tags = merged
        return {"Tags": tags}

    def _resource(self, params: dict[str, Any]) -> None:
        if params.get("ResourceArn") != self.cluster.arn:
            raise ApiError("ResourceNotFound", f"Resource {params.get('ResourceArn')} not found")

    # --- changes --------------------------------------------------------------------------------
    def op_BatchAddClusterNodes(self, params: dict[str, Any]) -> dict[str, Any]:
        self._cluster(params)
        if not self.cluster.continuous:
            raise validation("This API is only supported for clusters using Continuous as the NodeProvisioningMode")
        specs = list(params.get("NodesToAdd") or [])
        token = params.get("ClientToken")
        problems: list[str] = []
        if not 1 <= len(specs) <= check.ADD_GROUPS_MAX:
            problems.append(f"NodesToAdd: {len(specs)} groups given; allowed: 1 to {check.ADD_GROUPS_MAX}")
        for index, spec in enumerate(specs):
            count = spec.get("IncrementTargetCountBy")
            if not isinstance(count, int) or not 1 <= count <= check.ADD_NODES_MAX:
                problems.append(
                    f"NodesToAdd[{index}].IncrementTargetCountBy: got {count!r}; allowed: 1 to {check.ADD_NODES_MAX}"
                )
        total = sum(
            s.get("IncrementTargetCountBy") or 0 for s in specs if isinstance(s.get("IncrementTargetCountBy"), int)
        )
        if total > check.ADD_NODES_MAX:
            problems.append(f"NodesToAdd: {total} nodes in all; allowed: a maximum of {check.ADD_NODES_MAX}")
        if token is not None and not check.CLIENT_TOKEN.fullmatch(str(token)):
            problems.append(f"ClientToken: got {token!r}; allowed: 1 to 64 printable ASCII characters")
        check.check(problems)
        request = json.dumps(specs, sort_keys=True)
        now = self.fleet.clock()
        if token:
            self.tokens = {k: v for k, v in self.tokens.items() if now - v[1] < CLIENT_TOKEN_TTL_S}
            if token in self.tokens:
                seen, _, logical = self.tokens[token]
                if seen != request:
                    raise validation(f"ClientToken {token} was used with other parameters within 8 hours")
                return self._added([n for n in self.fleet.nodes if n.logical_id in logical], [])
        added: list[Node] = []
        failed: list[dict[str, Any]] = []
        for spec in specs:
            name, count = spec["InstanceGroupName"], spec["IncrementTargetCountBy"]
            group = self.fleet.groups.get(name)
            if group is None or group.node_type == CONTROLLER:
                why = "no such instance group" if group is None else "the emulator does not add Slurm controllers"
                code = "InstanceGroupNotFound" if group is None else "InvalidInstanceGroupStatus"
                failed.append({"InstanceGroupName": name, "ErrorCode": code, "FailedCount": count, "Message": why})
                continue
            group.target += count
            added += [self.fleet.new_node(group, now) for _ in range(count)]
            self.fleet.events.record(f"Target count of {name} increased by {count} to {group.target}", group=name)
        if token:
            self.tokens[token] = (request, now, [n.logical_id for n in added])
        return self._added(added, failed)

    def _added(self, nodes: list[Node], failed: list[dict[str, Any]]) -> dict[str, Any]:
        ok = [{"NodeLogicalId": n.logical_id, "InstanceGroupName": n.group, "Status": n.status} for n in nodes]
        return {"Successful": ok, "Failed": failed}

    def op_BatchDeleteClusterNodes(self, params: dict[str, Any]) -> dict[str, Any]:
        self._cluster(params)
        ids, logical = check.id_lists(params, None, check.DELETE_IDS_MAX)
        answer: dict[str, list[Any]] = {
            "Successful": [],
            "Failed": [],
            "SuccessfulNodeLogicalIds": [],
            "FailedNodeLogicalIds": [],
        }
        for kind, refs in (("NodeId", ids), ("NodeLogicalId", logical)):
            for ref in refs:
                node = self.fleet.find(ref, None) if kind == "NodeId" else self.fleet.find(None, ref)
                code, message = self._deletable(node)
                suffix = "" if kind == "NodeId" else "NodeLogicalIds"
                if code:
                    answer[f"Failed{suffix}"].append({kind: ref, "Code": code, "Message": message})
                    continue
                assert node is not None
                self.fleet.remove(node, "deleted by BatchDeleteClusterNodes")
                answer[f"Successful{suffix}"].append(ref)
        return {k: v for k, v in answer.items() if v or k in ("Successful", "Failed")}

    def _deletable(self, node: Node | None) -> tuple[str, str]:
        if node is None:
            return "NodeIdNotFound", "no such node in this cluster"
        if self.fleet.group(node.group).node_type == CONTROLLER:
            return "InvalidNodeStatus", "you cannot remove instances that are configured as Slurm controller nodes"
        if node.status == SHUTTING_DOWN:
            return "InvalidNodeStatus", "the node is already shutting down"
        return "", ""

    def op_BatchRebootClusterNodes(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._recover(params, "reboot")

    def op_BatchReplaceClusterNodes(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._recover(params, "replace")

    def _recover(self, params: dict[str, Any], action: str) -> dict[str, Any]:
        self._cluster(params)
        ids, logical = check.id_lists(params, check.REBOOT_IDS_MAX, None)
        answer: dict[str, list[Any]] = {
            "Successful": [],
            "Failed": [],
            "SuccessfulNodeLogicalIds": [],
            "FailedNodeLogicalIds": [],
        }
        for kind, refs in (("NodeId", ids), ("NodeLogicalId", logical)):
            suffix = "" if kind == "NodeId" else "NodeLogicalIds"
            for ref in refs:
                node = self.fleet.find(ref, None) if kind == "NodeId" else self.fleet.find(None, ref)
                if node is None:
                    code, message = "InstanceIdNotFound", "no such node in this cluster"
                elif action == "replace" and self.fleet.group(node.group).node_type == CONTROLLER:
                    code, message = (
                        "InvalidInstanceStatus",
                        "you cannot replace instances configured as Slurm controller nodes",
                    )
                elif node.status != RUNNING or node.instance is None:
                    code, message = "InvalidInstanceStatus", f"the node is {node.status}; it must be Running"
                else:
                    self.fleet.start_recovery(node, action)
                    answer[f"Successful{suffix}"].append(ref)
                    continue
                answer[f"Failed{suffix}"].append({kind: ref, "ErrorCode": code, "Message": message})
        return {k: v for k, v in answer.items() if v or k in ("Successful", "Failed")}

    def op_UpdateClusterSoftware(self, params: dict[str, Any]) -> dict[str, Any]:
        check.api_model("UpdateClusterSoftware", params)
        self._cluster(params)
        return update_cluster_software(self.cluster, self.fleet, params)

    def op_CreateCluster(self, params: dict[str, Any]) -> dict[str, Any]:
        check.api_model("CreateCluster", params)
        name = params.get("ClusterName")
        if name == self.cluster.name:
            raise ApiError("ResourceInUse", f"Cluster {name} already exists")
        raise ApiError(
            "ResourceLimitExceeded", f"hyperpod-local emulates one cluster ({self.cluster.name}); {name} is not created"
        )

    def op_UpdateCluster(self, params: dict[str, Any]) -> dict[str, Any]:
        check.api_model("UpdateCluster", params)
        self._cluster(params)
        specs = list(params.get("InstanceGroups") or [])
        problems: list[str] = []
        if not 1 <= len(specs) <= check.UPDATE_GROUPS_MAX:
            problems.append(f"InstanceGroups: {len(specs)} given; allowed: 1 to {check.UPDATE_GROUPS_MAX}")
        for index, spec in enumerate(specs):
            where = f"InstanceGroups[{index}]"
            group = self.fleet.groups.get(spec.get("InstanceGroupName"))
            if group is None:
                problems.append(
                    f"{where}.InstanceGroupName: no instance group {spec.get('InstanceGroupName')!r} in this cluster"
                )
                continue
            count = check.integer(spec, "InstanceCount", 0, check.INSTANCE_COUNT_MAX, problems)
            check.integer(spec, "MinInstanceCount", 0, check.INSTANCE_COUNT_MAX, problems)
            problems.extend(refused(spec, group, where))
            if group.node_type != "Compute" and count is not None and count != group.target:
                problems.append(
                    f"{where}.InstanceCount: {group.name} is a {group.node_type} group; only compute groups scale"
                )
        check.check(problems)
        now = self.fleet.clock()
        for spec in specs:
            group = self.fleet.groups[spec["InstanceGroupName"]]
            if "MinInstanceCount" in spec:
                group.min_count = spec["MinInstanceCount"]
            count = int(spec["InstanceCount"])
            if count == group.target:
                continue
            self.fleet.events.record(
                f"Target count of {group.name} set from {group.target} to {count}", group=group.name
            )
            if count > group.target:
                for _ in range(count - group.target):
                    self.fleet.new_node(group, now)
                group.target = count
            else:
                for node in sorted(
                    self.fleet.live(group.name), key=lambda n: (n.status == RUNNING, n.created), reverse=True
                )[: len(self.fleet.live(group.name)) - count]:
                    self.fleet.remove(node, "removed by UpdateCluster (lower InstanceCount)")
                group.target = count
        return {"ClusterArn": self.cluster.arn}


def _page(items: list[Any], token: Any, size: int) -> tuple[list[Any], str | None]:
    start = 0
    if token:
        try:
            start = int(base64.urlsafe_b64decode(str(token).encode()).decode())
        except ValueError:
            raise validation(f"NextToken: {token!r} is not a token this API returned") from None
    end = start + size
    next_token = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    return items[start:end], next_token
