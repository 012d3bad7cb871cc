"""Small builders for construct tests (validation off; one App per variant)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from hyperpod_cdk import (
    ClusterNetwork,
    HyperPodCluster,
    InstanceGroup,
    LifecycleScripts,
    LustreStorage,
    NodeRole,
)

CONTROLLER = InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1)
WORKERS = InstanceGroup(name="workers", instance_type="ml.c5.4xlarge", count=2)


def new_stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(builtin_cloud_formation_validation=False), "Test")


def cluster_stack(
    *, storage: bool = True, groups: tuple[InstanceGroup, ...] = (CONTROLLER, WORKERS), **cluster_props: Any
) -> tuple[cdk.Stack, HyperPodCluster]:
    stack = new_stack()
    network = ClusterNetwork(stack, "Network")
    lustre = LustreStorage(stack, "Storage", network=network) if storage else None
    lifecycle = LifecycleScripts(stack, "Scripts")
    cluster = HyperPodCluster(
        stack,
        "Cluster",
        cluster_name=cluster_props.pop("cluster_name", "test-cluster"),
        network=network,
        lifecycle=lifecycle,
        storage=lustre,
        instance_groups=groups,
        **cluster_props,
    )
    return stack, cluster


def only(template: Template, resource_type: str) -> tuple[str, dict[str, Any]]:
    """The single resource of a type: (logical ID, resource)."""
    found = template.find_resources(resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {list(found)}"
    return next(iter(found.items()))
