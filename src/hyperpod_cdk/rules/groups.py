"""Rules on the instance groups: each group's fields, the groups together, and the catalogue of types."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from hyperpod_cdk.aws_data import instance_catalog
from hyperpod_cdk.aws_data.api_support import api_rule
from hyperpod_cdk.model import DeepHealthCheck, NodeRole
from hyperpod_cdk.rules.network import cluster_region
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import ViewValues, matches, within
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.group_rules import GROUP_RULES, group_problems
from training_runtime.groups import GroupSpec
from training_runtime.hyperpod_facts import HYPERPOD_REGIONS, INSTANCE_COUNT_MAX, INSTANCE_GROUPS_MAX
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.problems import WARNING, Problem

MAX_INSTANCE_GROUPS = INSTANCE_GROUPS_MAX
MAX_INSTANCE_COUNT = INSTANCE_COUNT_MAX
MAX_EBS_VOLUME_GIB = 16384
INSTANCE_TYPE_PATTERN = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
TRAINING_PLAN_ARN_PATTERN = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.+$")

rule = REGISTRY.rule


def group_path(view: ClusterView, index: int, field: str = "") -> str:
    """The field path of group ``index``'s ``field`` (the group itself when empty)."""
    return view.path("instance_groups", f"[{index}]" + (f".{field}" if field else ""))


def each_group(field: str, set_only: bool = False) -> ViewValues:
    """Every group's ``field`` with its path (``set_only``: only the groups where it is not None): what a rule
    shape (:mod:`hyperpod_cdk.rules.shapes`) judges."""

    def values(view: ClusterView) -> list[tuple[str, Any]]:
        return [
            (group_path(view, index, field), getattr(group, field))
            for index, group in enumerate(view.groups)
            if not set_only or getattr(group, field) is not None
        ]

    return values


@rule("GRP-COUNT", "instance_groups", "instance_groups", source="AWS::SageMaker::Cluster InstanceGroups (1-100)")
def group_count(view: ClusterView) -> Iterator[Problem]:
    """A cluster has 1 to 100 instance groups."""
    if not 1 <= len(view.groups) <= MAX_INSTANCE_GROUPS:
        yield Problem(
            view.path("instance_groups"),
            f"got {len(view.groups)} groups; a cluster has 1 to {MAX_INSTANCE_GROUPS}",
        )


def _specs(view: ClusterView) -> list[GroupSpec]:
    return [GroupSpec(g.name, str(g.role), g.instance_type, g.partition) for g in view.groups]


def _register_group_rules() -> None:
    """The runtime's group rules (the node checks its parameters file with the same code)."""
    for book_rule in GROUP_RULES.rules:

        def check(view: ClusterView, _id: str = book_rule.id) -> list[Problem]:
            found = group_problems(_specs(view), view.path("instance_groups"))
            return [p for p in found if p.rule == _id]

        check.__doc__ = book_rule.doc
        rule(book_rule.id, "instance_groups", book_rule.field, source=book_rule.source)(check)


_register_group_rules()


@rule(
    "GRP-INSTANCE-TYPE",
    "instance_groups",
    "instance_groups[*].instance_type",
    needs=("region",),
    source="AWS::SageMaker::Cluster InstanceType enum, per Region (cfn-lint schema bundle)",
)
def instance_type(view: ClusterView) -> Iterator[Problem]:
    """Every instance type (a flexible group's each) is one HyperPod offers: in the stack's Region when known,
    else in some Region."""
    offered = instance_catalog.types_in(view.region) if view.region else None
    for index, group in enumerate(view.groups):
        for position, value in enumerate(group.types):
            if view.concrete(value):
                where = group_path(view, index, f"instance_types[{position}]" if group.flexible else "instance_type")
                yield from _offered(view, where, value, offered)


def _offered(view: ClusterView, where: str, value: str, offered: frozenset[str] | None) -> Iterator[Problem]:
    """Problems of one type: its spelling, that HyperPod offers it, and in the Region when known."""
    if not INSTANCE_TYPE_PATTERN.fullmatch(value):
        yield Problem(
            where,
            "expected a SageMaker instance type such as 'ml.p5.48xlarge' (note the 'ml.' prefix)",
            got=value,
        )
    elif value not in instance_catalog.known_types():
        near = _near(value)
        yield Problem(
            where,
            "HyperPod offers no such instance type in any Region",
            got=value,
            fix=f"did you mean {near}?" if near else "see the InstanceType list in the SageMaker API reference",
        )
    elif offered is not None and value not in offered and value not in instance_catalog.api_only():
        elsewhere = instance_catalog.regions_of(value)
        yield Problem(
            where,
            f"HyperPod does not offer it in {view.region}",
            got=value,
            fix="choose another type or one of its Regions: " + ", ".join(elsewhere[:8]),
        )


