"""The newer HyperPod settings as ``CfnCluster`` properties: a group's instance types, capacity, image and updates,
networking and volume key; the cluster's external accounting database. A setting left unset writes nothing
(HyperPod's default), so templates without them do not change."""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import aws_sagemaker as sagemaker

from hyperpod_cdk.aws_data.fields import plain_group_members
from hyperpod_cdk.constructs.interfaces import LustreTarget, OpenZfsTarget
from hyperpod_cdk.model import (
    AutoPatch,
    BatchSize,
    Capacity,
    InstanceGroup,
    PatchingStrategy,
    RollingDeployment,
    ScheduledUpdate,
    SlurmMode,
)
from training_runtime.options import AccountingOptions
from training_runtime.render.slurmdbd_conf import DATABASE_NAME

Cfn = sagemaker.CfnCluster

PATCHING_STRATEGIES = {PatchingStrategy.WHEN_IDLE: "WhenIdle", PatchingStrategy.WHEN_ALL_IDLE: "WhenAllIdle"}
"""``AutoPatchConfig.PatchingStrategy`` of each choice."""
CAPACITY_OPTIONS = {Capacity.SPOT: "Spot", Capacity.ON_DEMAND: "OnDemand"}
"""The ``CapacityRequirements`` key of each choice; its value is an empty options object."""


def capacity_document(capacity: Capacity) -> dict[str, Any]:
    """``CapacityRequirements`` as the template writes it, for a property override (a launch choice)."""
    return {CAPACITY_OPTIONS[capacity]: {}}


def capacity_requirements(capacity: Capacity) -> Any:
    """``{Spot: {}}`` or ``{OnDemand: {}}``."""
    option = CAPACITY_OPTIONS[capacity]
    return Cfn.ClusterCapacityRequirementsProperty(
        spot={} if option == "Spot" else None, on_demand={} if option == "OnDemand" else None
    )


def _batch(batch: BatchSize | None) -> Any:
    return None if batch is None else Cfn.CapacitySizeConfigProperty(type=str(batch.type), value=batch.value)


def deployment_config(deployment: RollingDeployment | None) -> Any:
    """``DeploymentConfig``, shared by scheduled updates and automatic patching."""
    if deployment is None:
        return None
    return Cfn.DeploymentConfigProperty(
        rolling_update_policy=None
        if deployment.maximum_batch_size is None
        else Cfn.RollingUpdatePolicyProperty(
            maximum_batch_size=_batch(deployment.maximum_batch_size),
            rollback_maximum_batch_size=_batch(deployment.rollback_maximum_batch_size),
        ),
        wait_interval_in_seconds=deployment.wait_interval_s,
        auto_rollback_configuration=[Cfn.AlarmDetailsProperty(alarm_name=n) for n in deployment.rollback_alarms]
        or None,
    )


def scheduled_update_config(update: ScheduledUpdate) -> Any:
    return Cfn.ScheduledUpdateConfigProperty(
        schedule_expression=update.schedule_expression, deployment_config=deployment_config(update.deployment)
    )


def auto_patch_config(patch: AutoPatch) -> Any:
    return Cfn.AutoPatchConfigProperty(
        patching_strategy=PATCHING_STRATEGIES[patch.strategy], deployment_config=deployment_config(patch.deployment)
    )


def volume_configs(group: InstanceGroup) -> list[Any]:
    """The group's EBS entries of ``InstanceStorageConfigs``: the extra volume, and with a group key a root-volume
    entry; the key goes on both. The one place that decides a group's volume key (the organization's rules
    fill in their key only where none is set, and report a different one)."""
    key = group.volume_kms_key_arn
    configs = []
    if group.ebs_volume_gib is not None:
        configs.append(
            Cfn.ClusterInstanceStorageConfigProperty(
                ebs_volume_config=Cfn.ClusterEbsVolumeConfigProperty(
                    volume_size_in_gb=group.ebs_volume_gib, volume_kms_key_id=key
                )
            )
        )
    if key is not None:
        configs.append(
            Cfn.ClusterInstanceStorageConfigProperty(
                ebs_volume_config=Cfn.ClusterEbsVolumeConfigProperty(root_volume=True, volume_kms_key_id=key)
            )
        )
    return configs


