"""Rules on where a group's instances come from: Spot or On-Demand, the minimum count, continuous provisioning."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_support import api_rule
from hyperpod_cdk.model import Capacity, NodeProvisioningMode, NodeRole
from hyperpod_cdk.rules.groups import MAX_INSTANCE_COUNT, group_path
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

SPOT_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-spot.html"

rule = REGISTRY.rule


@rule(
    "GRP-CAPACITY",
    "instance_groups",
    "instance_groups[*].capacity",
    source=f"AWS::SageMaker::Cluster CapacityRequirements; {SPOT_DOC} (Spot is for interruptible work)",
)
def capacity(view: ClusterView) -> Iterator[Problem]:
    """Spot capacity only on compute groups: a reclaimed controller or login node takes the cluster's Slurm with it."""
    for index, group in enumerate(view.groups):
        if group.capacity == Capacity.SPOT and group.role != NodeRole.COMPUTE:
            yield Problem(
                group_path(view, index, "capacity"),
                f"a {group.role} group cannot run on Spot: EC2 reclaims Spot instances, and the cluster's "
                f"{'slurmctld' if group.role == NodeRole.CONTROLLER else 'login node'} goes with them",
                got=str(group.capacity),
                fix="use on-demand (or leave capacity out) for this group",
            )


@api_rule(rule, "min-count", "instance_groups", "instance_groups[*].min_count")
def min_count(view: ClusterView) -> Iterator[Problem]:
    """min_count is 0 to the group's count, on compute groups only (controller and login nodes are all needed)."""
    for index, group in enumerate(view.groups):
        value = group.min_count
        if not view.concrete(value):
            continue
        where = group_path(view, index, "min_count")
        if group.role != NodeRole.COMPUTE:
            yield Problem(
                where,
                f"only compute groups take a minimum: HyperPod needs every {group.role} node before the cluster "
                "is InService",
                got=value,
                fix="remove it from this group",
            )
        elif isinstance(value, bool) or not 0 <= value <= MAX_INSTANCE_COUNT:  # type: ignore[operator]
            yield Problem(where, f"allowed: 0 to {MAX_INSTANCE_COUNT}", got=value)
        elif view.concrete(group.count) and value > group.count:  # type: ignore[operator]
            yield Problem(
                where,
                f"above the group's count {group.count}: HyperPod could never reach it",
                got=value,
                fix=f"use at most {group.count}",
            )


@api_rule(rule, "spot-continuous", "instance_groups", "instance_groups[*].capacity", needs=("cluster",))
def spot_continuous(view: ClusterView) -> Iterator[Problem]:
    """Spot groups want node_provisioning_mode continuous: otherwise one unfilled group fails the whole create."""
    if view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS:
        return
    for index, group in enumerate(view.groups):
        if group.capacity == Capacity.SPOT:
            yield Problem(
                group_path(view, index, "capacity"),
                "Spot capacity may be short; without continuous provisioning a group HyperPod cannot fill fails "
                "the whole cluster creation or update, which rolls back",
                got=str(group.capacity),
                fix="set node_provisioning_mode: continuous (new clusters only)",
            )


@api_rule(rule, "provisioning-change", "cluster", "node_provisioning_mode")
def provisioning_changes(view: ClusterView) -> Iterator[Problem]:
    """Changing a deployed cluster's node_provisioning_mode: AWS's sources disagree on switching to continuous,
    and nothing switches back."""
    previous = view.previous
    if previous is None or previous.node_provisioning_mode == view.node_provisioning_mode:
        return
    yield Problem(
        view.path("cluster", "node_provisioning_mode"),
        f"changed from {previous.node_provisioning_mode or 'none'}: AWS's Slurm page offers continuous "
        "provisioning for new clusters while UpdateCluster takes NodeProvisioningMode, and no value switches a "
        "continuous cluster back; the update may fail",
        got=view.node_provisioning_mode,
        fix="keep the deployed value, or create a new cluster (or try the switch on a test cluster first)",
    )
