"""Rules on a compute group's ``scaling``: where the scaler may grow and shrink a group, and its bounds.

The scaler (:mod:`training_runtime.scaler`) calls ``BatchAddClusterNodes`` and ``BatchDeleteClusterNodes`` on the
group; these rules keep it to the groups and clusters where those calls are allowed and safe. The node re-checks
the parameters file's ``scaling`` with :func:`training_runtime.scaling.parse_scaling`.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.model import InstanceGroup, NodeProvisioningMode, NodeRole
from hyperpod_cdk.rules.groups import MAX_INSTANCE_COUNT, each_group, group_path
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import needs
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.hyperpod_facts import ADD_NODES_MAX
from training_runtime.problems import WARNING, Problem

MAX_IDLE_MINUTES = 7 * 24 * 60
"""A week: a node idle longer is not one the scaler should keep waiting on (hyperpod-cdk's bound)."""

API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference"
BATCH_ADD = f"{API}/API_BatchAddClusterNodes.html"
BATCH_DELETE = f"{API}/API_BatchDeleteClusterNodes.html"
GROUP_SPEC = f"{API}/API_ClusterInstanceGroupSpecification.html"
DEEP_HEALTH = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-deep-health-checks.html"
SCALE_DOWN = "https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-scale-down.html"

rule = REGISTRY.rule


def scaled(view: ClusterView) -> Iterator[tuple[int, InstanceGroup]]:
    """Every group with ``scaling``, with its index."""
    for index, group in enumerate(view.groups):
        if group.scaling is not None:
            yield index, group


def _where(view: ClusterView, index: int, field: str = "") -> str:
    return group_path(view, index, "scaling" + (f".{field}" if field else ""))


@rule(
    "GRP-SCALING-BOUNDS",
    "instance_groups",
    "instance_groups[*].scaling",
    source=f"{BATCH_ADD} (IncrementTargetCountBy 1-{ADD_NODES_MAX} per call); AWS::SageMaker::Cluster InstanceCount "
    f"(0-{MAX_INSTANCE_COUNT}); "
    "hyperpod-cdk (idle_minutes 1 minute to a week)",
)
def bounds(view: ClusterView) -> Iterator[Problem]:
    """scaling: 0 <= min <= max, max 1 to 6758 (a group's most instances), idle_minutes 1 to 10080 (a week)."""
    for index, group in scaled(view):
        scaling = group.scaling
        assert scaling is not None
        if not 0 <= scaling.min <= MAX_INSTANCE_COUNT:
            yield Problem(_where(view, index, "min"), f"allowed: 0 to {MAX_INSTANCE_COUNT}", got=scaling.min)
        if not 1 <= scaling.max <= MAX_INSTANCE_COUNT:
            yield Problem(
                _where(view, index, "max"),
                f"allowed: 1 to {MAX_INSTANCE_COUNT} (a group that may never have a node needs no scaler)",
                got=scaling.max,
            )
        elif scaling.min > scaling.max:
            yield Problem(
                _where(view, index, "min"),
                f"above max {scaling.max}: the scaler could never keep it",
                got=scaling.min,
                fix=f"use at most {scaling.max}, or raise max",
            )
        if not 1 <= scaling.idle_minutes <= MAX_IDLE_MINUTES:
            yield Problem(
                _where(view, index, "idle_minutes"),
                f"allowed: 1 to {MAX_IDLE_MINUTES} (a week)",
                got=scaling.idle_minutes,
            )


continuous = rule(
    "GRP-SCALING-CONTINUOUS",
    "instance_groups",
    "instance_groups[*].scaling",
    needs=("cluster",),
    source=f'{BATCH_ADD} ("only supported for clusters using Continuous as the NodeProvisioningMode")',
)(
    needs(
        "Scaling needs node_provisioning_mode continuous: BatchAddClusterNodes works only there.",
        each_group("scaling", set_only=True),
        lambda view: view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS,
        "the scaler adds nodes with BatchAddClusterNodes, which HyperPod supports only for clusters with "
        "continuous node provisioning",
        fix="set node_provisioning_mode: continuous (new clusters only), or remove scaling",
        show_value=False,
    )
)


@rule(
    "GRP-SCALING-ROLE",
    "instance_groups",
    "instance_groups[*].scaling",
    source=f"{BATCH_DELETE} (controller nodes cannot be deleted); hyperpod-cdk (the scaler follows a compute "
    "group's partition)",
)
def role(view: ClusterView) -> Iterator[Problem]:
    """Only compute groups scale: the controller and login nodes run Slurm itself and are never deleted."""
    for index, group in scaled(view):
        if group.role != NodeRole.COMPUTE:
            yield Problem(
                _where(view, index),
                f"a {group.role} group cannot scale: the scaler follows a compute group's partition, and the "
                f"{group.role} nodes run the cluster's Slurm",
                fix="remove scaling from this group",
            )


@rule(
    "GRP-SCALING-TRAINING-PLAN",
    "instance_groups",
    "instance_groups[*].scaling",
    source=f"{GROUP_SPEC} (TrainingPlanArn: the group's capacity is the plan's reserved instances); hyperpod-cdk",
)
def training_plan(view: ClusterView) -> Iterator[Problem]:
    """A group on a training plan does not scale: its instances are reserved and paid for whether they run or not."""
    for index, group in scaled(view):
        if group.training_plan_arn is not None:
            yield Problem(
                _where(view, index),
                "a group on a training plan runs reserved capacity, paid for the plan's whole term: deleting its "
                "idle nodes saves nothing and re-adding them may find the reservation released",
                fix="remove scaling, or move the group off the training plan",
            )


@rule(
    "GRP-SCALING-COUNT",
    "instance_groups",
    "instance_groups[*].count",
    source="hyperpod-cdk (count is the group's size at creation; the scaler keeps min..max)",
)
def count_in_range(view: ClusterView) -> Iterator[Problem]:
    """A scaled group's count (its size at creation) lies within scaling.min..scaling.max."""
    for index, group in scaled(view):
        scaling = group.scaling
        assert scaling is not None
        if not view.concrete(group.count) or scaling.min > scaling.max:
            continue
        if not scaling.min <= group.count <= scaling.max:
            yield Problem(
                group_path(view, index, "count"),
                f"outside scaling {scaling.min}..{scaling.max}: the group would start where the scaler must undo it",
                got=group.count,
                fix=f"use a count from {scaling.min} to {scaling.max}",
            )


@rule(
    "GRP-SCALING-MIN-COUNT",
    "instance_groups",
    "instance_groups[*].scaling.min",
    source=f"{GROUP_SPEC} (MinInstanceCount: a group under it while Creating or Updating rolls back after 3 "
    "hours, and BatchAddClusterNodes/BatchDeleteClusterNodes are refused meanwhile); rule GRP-MIN-COUNT",
)
def at_least_min_count(view: ClusterView) -> Iterator[Problem]:
    """scaling.min is at least min_count (MinInstanceCount): a deploy at a count under it would stall the group."""
    for index, group in scaled(view):
        scaling = group.scaling
        assert scaling is not None
        if view.concrete(group.min_count) and scaling.min < group.min_count:  # type: ignore[operator]
            yield Problem(
                _where(view, index, "min"),
                f"below min_count {group.min_count}: once the scaler shrinks the group under MinInstanceCount, "
                "the next deploy sends a count under it, and HyperPod holds the group Updating (refusing the "
                "scaler's calls) until it rolls back after 3 hours",
                got=scaling.min,
                fix=f"use at least {group.min_count}, or lower min_count",
            )


@rule(
    "GRP-SCALING-PARTITION",
    "instance_groups",
    "instance_groups[*].partition",
    source="hyperpod-cdk (the scaler maps a partition's pending jobs to one group)",
)
def own_partition(view: ClusterView) -> Iterator[Problem]:
    """A scaled group has its partition to itself: the scaler grows the one group whose partition jobs wait for."""
    for index, group in scaled(view):
        partition = group.partition_name
        others = [g.name for g in view.groups if g is not group and partition and g.partition_name == partition]
        if others:
            yield Problem(
                group_path(view, index, "partition"),
                f"partition {partition!r} is shared with {', '.join(others)}: the scaler cannot tell "
                "which group a waiting job needs",
                got=partition,
                fix="give the scaled group a partition of its own",
            )


@rule(
    "GRP-SCALING-PARAMETER",
    "parameters",
    "parameters.instance_groups.*.count",
    needs=("instance_groups",),
    source="hyperpod-cdk (docs/scaler-cloudformation.md: the deployed count, not a launch choice, is the "
    "template's count); AWS CloudFormation: an update keeps a parameter's previous value",
)
def count_parameter(view: ClusterView) -> Iterator[Problem]:
    """A scaled group's count is no launch parameter: a stack update would send the parameter's stale value."""
    if view.parameters is None:
        return
    for _, group in scaled(view):
        choice = view.parameters.instance_groups.get(group.name)
        if choice is not None and choice.count is not None:
            yield Problem(
                view.path("parameters", f"instance_groups.{group.name}.count"),
                f"group {group.name!r} scales: after launch the scaler owns its count, and a stack update that "
                "keeps this parameter's previous value would make HyperPod terminate or launch nodes to match it",
                fix=f"remove the count choice; instance_groups[name={group.name}].scaling bounds the count",
            )


@rule(
    "GRP-SCALING-DEEP-HEALTH",
    "instance_groups",
    "instance_groups[*].deep_health_checks",
    level=WARNING,
    source=(
        f"{DEEP_HEALTH}; docs/research/hyperpod-2026-fidelity.md §5 (deep health checks add 45-90 minutes per launch)"
    ),
)
def deep_health_checks(view: ClusterView) -> Iterator[Problem]:
    """A scaled group with deep health checks waits 45-90 more minutes for every node it adds."""
    for index, group in scaled(view):
        if group.deep_health_checks:
            yield Problem(
                group_path(view, index, "deep_health_checks"),
                "every node the scaler adds runs them before it joins Slurm: 45-90 minutes on top of the 15-25 a "
                "launch takes, while the jobs that asked for it wait",
                got=[str(c) for c in group.deep_health_checks],
                fix="remove them from the scaled group (run them on demand, or on a fixed group)",
            )
