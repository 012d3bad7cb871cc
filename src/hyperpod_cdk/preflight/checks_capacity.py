"""Online rules on capacity: the SageMaker quotas "<type> for cluster usage" and the groups' training plans."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from hyperpod_cdk.preflight import lookups
from hyperpod_cdk.preflight.checks_network import nodes_az
from hyperpod_cdk.preflight.online import account_of, cluster_name, guarded, online_rule
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

QUOTAS_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html (quotas)"
PLANS_DOC = (
    "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingPlan.html; "
    "https://docs.aws.amazon.com/sagemaker/latest/dg/training-plan.html"
)
RESERVE_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html"
QUOTA_NAME = "{} for cluster usage"
"""SageMaker's per-type HyperPod quota, as Service Quotas names it (e.g. "ml.p5.48xlarge for cluster usage")."""
USABLE_PLAN = ("Active", "Scheduled")


def used_by_others(clusters: list[dict[str, Any]], own: str) -> dict[str, int]:
    """Instances per type that the account's other clusters hold (their groups' current or target counts)."""
    used: dict[str, int] = {}
    for cluster in clusters:
        if cluster.get("ClusterName") == own or cluster.get("ClusterStatus") in ("Failed", "Deleting"):
            continue
        for group in cluster.get("InstanceGroups", []):
            count = max(int(group.get("CurrentCount") or 0), int(group.get("TargetCount") or 0))
            used[group["InstanceType"]] = used.get(group["InstanceType"], 0) + count
    return used


@online_rule(
    "AWS-QUOTA",
    "instance_groups",
    "instance_groups[*].count",
    actions=("servicequotas:ListServiceQuotas", "sagemaker:ListClusters", "sagemaker:DescribeCluster"),
    source=f"{QUOTAS_DOC}; Service Quotas API ListServiceQuotas (ServiceCode sagemaker)",
)
def quotas(view: ClusterView) -> Iterator[Problem]:
    """Each type's quota "for cluster usage" covers the config's count (scaling.max for a scaled group) plus what the
    account's other clusters use."""
    account = account_of(view)
    where = view.path("instance_groups")

    def check() -> Iterator[Problem]:
        wanted: dict[str, list[tuple[int, Any]]] = {}
        flexible = []
        for index, group in enumerate(view.groups):
            types = view.types_of(group)
            if not (types and view.concrete(group.peak_count)):  # a scaled group at scaling.max
                continue
            if len(types) == 1:
                wanted.setdefault(types[0], []).append((index, group))
            else:
                flexible.append((index, group, types))
        if not (wanted or flexible):
            return
        limits = lookups.cluster_quotas(account)
        used = used_by_others(lookups.clusters_in_use(account), cluster_name(view))

        def free(instance_type: str) -> int | None:
            limit = limits.get(QUOTA_NAME.format(instance_type))
            return None if limit is None else int(limit) - used.get(instance_type, 0)

        for instance_type, groups in wanted.items():
            needed = sum(int(g.peak_count) for _, g in groups)
            room = free(instance_type)
            index = groups[0][0]
            if room is None:
                yield Problem(
                    group_path(view, index, "instance_type"),
                    f"Service Quotas has no quota {QUOTA_NAME.format(instance_type)!r} in {account.region}: "
                    "the type is not offered for HyperPod there, or the account has none",
                    got=instance_type,
                    fix="pick a type HyperPod offers in this Region, or request the quota (Service Quotas console)",
                )
            elif needed > room:
                yield Problem(
                    group_path(view, index, "count"),
                    f"{instance_type}: the groups want {needed}; the quota {QUOTA_NAME.format(instance_type)!r} is "
                    f"{int(limits[QUOTA_NAME.format(instance_type)])} and other clusters use "
                    f"{used.get(instance_type, 0)}, leaving {room}",
                    got=needed,
                    fix=f"request an increase of {QUOTA_NAME.format(instance_type)!r} to at least "
                    f"{needed + used.get(instance_type, 0)} (Service Quotas, SageMaker), or lower the count "
                    "(scaling.max when it scales)",
                )
        own = {t: sum(int(g.peak_count) for _, g in groups) for t, groups in wanted.items()}
        for index, group, types in flexible:
            room = sum(max((free(t) or 0) - own.get(t, 0), 0) for t in types)
            if int(group.peak_count) > room:
                yield Problem(
                    group_path(view, index, "count"),
                    f"the quotas for cluster usage of {', '.join(types)} leave {room} instances in all (after "
                    "other clusters and this config's single-type groups)",
                    got=group.peak_count,
                    fix="request a quota increase for one of the types, or lower the count (scaling.max when it "
                    "scales)",
                )

    yield from guarded(where, check)


