"""The requests a config produces, API-shaped, for the API-MODEL rule (no aws_cdk import): the CreateCluster request
and, given the deployed config, the UpdateCluster request the change produces.

The request is the one the stack sends: the same members, from the same model values, as
:class:`~hyperpod_cdk.constructs.cluster.HyperPodCluster` and :mod:`~hyperpod_cdk.constructs.group_api` render into
``AWS::SageMaker::Cluster`` (whose property names are the API's member names), with what the stack merges in: the
cluster name with the organization's prefix (:func:`~hyperpod_cdk.core.merged_values.deployed_name`), the tags every
resource gets and the organization's key on the node volumes (:mod:`hyperpod_cdk.core.merged_values`). What only a
deployment knows (the execution role's ARN, the lifecycle prefix's URI, a new file system's DNS name, a new VPC's
subnet) is :data:`UNKNOWN`, which the checker skips. tests/test_api_request.py holds this request against every
example's synthesized template, and against examples synthesized with an organization section, so the two cannot
drift apart unseen.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.aws_data.fields import field_of_member, plain_group_members
from hyperpod_cdk.core.accounting import slurmdbd_owner
from hyperpod_cdk.core.merged_values import (
    MergedTag,
    deployed_name,
    has_budget,
    merged_tags,
    organization_volume_key,
    with_volume_key,
)
from hyperpod_cdk.model import (
    AutoPatch,
    BatchSize,
    Capacity,
    InstanceGroup,
    NodeProvisioningMode,
    PatchingStrategy,
    RollingDeployment,
    SlurmMode,
)
from training_runtime.params import SLURMDBD_BY_HYPERPOD

if TYPE_CHECKING:
    from hyperpod_cdk.rules.view import ClusterView


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
"""A value known only at deployment."""

PATCHING_STRATEGIES = {PatchingStrategy.WHEN_IDLE: "WhenIdle", PatchingStrategy.WHEN_ALL_IDLE: "WhenAllIdle"}
CAPACITY_OPTIONS = {Capacity.SPOT: "Spot", Capacity.ON_DEMAND: "OnDemand"}


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN


def _batch(batch: BatchSize | None) -> dict[str, Any] | None:
    return None if batch is None else {"Type": str(batch.type), "Value": batch.value}


def _deployment(deployment: RollingDeployment | None) -> dict[str, Any] | None:
    if deployment is None:
        return None
    policy = None
    if deployment.maximum_batch_size is not None:
        policy = _compact(
            {
                "MaximumBatchSize": _batch(deployment.maximum_batch_size),
                "RollbackMaximumBatchSize": _batch(deployment.rollback_maximum_batch_size),
            }
        )
    alarms = [{"AlarmName": name} for name in deployment.rollback_alarms] or None
    return _compact(
        {
            "RollingUpdatePolicy": policy,
            "WaitIntervalInSeconds": deployment.wait_interval_s,
            "AutoRollbackConfiguration": alarms,
        }
    )


def _auto_patch(patch: AutoPatch) -> dict[str, Any]:
    return _compact(
        {"PatchingStrategy": PATCHING_STRATEGIES[patch.strategy], "DeploymentConfig": _deployment(patch.deployment)}
    )


def _storage(group: InstanceGroup, view: ClusterView) -> list[dict[str, Any]]:
    configs = _own_storage(group, view)
    organization_key = sent_volume_key(view)
    return with_volume_key(configs, organization_key) if organization_key is not None else configs


def sent_volume_key(view: ClusterView) -> str | None:
    """The organization's key, when the stack puts it on the node volumes (the ``KmsEncryption`` aspect)."""
    key = view.organization.kms_key_arn if view.organization is not None else None
    return organization_volume_key(key, view.node_provisioning_mode) if key is not None else None


def _own_storage(group: InstanceGroup, view: ClusterView) -> list[dict[str, Any]]:
    key = group.volume_kms_key_arn
    configs: list[dict[str, Any]] = []
    if group.ebs_volume_gib is not None:
        configs.append({"EbsVolumeConfig": _compact({"VolumeSizeInGB": group.ebs_volume_gib, "VolumeKmsKeyId": key})})
    if key is not None:
        configs.append({"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": key}})
    if view.mode != SlurmMode.API_DRIVEN:
        return configs
    if view.storage is not None:
        existing = view.storage.existing
        configs.append(
            {
                "FsxLustreConfig": {
                    "DnsName": (existing.dns_name or UNKNOWN) if existing else UNKNOWN,
                    "MountName": existing.mount_name if existing else UNKNOWN,
                    "MountPath": view.fsx_mount_path,
                }
            }
        )
    if view.openzfs is not None:
        existing_zfs = view.openzfs.existing
        configs.append(
            {
                "FsxOpenZfsConfig": {
                    "DnsName": existing_zfs.dns_name if existing_zfs else UNKNOWN,
                    "MountPath": view.openzfs.mount_path,
                }
            }
        )
    return configs


