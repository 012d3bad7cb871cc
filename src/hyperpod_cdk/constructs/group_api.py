"""An instance group's newer HyperPod settings as ``CfnCluster`` properties: capacity, image and updates,
networking. A setting left unset writes nothing (HyperPod's default), so templates without them do not change."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_sagemaker as sagemaker

from hyperpod_cdk.model import BatchSize, Capacity, InstanceGroup, ScheduledUpdate

Cfn = sagemaker.CfnCluster

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


def scheduled_update_config(update: ScheduledUpdate) -> Any:
    deployment = update.deployment
    return Cfn.ScheduledUpdateConfigProperty(
        schedule_expression=update.schedule_expression,
        deployment_config=None
        if deployment is None
        else Cfn.DeploymentConfigProperty(
            rolling_update_policy=None
            if deployment.maximum_batch_size is None
            else Cfn.RollingUpdatePolicyProperty(
                maximum_batch_size=_batch(deployment.maximum_batch_size),
                rollback_maximum_batch_size=_batch(deployment.rollback_maximum_batch_size),
            ),
            wait_interval_in_seconds=deployment.wait_interval_s,
            auto_rollback_configuration=[Cfn.AlarmDetailsProperty(alarm_name=n) for n in deployment.rollback_alarms]
            or None,
        ),
    )


def group_api_properties(group: InstanceGroup) -> dict[str, Any]:
    """The ``ClusterInstanceGroupProperty`` keyword arguments of the group's settings that are set."""
    override = group.override_vpc
    return {
        "capacity_requirements": capacity_requirements(group.capacity) if group.capacity else None,
        "min_instance_count": group.min_count,
        "image_id": group.image_id,
        "scheduled_update_config": scheduled_update_config(group.scheduled_update) if group.scheduled_update else None,
        "override_vpc_config": None
        if override is None
        else Cfn.VpcConfigProperty(
            security_group_ids=list(override.security_group_ids), subnets=list(override.subnet_ids)
        ),
        "network_interface": None
        if group.network_interface is None
        else Cfn.ClusterNetworkInterfaceProperty(interface_type=str(group.network_interface)),
    }
