"""Online rules on an existing network: the VPC, the subnets (AZ, free addresses) and the security groups.

A new VPC is the stack's own and is not looked up.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from hyperpod_cdk.model import InstanceGroup, NetworkInterfaceType
from hyperpod_cdk.preflight import lookups
from hyperpod_cdk.preflight.account import Account
from hyperpod_cdk.preflight.online import account_of, cluster_name, guarded, online_rule
from hyperpod_cdk.preflight.resource_checks import each_resource
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.network import addresses_per_instance
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

EFA_SG_DOC = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html (EFA-enabled security group)"
EFA_IP_DOC = (
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html (an ENA interface, and each EFA "
    "with ENA, takes an address; EFA-only interfaces take none); "
    "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterNetworkInterface.html"
)

PREREQUISITES_EFA_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html"
EFA_SELF_QUOTE = (
    "For HyperPod clusters using Elastic Fabric Adapter (EFA)-enabled instances, configure the security group to "
    "allow all inbound and outbound traffic to and from the security group itself. Specifically, avoid using "
    "`0.0.0.0/0` for outbound rules, as this may cause EFA health check failures."
)
"""The prerequisites page (custom Amazon VPC), read 2026-11-29: an outbound 0.0.0.0/0 rule is no EFA self rule."""
EFA_AZ_QUOTE = "Elastic Fabric Adapter (EFA) traffic cannot cross AZs or VPCs."
"""The prerequisites page (multiple AZs), read 2026-11-29."""


def existing_network(view: ClusterView) -> bool:
    return view.network is not None and view.network.vpc_id is not None


def nodes_az(view: ClusterView) -> str | None:
    """The nodes' AZ when the config or its existing subnet names one (a new VPC without one: CDK picks)."""
    net = view.network
    if net is None:
        return None
    if net.availability_zone:
        return net.availability_zone
    if net.subnet_id is not None:
        found = lookups.subnet(account_of(view), net.subnet_id)
        return str(found["AvailabilityZone"]) if found else None
    return None


def has_efa(view: ClusterView, group: InstanceGroup) -> bool:
    """Whether one of the group's instance types has EFA interfaces (the instance catalogue's figures)."""
    return any((h := view.hardware(t)) is not None and h.efa_interfaces > 0 for t in view.types_of(group))


def addresses_of(view: ClusterView, group: InstanceGroup) -> int:
    """Addresses one of the group's nodes takes: 1 for its primary interface, plus one per EFA interface unless
    the group's interfaces are efa-only (which have no IP address). A flexible group counts its hungriest type."""
    types = view.types_of(group) or ()
    efa = max(((h.efa_interfaces if (h := view.hardware(t)) else 0) for t in types), default=0)
    return 1 if group.network_interface == NetworkInterfaceType.EFA_ONLY else addresses_per_instance(efa)


def subnets_in_use(view: ClusterView) -> list[tuple[tuple[str, ...], str, list[InstanceGroup]]]:
    """(subnet ids, their field path, the groups whose nodes take addresses there), the cluster's subnet first."""
    net = view.network
    assert net is not None
    shared = [g for g in view.groups if g.override_vpc is None]
    found: list[tuple[tuple[str, ...], str, list[InstanceGroup]]] = []
    if net.subnet_id is not None:
        found.append(((net.subnet_id,), view.path("network", "subnet_id"), shared))
    for index, group in enumerate(view.groups):
        if group.override_vpc is not None:
            found.append(
                (tuple(group.override_vpc.subnet_ids), group_path(view, index, "override_vpc.subnet_ids"), [group])
            )
    return found


@online_rule(
    "AWS-VPC",
    "network",
    "network.vpc_id",
    actions=("ec2:DescribeVpcs",),
    source="Amazon EC2 API DescribeVpcs",
)
def vpc_exists(view: ClusterView) -> Iterator[Problem]:
    """The existing VPC exists in the Region and is available."""
    if not existing_network(view):
        return
    listed = [(view.path("network", "vpc_id"), str(view.network.vpc_id))]  # type: ignore[union-attr]
    yield from each_resource(view, listed, _vpc_problems)


def _vpc_problems(account: Account, where: str, vpc_id: str) -> Iterator[Problem]:
    found = lookups.vpc(account, vpc_id)
    if found is None:
        yield Problem(where, f"no such VPC in {account.region}", got=vpc_id, fix="check the ID and the Region")
    elif found.get("State") != "available":
        yield Problem(where, f"the VPC is {found.get('State')}, not available", got=vpc_id)