def group_request(group: InstanceGroup, view: ClusterView) -> dict[str, Any]:
    """One ``ClusterInstanceGroupSpecification``."""
    override = group.override_vpc
    api_driven = view.mode == SlurmMode.API_DRIVEN
    partition = group.partition_name
    return _compact(
        {
            "InstanceGroupName": group.name,
            **{member: getattr(group, name) for member, name in plain_group_members()},
            "ExecutionRole": UNKNOWN,
            "LifeCycleConfig": {
                "SourceS3Uri": UNKNOWN,
                "OnCreate" if not api_driven else "OnInitComplete": UNKNOWN,
            },
            "SlurmConfig": _compact(
                {"NodeType": group.role.value.capitalize(), "PartitionNames": [partition] if partition else None}
            )
            if api_driven
            else None,
            "InstanceStorageConfigs": _storage(group, view) or None,
            "OnStartDeepHealthChecks": [str(c) for c in group.deep_health_checks] or None,
            "InstanceType": None if group.flexible else group.instance_type,
            "InstanceRequirements": {"InstanceTypes": list(group.instance_types)} if group.flexible else None,
            "CapacityRequirements": {CAPACITY_OPTIONS[group.capacity]: {}} if group.capacity else None,
            "ScheduledUpdateConfig": _compact(
                {
                    "ScheduleExpression": group.scheduled_update.schedule_expression,
                    "DeploymentConfig": _deployment(group.scheduled_update.deployment),
                }
            )
            if group.scheduled_update
            else None,
            "AutoPatchConfig": _auto_patch(group.auto_patch) if group.auto_patch else None,
            "OverrideVpcConfig": None
            if override is None
            else {"SecurityGroupIds": list(override.security_group_ids), "Subnets": list(override.subnet_ids)},
            "NetworkInterface": None
            if group.network_interface is None
            else {"InterfaceType": str(group.network_interface)},
        }
    )


def _orchestrator(view: ClusterView) -> dict[str, Any] | None:
    if view.mode != SlurmMode.API_DRIVEN:
        return None
    continuous = view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS
    options = view.runtime_options
    database = None
    if (
        options is not None
        and slurmdbd_owner(view.mode, view.node_provisioning_mode, options.accounting) == SLURMDBD_BY_HYPERPOD
    ):
        from training_runtime.render.slurmdbd_conf import DATABASE_NAME  # here: the render package takes 60 ms

        accounting = options.accounting
        database = {
            "Endpoint": accounting.host,
            "Port": accounting.port,
            "SecretArn": accounting.password_secret_arn,
            "Name": DATABASE_NAME,
        }
    strategy = None if continuous else str(view.slurm_config_strategy)
    return {"Slurm": _compact({"SlurmConfigStrategy": strategy, "AccountingDatabase": database})}


def sent_cluster_name(view: ClusterView) -> str:
    """The name HyperPod gets: the cluster's with the organization's prefix."""
    return deployed_name(view.cluster_name, view.organization, view.is_unresolved)


def sent_tags(view: ClusterView) -> dict[str, MergedTag]:
    """The cluster's tags as the stack merges them (:func:`~hyperpod_cdk.core.merged_values.merged_tags`), by key."""
    budget = sent_cluster_name(view) if has_budget(view.cost, view.observability) else None
    return merged_tags(view.tags, view.organization, budget)


def cluster_request(view: ClusterView) -> dict[str, Any]:
    """The CreateCluster request of ``view``, as the stack sends it."""
    network = view.network
    subnet = network.subnet_id if network is not None and network.subnet_id else UNKNOWN
    group_id = network.security_group_id if network is not None and network.security_group_id else UNKNOWN
    mode = view.node_provisioning_mode
    return _compact(
        {
            "ClusterName": sent_cluster_name(view),
            "InstanceGroups": [group_request(g, view) for g in view.groups],
            "VpcConfig": {"SecurityGroupIds": [group_id], "Subnets": [subnet]},
            "Tags": [{"Key": k, "Value": t.value} for k, t in sent_tags(view).items()] or None,
            "NodeRecovery": view.node_recovery,
            "Orchestrator": _orchestrator(view),
            "NodeProvisioningMode": NodeProvisioningMode(mode).cfn if mode else None,
        }
    )


def update_request(view: ClusterView) -> dict[str, Any] | None:
    """The UpdateCluster request the change from the deployed config (``view.previous``) to ``view`` produces:
    the cluster's name, every group's new specification, the groups no longer there by name
    (``InstanceGroupsToDelete``), node recovery, provisioning mode and orchestrator. Tags change through AddTags and
    DeleteTags, not UpdateCluster. None without a deployed config, or when the name HyperPod gets changes:
    CloudFormation then replaces the cluster (ClusterName is create-only), and the CreateCluster request is the one
    sent."""
    previous = view.previous
    if previous is None:
        return None
    create = cluster_request(view)
    if sent_cluster_name(previous) != create["ClusterName"]:
        return None
    names = {g.name for g in view.groups}
    removed = [g.name for g in previous.groups if g.name not in names]
    return _compact(
        {
            "ClusterName": create["ClusterName"],
            "InstanceGroups": create["InstanceGroups"],
            "InstanceGroupsToDelete": removed or None,
            "NodeRecovery": create.get("NodeRecovery"),
            "NodeProvisioningMode": create.get("NodeProvisioningMode"),
            "Orchestrator": create.get("Orchestrator"),
        }
    )


def _compact(members: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in members.items() if v is not None}


def config_field(view: ClusterView, member_path: str) -> str:
    """The config field (as ``view`` names it) that request member ``member_path`` comes from, by the field map
    (:func:`hyperpod_cdk.aws_data.fields.field_of_member`); the member path itself when none maps."""
    found = field_of_member(member_path)
    if found is None:
        return member_path
    field, indexes, rest = found
    path = field.in_section
    for position in indexes:
        path = path.replace("[]", f"[{position}]", 1)
    item = re.match(r"\[(\d+)\]", rest)  # an item of a list the field holds
    if field.path == "tags" and item:  # the file's tags are a mapping: name the key
        keys = sorted(view.tags)
        index = int(item.group(1))
        return view.path("cluster", f"tags.{keys[index]}" if index < len(keys) else "tags")
    if re.fullmatch(r"\[\d+\]", rest):
        path += rest
    if field.path == "instance_groups[].partition":  # a compute group's partition is its name unless given
        index = int(indexes[0])
        given = index < len(view.groups) and view.groups[index].partition
        path = path if given else path.replace(".partition", ".name")
    return view.path(field.section, path)