def accounting_database(accounting: AccountingOptions) -> Any:
    """``AccountingDatabase`` from ``runtime.accounting``: its host, port and secret. ``Name`` is the schema the
    runtime's slurmdbd uses (``slurm_acct_db``), written out because HyperPod's default is per cluster
    (``slurm_acct_db_<cluster id>``, the API reference): the same database keeps one history whoever runs slurmdbd."""
    # RT-ACCOUNTING-EXTERNAL requires both for an external database before anything renders.
    assert accounting.host is not None and accounting.password_secret_arn is not None
    return Cfn.ClusterAccountingDatabaseProperty(
        endpoint=accounting.host, port=accounting.port, secret_arn=accounting.password_secret_arn, name=DATABASE_NAME
    )


def _snake(member: str) -> str:
    """``MinInstanceCount`` -> ``min_instance_count`` (the L1 property's keyword)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", member).lower()


def group_api_properties(group: InstanceGroup) -> dict[str, Any]:
    """The ``ClusterInstanceGroupProperty`` keyword arguments of the group's settings that are set."""
    override = group.override_vpc
    return {
        # The plain members (data/fields.yaml, render: plain): the group's value as it is, where it is set. An unset
        # one is not passed at all: the oldest aws-cdk-lib we support lacks a newer member's keyword.
        **{
            _snake(member): getattr(group, name)
            for member, name in plain_group_members()
            if getattr(group, name) is not None
        },
        # Exactly one of the two (rule GRP-FLEX-EXCLUSIVE): a flexible group's priority list, or its one type.
        "instance_type": None if group.flexible else group.instance_type,
        "instance_requirements": Cfn.InstanceRequirementsProperty(instance_types=list(group.instance_types))
        if group.flexible
        else None,
        "capacity_requirements": capacity_requirements(group.capacity) if group.capacity else None,
        "scheduled_update_config": scheduled_update_config(group.scheduled_update) if group.scheduled_update else None,
        "auto_patch_config": auto_patch_config(group.auto_patch) if group.auto_patch else None,
        "override_vpc_config": None
        if override is None
        else Cfn.VpcConfigProperty(
            security_group_ids=list(override.security_group_ids), subnets=list(override.subnet_ids)
        ),
        "network_interface": None
        if group.network_interface is None
        else Cfn.ClusterNetworkInterfaceProperty(interface_type=str(group.network_interface)),
    }


def slurm_and_storage(
    mode: SlurmMode,
    group: InstanceGroup,
    storage: LustreTarget | None,
    fsx_mount_path: str,
    openzfs: OpenZfsTarget | None,
) -> tuple[Any, list[Any]]:
    """A group's ``SlurmConfig`` (API-driven only) and ``InstanceStorageConfigs``: its volumes, and (API-driven)
    the file systems HyperPod mounts on its nodes."""
    storage_configs: list[Any] = volume_configs(group)
    slurm_config = None
    if mode == SlurmMode.API_DRIVEN:
        partition = group.partition_name
        slurm_config = Cfn.ClusterSlurmConfigProperty(
            node_type=group.role.value.capitalize(),
            partition_names=[partition] if partition else None,
        )
        if storage is not None:
            storage_configs.append(
                Cfn.ClusterInstanceStorageConfigProperty(
                    fsx_lustre_config=Cfn.ClusterFsxLustreConfigProperty(
                        dns_name=storage.dns_name,
                        mount_name=storage.mount_name,
                        mount_path=fsx_mount_path,
                    )
                )
            )
        if openzfs is not None:
            storage_configs.append(
                Cfn.ClusterInstanceStorageConfigProperty(
                    fsx_open_zfs_config=Cfn.ClusterFsxOpenZfsConfigProperty(
                        dns_name=openzfs.dns_name, mount_path=openzfs.mount_path
                    )
                )
            )
    return slurm_config, storage_configs