@online_rule(
    "AWS-SUBNET",
    "network",
    "network.subnet_id, instance_groups[*].override_vpc.subnet_ids",
    actions=("ec2:DescribeSubnets", "sagemaker:ListClusters", "sagemaker:DescribeCluster"),
    needs=("instance_groups", "hardware"),
    source=f"Amazon EC2 API DescribeSubnets (AvailabilityZone, AvailableIpAddressCount); {EFA_IP_DOC}",
)
def subnet_fits(view: ClusterView) -> Iterator[Problem]:
    """Existing subnets exist in the VPC and the nodes' AZ and have a free address for every node's interfaces."""
    if not existing_network(view):
        return
    net = view.network
    assert net is not None
    account = account_of(view)

    def running(groups: list[InstanceGroup]) -> int:
        """Addresses this cluster's running nodes of ``groups`` already hold (an update keeps them)."""
        own = [c for c in lookups.clusters_in_use(account) if c.get("ClusterName") == cluster_name(view)]
        current = {g["InstanceGroupName"]: int(g.get("CurrentCount") or 0) for c in own for g in c["InstanceGroups"]}
        return sum(current.get(g.name, 0) * addresses_of(view, g) for g in groups)

    for subnet_ids, where, groups in subnets_in_use(view):

        def check(
            subnet_ids: tuple[str, ...] = subnet_ids, where: str = where, groups: list[InstanceGroup] = groups
        ) -> Iterator[Problem]:
            free = 0
            for subnet_id in subnet_ids:
                found = lookups.subnet(account, subnet_id)
                if found is None:
                    yield Problem(
                        where, f"no such subnet in {account.region}", got=subnet_id, fix="check the ID and the Region"
                    )
                    return
                if found["VpcId"] != net.vpc_id:
                    yield Problem(
                        where,
                        f"the subnet is in {found['VpcId']}, not in network.vpc_id {net.vpc_id}",
                        got=subnet_id,
                        fix="use a subnet of the cluster's VPC",
                    )
                az = found["AvailabilityZone"]
                if where == view.path("network", "subnet_id") and net.availability_zone and az != net.availability_zone:
                    yield Problem(
                        view.path("network", "availability_zone"),
                        f"the subnet {subnet_id} is in {az}",
                        got=net.availability_zone,
                        fix=f"set availability_zone: {az}, or pick a subnet in {net.availability_zone}",
                    )
                free += int(found.get("AvailableIpAddressCount", 0))
            counted = [g for g in groups if view.concrete(g.peak_count)]  # a scaled group at scaling.max
            needed = sum(int(g.peak_count) * addresses_of(view, g) for g in counted)
            held = running(counted) if needed > free else 0
            if needed > free + held:
                parts = "; ".join(f"{g.name}: {g.peak_count} x {addresses_of(view, g)}" for g in counted)
                kept = f" (plus {held} this cluster's running nodes hold)" if held else ""
                yield Problem(
                    where,
                    f"{free} free addresses in {', '.join(subnet_ids)}{kept}; the nodes take {needed} ({parts}): "
                    "HyperPod fails the creation or scaling when it runs out",
                    got=", ".join(subnet_ids),
                    fix="use a larger subnet (EFA types take an address per EFA interface), or set "
                    "network_interface: efa-only on the EFA groups",
                )

        yield from guarded(where, check, got=", ".join(subnet_ids))


@online_rule(
    "AWS-SECURITY-GROUP",
    "network",
    "network.security_group_id, instance_groups[*].override_vpc.security_group_ids",
    actions=("ec2:DescribeSecurityGroups",),
    needs=("instance_groups", "hardware"),
    source=f"Amazon EC2 API DescribeSecurityGroups; {EFA_SG_DOC}; {PREREQUISITES_EFA_DOC}",
)
def security_group_self(view: ClusterView) -> Iterator[Problem]:
    """Existing security groups exist in the VPC and allow all traffic to and from themselves (EFA, Slurm, NCCL); with
    EFA instance types an outbound rule to 0.0.0.0/0 does not stand in for the one to the group itself."""
    if not existing_network(view):
        return
    net = view.network
    assert net is not None
    listed = []
    if net.security_group_id is not None:
        listed.append((view.path("network", "security_group_id"), net.security_group_id))
    for index, group in enumerate(view.groups):
        if group.override_vpc is not None:
            for sg in group.override_vpc.security_group_ids:
                listed.append((group_path(view, index, "override_vpc.security_group_ids"), sg))
    efa = any(has_efa(view, g) for g in view.groups)
    yield from each_resource(view, listed, functools.partial(_security_group_problems, str(net.vpc_id), efa))