def _near(value: str) -> str:
    import difflib

    match = difflib.get_close_matches(value, sorted(instance_catalog.known_types()), n=1, cutoff=0.8)
    return repr(match[0]) if match else ""


LANDING_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod.html"
REGIONS_QUOTE = '"SageMaker HyperPod is available in the following AWS Regions."'
"""Row landing-regions (the list: training_runtime.hyperpod_facts.HYPERPOD_REGIONS)."""


@rule(
    "GRP-REGION",
    "instance_groups",
    "(region)",
    needs=("region",),
    source=f"{LANDING_DOC} (AWS Regions supported by SageMaker HyperPod); AWS's price list (the "
    "AWS::SageMaker::Cluster InstanceType enum per Region, data/instance_types_by_region.json)",
)
def known_region(view: ClusterView) -> Iterator[Problem]:
    """The cluster's Region (the stack's, else network.availability_zone's) is one AWS offers HyperPod in: its
    landing page's list, or its price list."""
    region = cluster_region(view)
    if region and region not in HYPERPOD_REGIONS and instance_catalog.types_in(region) is None:
        yield Problem(
            "region",
            f"HyperPod is not offered there: AWS ({LANDING_DOC}): {REGIONS_QUOTE}, and its price list names no "
            "HyperPod instance type there",
            got=region,
            fix="deploy to one of " + ", ".join(HYPERPOD_REGIONS),
        )


@rule(
    "GRP-REGION-UNLISTED",
    "instance_groups",
    "(region)",
    needs=("region",),
    level=WARNING,
    source=f"{LANDING_DOC} (AWS Regions supported by SageMaker HyperPod), against AWS's price list",
)
def unlisted_region(view: ClusterView) -> Iterator[Problem]:
    """The cluster's Region is one AWS's price list has HyperPod instance types in but its landing page does not
    list: the sources disagree."""
    region = cluster_region(view)
    if region and region not in HYPERPOD_REGIONS and instance_catalog.types_in(region) is not None:
        yield Problem(
            "region",
            f"AWS's price list has HyperPod instance types here, but AWS's HyperPod page ({LANDING_DOC}) does not "
            f"list it: {REGIONS_QUOTE} The sources disagree",
            got=region,
            fix="check that HyperPod takes clusters there (a small test cluster), or deploy to one of "
            + ", ".join(HYPERPOD_REGIONS),
        )


@api_rule(rule, "instance-count", "instance_groups", "instance_groups[*].count")
def instance_count(view: ClusterView) -> Iterator[Problem]:
    """A group has 0 to 6758 instances; controller and login groups at least 1."""
    for index, group in enumerate(view.groups):
        if not view.concrete(group.count):
            continue
        minimum = 0 if group.role == NodeRole.COMPUTE else 1
        if isinstance(group.count, bool) or not minimum <= group.count <= MAX_INSTANCE_COUNT:
            yield Problem(
                group_path(view, index, "count"),
                f"a {group.role} group has {minimum} to {MAX_INSTANCE_COUNT} instances",
                got=group.count,
            )


@rule(
    "GRP-HARDWARE-KNOWN",
    "instance_groups",
    "instance_groups[*].instance_type",
    needs=("cluster", "runtime", "hardware"),
    level=WARNING,
    source="hyperpod-cdk (training_runtime.hardware; slurm.conf(5) NodeName defaults)",
)
def hardware_known(view: ClusterView) -> Iterator[Problem]:
    """In lifecycle-driven mode every compute type needs figures (table or runtime.node_hardware) for slurm.conf."""
    if view.mode != LIFECYCLE_DRIVEN:
        return
    for index, group in enumerate(view.groups):
        if group.role != NodeRole.COMPUTE:
            continue
        for position, value in enumerate(group.types):
            if not view.concrete(value) or view.hardware(value) is not None:
                continue
            yield Problem(
                group_path(view, index, f"instance_types[{position}]" if group.flexible else "instance_type"),
                "no CPU, memory or GPU figures for this type in the runtime's hardware table: the slurm.conf the "
                "runtime renders gives its nodes Slurm's defaults (1 CPU, no GPUs)",
                got=value,
                fix=f"add runtime.node_hardware.{value} with at least cpus and memory_mib",
            )


