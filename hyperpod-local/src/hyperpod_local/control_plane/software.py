"""``UpdateClusterSoftware`` on the emulated control plane, on AWS's terms for a Slurm cluster.

What AWS says, and what the emulator does about it:

- "Updating your cluster in batches is available only for HyperPod clusters integrated with Amazon EKS"
  (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-update.html). The emulator's cluster is a
  Slurm cluster, so a request with ``DeploymentConfig`` (RollingUpdatePolicy, WaitIntervalInSeconds,
  AutoRollbackConfiguration) is a ValidationException quoting the page; AWS does not document what the service answers
  such a request on Slurm (the message is ours).
- "if you don't specify an instance group in your UpdateClusterSoftware request, then all of the instance groups are
  patched with the specified image" (API reference, UpdateClusterSoftware, ``ImageId``): without ``InstanceGroups``
  every group is updated; with them, every node of the named groups.
- Each node's root volume is re-imaged (the backend's ``reimage``: on a local cluster the node's root overlay is reset
  and its lifecycle script runs again; /fsx stays). Meanwhile the node is ``SystemUpdating`` (a
  ``ClusterInstanceStatus``; AWS does not say which status it shows), the group's ``SoftwareUpdateStatus`` is
  ``InProgress`` and then ``Succeeded`` or ``Failed`` (the API model's sequence), each node gets
  ``LastSoftwareUpdateTime``, and the cluster is ``SystemUpdating`` until no node is [inferred: the API does not
  say which cluster status an update shows].
- The API model lists ``ConflictException``: a group with an update in progress answers it (AWS does not say when).
- Only Running nodes are re-imaged; a node that is not Running is left as it is (AWS does not say).
"""

from __future__ import annotations

from typing import Any

from hyperpod_local.control_plane.fleet import Fleet
from hyperpod_local.control_plane.model import RUNNING, ApiError, ClusterInfo, validation

AMI_UPDATE_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-update.html"
BATCHES_EKS_ONLY = (
    "Updating your cluster in batches is available only for HyperPod clusters integrated with Amazon EKS."
)


def update_cluster_software(cluster: ClusterInfo, fleet: Fleet, params: dict[str, Any]) -> dict[str, Any]:
    """The operation on ``fleet`` (the caller has checked the request against the API model and the cluster's name)."""
    if params.get("DeploymentConfig"):
        raise validation(
            f"DeploymentConfig: this is a Slurm cluster, and {BATCHES_EKS_ONLY} ({AMI_UPDATE_PAGE}); leave "
            "DeploymentConfig out: every node of the named instance groups is updated"
        )
    named = [spec.get("InstanceGroupName") for spec in params.get("InstanceGroups") or []]
    unknown = [name for name in named if name not in fleet.groups]
    if unknown:
        raise validation(
            f"InstanceGroups: no instance group {unknown[0]!r} in this cluster (groups: {', '.join(fleet.groups)})"
        )
    groups = [fleet.groups[name] for name in (named or list(fleet.groups))]
    busy = [g.name for g in groups if g.software_update == "InProgress"]
    if busy:
        raise ApiError("ConflictException", f"instance group {busy[0]} has a software update in progress")
    for group in groups:
        nodes = [n for n in fleet.nodes if n.group == group.name and n.status == RUNNING and n.instance is not None]
        group.software_update = "InProgress" if nodes else "Succeeded"
        group.image_id = str(params.get("ImageId") or "default")
        fleet.events.record(
            f"Software update of {group.name} started: {len(nodes)} node(s) re-imaged", group=group.name
        )
        for node in nodes:
            fleet.start_recovery(node, "reimage")
    return {"ClusterArn": cluster.arn}
