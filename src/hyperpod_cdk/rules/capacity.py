"""Rules on where a group's instances come from: Spot or On-Demand, a training plan, UltraServers, the minimum count,
continuous provisioning."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_support import api_rule
from hyperpod_cdk.aws_data.quotes import PLANS_DOC, PRIMARY_QUOTE
from hyperpod_cdk.model import Capacity, NodeProvisioningMode, NodeRole
from hyperpod_cdk.rules.field_values import scoped_values
from hyperpod_cdk.rules.groups import MAX_INSTANCE_COUNT, group_path
from hyperpod_cdk.rules.network import cluster_region, zone_region
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.hyperpod_facts import ULTRASERVER_INSTANCE_TYPES, ULTRASERVER_ZONE
from training_runtime.problems import WARNING, Problem

SPOT_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-spot.html"
RESERVE_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html"

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


@rule(
    "GRP-TRAINING-PLAN-CONTROLLER",
    "instance_groups",
    "instance_groups[*].training_plan_arn",
    level=WARNING,
    source=PLANS_DOC,
)
def training_plan_controller(view: ClusterView) -> Iterator[Problem]:
    """The controller group (Slurm's primary group) runs without a training plan: AWS advises against one there."""
    for index, group in enumerate(view.groups):
        if group.role == NodeRole.CONTROLLER and group.training_plan_arn is not None:
            yield Problem(
                group_path(view, index, "training_plan_arn"),
                f"a training plan on the controller group, which holds slurmctld for the cluster's life; AWS: "
                f"{PRIMARY_QUOTE} ({PLANS_DOC})",
                fix="remove it from the controller group (keep plans on compute groups)",
            )


@rule(
    "GRP-ULTRASERVER-ZONE",
    "instance_groups",
    "instance_groups[*].instance_type",
    needs=("network", "region"),
    source=f"{RESERVE_DOC} (UltraServers in SageMaker AI)",
)
def ultraserver_zone(view: ClusterView) -> Iterator[Problem]:
    """UltraServers (ml.p6e-gb200) run in the Dallas Local Zone only: network.availability_zone us-east-1-dfw-2a in
    us-east-1 (a group in its own subnets, override_vpc, is looked at online only)."""
    quote = (
        f'"UltraServers are available only in the Dallas Local Zone ({ULTRASERVER_ZONE}), which is an extension of '
        f'the US East (N. Virginia) Region." ({RESERVE_DOC})'
    )
    net = view.network
    zone = net.availability_zone if net is not None and view.concrete(net.availability_zone) else None
    region = cluster_region(view)
    for index, group in enumerate(view.groups):
        ultra = [t for t in view.types_of(group) if t in ULTRASERVER_INSTANCE_TYPES]
        if not ultra:
            continue
        where = group_path(view, index, "instance_types" if group.flexible else "instance_type")
        if region is not None and region != zone_region(ULTRASERVER_ZONE):
            yield Problem(where, f"UltraServers in {region}; AWS: {quote}", got=", ".join(ultra))
        elif group.override_vpc is None and zone != ULTRASERVER_ZONE:
            placed = zone or "the new VPC's default zone (the Region's first AZ)"
            yield Problem(
                view.path("network", "availability_zone"),
                f"group {group.name!r} runs UltraServers ({', '.join(ultra)}), whose nodes would be in {placed}; "
                f"AWS: {quote}",
                got=zone,
                fix=f"set network.availability_zone: {ULTRASERVER_ZONE} (the Local Zone enabled in the account)",
            )


@api_rule(rule, "min-count", "instance_groups", "instance_groups[*].min_count")
def min_count(view: ClusterView) -> Iterator[Problem]:
    """min_count is 0 to the group's count, on any group (HyperPod gives controller and login groups 1 by default)."""
    for index, group in enumerate(view.groups):
        value = group.min_count
        if not view.concrete(value):
            continue
        where = group_path(view, index, "min_count")
        if isinstance(value, bool) or not 0 <= value <= MAX_INSTANCE_COUNT:  # type: ignore[operator]
            yield Problem(where, f"allowed: 0 to {MAX_INSTANCE_COUNT}", got=value)
        elif view.concrete(group.count) and value > group.count:  # type: ignore[operator]
            yield Problem(
                where,
                f"above the group's count {group.count}: AWS says MinInstanceCount is between 0 and InstanceCount",
                got=value,
                fix=f"use at most {group.count}",
            )


@api_rule(rule, "min-count-continuous", "instance_groups", "instance_groups[*].min_count", needs=("cluster",))
def min_count_continuous(view: ClusterView) -> Iterator[Problem]:
    """min_count (MinInstanceCount) needs node_provisioning_mode continuous: AWS offers MinCount only there (every
    field that sets MinInstanceCount, by the field map)."""
    if view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS:
        return
    for where, value in scoped_values(view, "min-count-continuous"):
        yield Problem(
            where,
            'AWS: "MinCount is only available for clusters with NodeProvisioningMode set to Continuous"',
            got=value,
            fix="set node_provisioning_mode: continuous (a new cluster), or remove it",
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
    """Turning continuous provisioning on for a deployed cluster: AWS's Slurm page documents it in CreateCluster,
    while UpdateCluster takes NodeProvisioningMode and the migration guide speaks of migrating a cluster to it
    (leaving it is UPD-IRREVERSIBLE's: UpdateCluster takes no other value)."""
    previous = view.previous
    if previous is None or previous.node_provisioning_mode == view.node_provisioning_mode:
        return
    if view.node_provisioning_mode != NodeProvisioningMode.CONTINUOUS:
        return
    yield Problem(
        view.path("cluster", "node_provisioning_mode"),
        f"changed from {previous.node_provisioning_mode or 'none'}: AWS's Slurm page says \"To use this feature, set "
        'NodeProvisioningMode to Continuous in your CreateCluster request", while UpdateCluster takes '
        "NodeProvisioningMode and AWS's migration guide speaks of migrating a cluster to continuous provisioning; "
        "the sources disagree on an existing cluster, so the update may fail, and it cannot be undone",
        got=view.node_provisioning_mode,
        fix="try the switch on a test cluster first, or create a new cluster with continuous provisioning",
    )