@rule(
    "GRP-COMPUTE-INSTANCES",
    "instance_groups",
    "instance_groups[*].count",
    needs=("cluster",),
    source="hyperpod-cdk (steps/slurm.py: a partition needs nodes)",
)
def compute_instances(view: ClusterView) -> Iterator[Problem]:
    """In lifecycle-driven mode at least one compute group has instances: slurm.conf needs a partition with nodes."""
    if view.mode != LIFECYCLE_DRIVEN:
        return
    computes = [g for g in view.groups if g.role == NodeRole.COMPUTE]
    if computes and all(view.concrete(g.count) and g.count == 0 for g in computes):
        yield Problem(
            view.path("instance_groups"),
            "every compute group has count 0: the runtime renders slurm.conf with no partition, and every node's "
            "bootstrap stops there",
            fix="give at least one compute group an instance count above zero",
        )


ebs_volume = rule(
    "GRP-EBS-VOLUME",
    "instance_groups",
    "instance_groups[*].ebs_volume_gib",
    source="SageMaker ClusterEbsVolumeConfig.VolumeSizeInGB",
)(
    within(
        "The extra EBS volume is 1 to 16384 GiB.",
        each_group("ebs_volume_gib"),
        1,
        MAX_EBS_VOLUME_GIB,
        "allowed: {low} to {high} GiB",
    )
)


@rule(
    "GRP-DEEP-HEALTH-CHECKS",
    "instance_groups",
    "instance_groups[*].deep_health_checks",
    source="AWS::SageMaker::Cluster OnStartDeepHealthChecks",
)
def deep_health_checks(view: ClusterView) -> Iterator[Problem]:
    """Deep health checks are InstanceStress and/or InstanceConnectivity, each at most once."""
    allowed = [str(c) for c in DeepHealthCheck]
    for index, group in enumerate(view.groups):
        checks = [str(c) for c in group.deep_health_checks]
        where = group_path(view, index, "deep_health_checks")
        for check in checks:
            if check not in allowed:
                yield Problem(where, "allowed: " + ", ".join(allowed), got=check)
        if len(set(checks)) != len(checks):
            yield Problem(where, "list each check once", got=checks)


training_plan = api_rule(rule, "training-plan", "instance_groups", "instance_groups[*].training_plan_arn")(
    matches(
        "A training plan is given by its ARN.",
        each_group("training_plan_arn"),
        TRAINING_PLAN_ARN_PATTERN,
        "expected 'arn:aws:sagemaker:<region>:<account>:training-plan/<name>'",
    )
)


@api_rule(rule, "node-type-immutable", "instance_groups", "instance_groups[*].role")
def role_changes(view: ClusterView) -> Iterator[Problem]:
    """A group's Slurm role (NodeType) cannot change once the cluster exists: the update fails."""
    previous = view.previous
    if previous is None:
        return
    before = {g.name: g for g in previous.groups}
    for index, group in enumerate(view.groups):
        old = before.get(group.name)
        if old is not None and old.role != group.role:
            yield Problem(
                group_path(view, index, "role"),
                f"changed from {old.role}: HyperPod cannot change a group's node type; the update fails",
                got=str(group.role),
                fix="add a new group with the new role instead (and remove the old one)",
            )


@rule(
    "GRP-ROLE-REPLACES",
    "instance_groups",
    "instance_groups",
    level=WARNING,
    source="UpdateCluster InstanceGroupsToDelete (API reference)",
)
def groups_removed(view: ClusterView) -> Iterator[Problem]:
    """Removing a deployed group deletes its nodes and their local disks."""
    previous = view.previous
    if previous is None:
        return
    names = {g.name for g in view.groups}
    for name in sorted({g.name for g in previous.groups} - names):
        yield Problem(
            view.path("instance_groups"),
            f"group {name!r} is gone: UpdateCluster deletes its nodes and their local disks",
            fix="keep it with count 0 if you may need it again",
        )


@rule(
    "GRP-CONTROLLER-ROLE",
    "instance_groups",
    "instance_groups[*].execution_role",
    level=WARNING,
    source="hyperpod-cdk (docs/execution-roles.md, a role per group; security review 2026-12-04 H1)",
)
def controller_role_shared(view: ClusterView) -> Iterator[Problem]:
    """A login or compute group on the controller's execution role lets its jobs and users use the scaler's and the
    accounting secret's permissions."""
    for index, group in enumerate(view.groups):
        if group.shares_controller_role:
            yield Problem(
                group_path(view, index, "execution_role"),
                "the group's nodes assume the controller's execution role: a process on them that reaches the instance "
                "metadata service can add and delete the cluster's nodes (the scaler's policy) and read the accounting "
                "database's secret",
                got=str(group.execution_role),
                fix="leave execution_role out (own) on a new group; for a deployed group, replace it with a new group "
                "(AWS's guide says to keep an existing group's IAM role in UpdateCluster; docs/execution-roles.md)",
            )
