"""The instance-group members UpdateCluster refuses to change once the group exists, from hyperpod-cdk's update
policies (:mod:`hyperpod_cdk.aws_data.update_policy`, kind ``refused``): each names the config field whose policy
carries
AWS's sentence, so the emulator and ``validate --previous`` refuse the same changes with the same words.

AWS documents that these cannot change ("Cannot be modified after the instance group is created", ...) but no
public source shows the error the service returns: the message is ours (the ValidationException code is the one
UpdateCluster's page lists for a request that "does not satisfy the constraints"). A member the request leaves out
is not compared: AWS does not say whether leaving it out of an UpdateCluster clears it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hyperpod_cdk.aws_data.update_policy import policy_for
from hyperpod_local.control_plane.model import Group

Read = Callable[[dict[str, Any]], Any]


def _capacity(spec: dict[str, Any]) -> Any:
    given = spec.get("CapacityRequirements")
    return None if given is None else next(iter(given), None)


def _kms(spec: dict[str, Any]) -> Any:
    keys = [
        (c.get("EbsVolumeConfig") or {}).get("VolumeKmsKeyId")
        for c in spec.get("InstanceStorageConfigs") or []
        if (c.get("EbsVolumeConfig") or {}).get("VolumeKmsKeyId")
    ]
    return keys[0] if keys else None


REFUSED: dict[str, tuple[str, Callable[[dict[str, Any]], bool], Read, Callable[[Group], Any]]] = {
    # member: (config field, whether the request gives it, its value in the request, the group's value)
    "InstanceType": (
        "instance_groups[].instance_type",
        lambda s: "InstanceType" in s,
        lambda s: s["InstanceType"],
        lambda g: g.instance_type,
    ),
    "ThreadsPerCore": (
        "instance_groups[].threads_per_core",
        lambda s: "ThreadsPerCore" in s,
        lambda s: s["ThreadsPerCore"],
        lambda g: g.threads_per_core,
    ),
    "SlurmConfig.NodeType": (
        "instance_groups[].role",
        lambda s: "NodeType" in (s.get("SlurmConfig") or {}),
        lambda s: s["SlurmConfig"]["NodeType"],
        lambda g: g.node_type,
    ),
    "CapacityRequirements": (
        "instance_groups[].capacity",
        lambda s: "CapacityRequirements" in s,
        _capacity,
        lambda g: g.capacity,
    ),
    "OverrideVpcConfig": (
        "instance_groups[].override_vpc",
        lambda s: "OverrideVpcConfig" in s,
        lambda s: s["OverrideVpcConfig"],
        lambda g: g.override_vpc,
    ),
    "InstanceStorageConfigs.EbsVolumeConfig.VolumeKmsKeyId": (
        "instance_groups[].volume_kms_key_arn",
        lambda s: "InstanceStorageConfigs" in s,
        _kms,
        lambda g: g.volume_kms_key_id,
    ),
    "ExecutionRole": (
        "instance_groups[].execution_role",
        lambda s: "ExecutionRole" in s,
        lambda s: s["ExecutionRole"],
        lambda g: g.execution_role,
    ),
}
"""Every refused field of an instance group (tests/test_control_plane_updates.py checks the policies have no other)."""


def refused(spec: dict[str, Any], group: Group, where: str) -> list[str]:
    """The problems of an UpdateCluster ``spec`` for the existing ``group``: one per refused member it changes."""
    problems = []
    for member, (field, given, requested, deployed) in REFUSED.items():
        if not given(spec) or requested(spec) == deployed(group):
            continue
        policy = policy_for(field)
        problems.append(
            f"{where}.{member}: cannot be updated on the existing instance group {group.name} "
            f"(it has {deployed(group)!r}, the request asks for {requested(spec)!r}). AWS: "
            f'"{policy.quote}" ({policy.source}). To change it, create a new instance group'
        )
    return problems