def _security_group_problems(vpc_id: str, efa: bool, account: Account, where: str, group_id: str) -> Iterator[Problem]:
    found = lookups.security_group(account, group_id)
    if found is None:
        yield Problem(where, f"no such security group in {account.region}", got=group_id)
        return
    if found.get("VpcId") != vpc_id:
        yield Problem(where, f"the group is in {found.get('VpcId')}, not in {vpc_id}", got=group_id)
    inbound = _allows_self(found.get("IpPermissions", []), group_id)
    outbound = _allows_self(found.get("IpPermissionsEgress", []), group_id, any_address=not efa)
    missing = [d for d, ok in (("inbound", inbound), ("outbound", outbound)) if not ok]
    if missing:
        why = (
            f'; AWS: "{EFA_SELF_QUOTE}" ({PREREQUISITES_EFA_DOC})'
            if efa and inbound
            else "; EFA and Slurm traffic between the nodes is dropped"
        )
        yield Problem(
            where,
            f"no {' or '.join(missing)} rule allows all traffic with the group itself{why}",
            got=group_id,
            fix=f"add rules for all protocols and ports with source and destination {group_id}",
        )


def _allows_self(permissions: list[dict[str, Any]], group_id: str, any_address: bool = False) -> bool:
    for permission in permissions:
        if permission.get("IpProtocol") != "-1":
            continue
        pairs = permission.get("UserIdGroupPairs") or []
        if any(p.get("GroupId") == group_id for p in pairs):
            return True
        ranges = permission.get("IpRanges") or []
        if any_address and any(r.get("CidrIp") == "0.0.0.0/0" for r in ranges):
            return True
    return False


@online_rule(
    "AWS-EFA-AZ",
    "network",
    "instance_groups[*].override_vpc.subnet_ids",
    actions=("ec2:DescribeSubnets",),
    needs=("instance_groups", "hardware"),
    source=f"{PREREQUISITES_EFA_DOC} (multiple AZs: EFA traffic cannot cross AZs)",
)
def efa_one_az(view: ClusterView) -> Iterator[Problem]:
    """The EFA groups of one Slurm partition have their subnets in one AZ: EFA traffic cannot cross AZs."""
    if not existing_network(view):
        return
    net = view.network
    assert net is not None
    account = account_of(view)
    by_partition: dict[str, list[tuple[int, InstanceGroup]]] = {}
    for index, group in enumerate(view.groups):
        if has_efa(view, group) and group.partition_name is not None:
            by_partition.setdefault(group.partition_name, []).append((index, group))

    def zones(group: InstanceGroup) -> set[str]:
        if group.override_vpc is None:
            az = nodes_az(view)
            return {az} if az else set()
        found = (lookups.subnet(account, s) for s in group.override_vpc.subnet_ids)
        return {str(f["AvailabilityZone"]) for f in found if f}

    for partition, members in by_partition.items():
        overridden = [(i, g) for i, g in members if g.override_vpc is not None]
        if not overridden:
            continue
        where = group_path(view, overridden[0][0], "override_vpc.subnet_ids")

        def check(
            members: list[tuple[int, InstanceGroup]] = members, partition: str = partition, where: str = where
        ) -> Iterator[Problem]:
            seen = {g.name: sorted(zones(g)) for _, g in members}
            if len({az for azs in seen.values() for az in azs}) > 1:
                parts = "; ".join(f"{name}: {', '.join(azs)}" for name, azs in seen.items())
                yield Problem(
                    where,
                    f"the EFA groups of partition {partition} have subnets in several AZs ({parts}); AWS: "
                    f'"{EFA_AZ_QUOTE}" ({PREREQUISITES_EFA_DOC})',
                    got=", ".join(s for _, g in members if g.override_vpc for s in g.override_vpc.subnet_ids),
                    fix="put the partition's EFA groups in subnets of one AZ, or give the groups of another AZ a "
                    "partition of their own",
                )

        yield from guarded(where, check)