def _plan_name(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def _sharing(view: ClusterView) -> dict[str, list[Any]]:
    """The groups of each training plan, in order (AWS's update example puts two groups on one plan)."""
    groups: dict[str, list[Any]] = {}
    for group in view.groups:
        if view.concrete(group.training_plan_arn) and view.concrete(group.count):
            groups.setdefault(str(group.training_plan_arn), []).append(group)
    return groups


@online_rule(
    "AWS-TRAINING-PLAN",
    "instance_groups",
    "instance_groups[*].training_plan_arn",
    actions=("sagemaker:DescribeTrainingPlan", "ec2:DescribeSubnets"),
    needs=("network",),
    source=PLANS_DOC,
)
def training_plans(view: ClusterView) -> Iterator[Problem]:
    """A group's training plan is active or scheduled, for HyperPod, in this account, of the group's type and AZ,
    with room (for every group that shares it) and time."""
    account = account_of(view)
    sharing = _sharing(view)
    for index, group in enumerate(view.groups):
        arn = group.training_plan_arn
        if not view.concrete(arn):
            continue
        where = group_path(view, index, "training_plan_arn")

        def check(arn: str = str(arn), where: str = where, group: Any = group, index: int = index) -> Iterator[Problem]:
            owner = arn.split(":")[4] if arn.count(":") >= 5 else ""
            if owner and owner != account.account_id:
                yield Problem(
                    where,
                    f'a training plan of account {owner}; AWS: "Training plans cannot be shared across AWS accounts '
                    f'or within your AWS Organization." ({RESERVE_DOC})',
                    got=arn,
                    fix=f"use a plan bought in account {account.account_id}",
                )
                return
            plan = lookups.training_plan(account, _plan_name(arn))
            if plan is None:
                yield Problem(where, f"no such training plan in {account.region}", got=arn)
                return
            status = plan.get("Status")
            if status not in USABLE_PLAN:
                yield Problem(where, f"the plan is {status}: HyperPod can launch nothing from it", got=arn)
                return
            if "hyperpod-cluster" not in plan.get("TargetResources", []):
                yield Problem(
                    where,
                    f"the plan reserves capacity for {', '.join(plan.get('TargetResources', []))}, not "
                    "hyperpod-cluster",
                    got=arn,
                    fix="buy a plan with target resource hyperpod-cluster",
                )
            now = datetime.fromtimestamp(account.now(), UTC)
            end, start = plan.get("EndTime"), plan.get("StartTime")
            if end is not None and end <= now:
                yield Problem(where, f"the plan ended at {end:%Y-%m-%d %H:%M} UTC", got=arn)
            elif start is not None and start > now:
                yield Problem(
                    where,
                    f"the plan starts at {start:%Y-%m-%d %H:%M} UTC: the group has no capacity before then",
                    got=arn,
                    level=WARNING,
                )
            types = set(view.types_of(group))
            reserved = [r for r in plan.get("ReservedCapacitySummaries", []) if r.get("InstanceType") in types]
            if types and not reserved:
                offered = sorted({str(r.get("InstanceType")) for r in plan.get("ReservedCapacitySummaries", [])})
                yield Problem(
                    where,
                    f"the plan reserves {', '.join(offered) or 'no instances'}, not the group's "
                    f"{', '.join(sorted(types))}",
                    got=arn,
                    fix="use the plan's instance type, or a plan for this type",
                )
                return
            total = sum(int(r.get("TotalInstanceCount") or 0) for r in reserved)
            available = plan.get("AvailableInstanceCount")
            shared = sharing.get(arn, [])
            together = sum(int(g.count) for g in shared)
            if view.concrete(group.count) and int(group.count) > total:
                yield Problem(
                    group_path(view, index, "count"),
                    f"the training plan reserves {total} {'/'.join(sorted(types))} instances",
                    got=group.count,
                    fix=f"lower the count to {total}, or extend the plan",
                )
            elif len(shared) > 1 and group is shared[-1] and together > total:
                yield Problem(
                    group_path(view, index, "count"),
                    f"the groups on this training plan ({', '.join(g.name for g in shared)}) ask for {together} "
                    f"instances; it reserves {total}",
                    got=group.count,
                    fix=f"lower their counts to {total} in all, or give a group another plan",
                )
            elif view.concrete(group.count) and available is not None and int(group.count) > int(available):
                yield Problem(
                    group_path(view, index, "count"),
                    f"the training plan has {available} instances available ({plan.get('InUseInstanceCount', 0)} "
                    "in use): enough only if this cluster already holds the rest",
                    got=group.count,
                    level=WARNING,
                )
            az = nodes_az(view)
            zones = {str(r.get("AvailabilityZone")) for r in reserved if r.get("AvailabilityZone")}
            if az and zones and az not in zones:
                yield Problem(
                    where,
                    f"the plan's capacity is in {', '.join(sorted(zones))}; the nodes' subnet is in {az}: HyperPod "
                    "reports the mismatch as a capacity failure",
                    got=arn,
                    fix=f"put the nodes in {', '.join(sorted(zones))} (network.availability_zone or a subnet there)",
                )

        yield from guarded(where, check, got=str(arn))
