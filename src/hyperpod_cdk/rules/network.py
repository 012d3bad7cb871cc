"""Rules on the network: CIDRs that parse and fit, AWS ID formats, AZs, and room for every node's addresses."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.hyperpod_facts import ULTRASERVER_INSTANCE_TYPES, ULTRASERVER_ZONE
from training_runtime.problems import WARNING, Problem

VPC_PREFIX = (16, 28)
"""A VPC's IPv4 block is /16 to /28 (Amazon VPC user guide)."""
SUBNET_PREFIX = (16, 28)
PUBLIC_SUBNET_PREFIX = 24
"""The new VPC's public subnet (NAT gateway) is a /24."""
AWS_RESERVED_ADDRESSES = 5
"""AWS reserves the first four addresses and the last one of every subnet."""


def aws_id_pattern(prefix: str) -> re.Pattern[str]:
    """An EC2 resource ID: ``prefix-`` and 8 or 17 lower-case hex digits (vpc-, subnet-, sg-, ami-)."""
    return re.compile(rf"^{prefix}-([0-9a-f]{{8}}|[0-9a-f]{{17}})$")


def id_format_problem(where: str, pattern: re.Pattern[str], value: str) -> Problem | None:
    """The problem with an ID that does not match ``pattern`` (one of :func:`aws_id_pattern`'s)."""
    if pattern.fullmatch(value):
        return None
    prefix = pattern.pattern[1:].split("-")[0]
    return Problem(where, f"expected {prefix}- followed by 8 or 17 lower-case hex digits", got=value)


ID_PATTERNS = {
    "vpc_id": aws_id_pattern("vpc"),
    "subnet_id": aws_id_pattern("subnet"),
    "security_group_id": aws_id_pattern("sg"),
}
AZ_NAME = re.compile(r"^([a-z]{2}(-[a-z]+)+-\d+)[a-z]$")
LOCAL_ZONE_NAME = re.compile(r"^([a-z]{2}(-[a-z]+)+-\d+)-[a-z]+-\d+[a-z]$")
"""A Local Zone's name: its parent Region, a location and a zone (us-east-1-dfw-2a, the one AWS names for HyperPod:
hyperpod_facts.ULTRASERVER_ZONE)."""
AZ_ID = re.compile(r"^[a-z]{3,4}\d+-az\d+$")

rule = REGISTRY.rule


def _vpc_network(view: ClusterView) -> ipaddress.IPv4Network | None:
    net = view.network
    if net is None or net.vpc_id is not None or not view.concrete(net.cidr):
        return None
    try:
        return ipaddress.IPv4Network(net.cidr)
    except ValueError:
        return None


@rule("NET-CIDR", "network", "network.cidr", source="Amazon VPC user guide: VPC CIDR blocks")
def cidr(view: ClusterView) -> Iterator[Problem]:
    """A new VPC's CIDR is an IPv4 network (no host bits set) from /16 to /28."""
    net = view.network
    if net is None or net.vpc_id is not None or not view.concrete(net.cidr):
        return
    where = view.path("network", "cidr")
    try:
        network = ipaddress.IPv4Network(net.cidr)
    except ValueError as error:
        fix = ""
        try:
            fix = f"use {ipaddress.IPv4Network(net.cidr, strict=False)}"
        except ValueError:
            fix = "use a block such as 10.0.0.0/16"
        yield Problem(where, f"not an IPv4 network ({error})", got=net.cidr, fix=fix)
        return
    low, high = VPC_PREFIX
    if not low <= network.prefixlen <= high:
        yield Problem(where, f"a VPC's block is /{low} to /{high}", got=net.cidr)


@rule("NET-SUBNET-MASK", "network", "network.private_subnet_cidr_mask", source="Amazon VPC user guide: subnet sizing")
def subnet_mask(view: ClusterView) -> Iterator[Problem]:
    """The nodes' subnet is /16 to /28 and fits in the VPC next to the /24 public subnet."""
    net = view.network
    if net is None or net.vpc_id is not None or not view.concrete(net.private_subnet_cidr_mask):
        return
    mask = net.private_subnet_cidr_mask
    where = view.path("network", "private_subnet_cidr_mask")
    low, high = SUBNET_PREFIX
    if not low <= mask <= high:
        yield Problem(where, f"allowed: {low} to {high}", got=mask)
        return
    network = _vpc_network(view)
    if network is None:
        return
    needed = 2 ** (32 - mask) + 2 ** (32 - PUBLIC_SUBNET_PREFIX)
    if needed > network.num_addresses:
        smallest = max(mask, network.prefixlen + 1, 24 if network.prefixlen < 24 else mask)
        yield Problem(
            where,
            f"a /{mask} nodes' subnet and the /{PUBLIC_SUBNET_PREFIX} public subnet need {needed} addresses; "
            f"the VPC {network} has {network.num_addresses}",
            got=mask,
            fix=f"use a larger network.cidr, or a mask of {smallest} or more",
        )


@rule(
    "NET-EXISTING",
    "network",
    "network.{vpc_id,subnet_id,security_group_id,availability_zone}",
    source="hyperpod-cdk (an existing subnet fixes the VPC and the AZ)",
)
def existing_network(view: ClusterView) -> Iterator[Problem]:
    """An existing VPC comes with its subnet and AZ; a security group only with an existing VPC."""
    net = view.network
    if net is None:
        return
    if net.subnet_id and not net.vpc_id:
        yield Problem(view.path("network", "subnet_id"), "needs network.vpc_id (the subnet's VPC)")
    if net.vpc_id and not net.subnet_id:
        yield Problem(view.path("network", "vpc_id"), "needs network.subnet_id (the subnet the nodes use)")
    if net.vpc_id and not net.availability_zone:
        yield Problem(view.path("network", "availability_zone"), "required with an existing subnet (the subnet's AZ)")
    if net.security_group_id and not net.vpc_id:
        yield Problem(view.path("network", "security_group_id"), "only with an existing VPC (network.vpc_id)")


NEW_VPC_FIELDS = ("cidr", "private_subnet_cidr_mask", "flow_logs")
"""What only a new VPC takes; an existing VPC keeps its own."""


@rule(
    "NET-NEW-VPC-ONLY",
    "network",
    "network.{cidr,private_subnet_cidr_mask,flow_logs,allow_internet_egress}",
    source="hyperpod-cdk (what an existing VPC or security group keeps)",
)
def new_vpc_only(view: ClusterView) -> Iterator[Problem]:
    """A new VPC's settings cannot be given with an existing VPC, nor egress with an existing security group."""
    net = view.network
    if net is None:
        return
    given = set(net.model_fields_set)
    if net.vpc_id:
        for field in NEW_VPC_FIELDS:
            if field in given:
                yield Problem(
                    view.path("network", field),
                    "applies only to a new VPC; network.vpc_id adopts one with its own settings",
                    fix="remove it",
                )
    if net.security_group_id and "allow_internet_egress" in given:
        yield Problem(
            view.path("network", "allow_internet_egress"),
            "applies only to the security group the stack creates; network.security_group_id brings its own rules",
            fix="remove it, or set the rule on your security group",
        )


@rule("NET-ID-FORMAT", "network", "network.{vpc_id,subnet_id,security_group_id}", source="Amazon EC2 resource IDs")
def id_formats(view: ClusterView) -> Iterator[Problem]:
    """VPC, subnet and security group IDs look like vpc-, subnet- and sg- followed by 8 or 17 hex digits."""
    net = view.network
    if net is None:
        return
    for field, pattern in ID_PATTERNS.items():
        value = getattr(net, field)
        if view.concrete(value) and (problem := id_format_problem(view.path("network", field), pattern, value)):
            yield problem


def zone_region(zone: str) -> str | None:
    """The Region of an AZ or Local Zone name (us-west-2a, us-east-1-dfw-2a); None for anything else."""
    match = AZ_NAME.fullmatch(zone) or LOCAL_ZONE_NAME.fullmatch(zone)
    return match.group(1) if match else None


def cluster_region(view: ClusterView) -> str | None:
    """The Region the cluster deploys in: the stack's when known, else the one network.availability_zone names."""
    if view.region:
        return view.region
    net = view.network
    zone = net.availability_zone if net is not None else None
    return zone_region(zone) if isinstance(zone, str) and view.concrete(zone) else None


@rule(
    "NET-AZ",
    "network",
    "network.availability_zone",
    source="Amazon EC2: Regions and Availability Zones (zone names; Local Zones such as us-east-1-dfw-2a, which "
    "https://docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html names for UltraServers)",
)
def availability_zone(view: ClusterView) -> Iterator[Problem]:
    """The AZ is a zone name such as us-west-2a or a Local Zone's such as us-east-1-dfw-2a (not a zone ID); that it is
    in the cluster's Region is PRINCIPLE-REGION's (every az field)."""
    net = view.network
    if net is None or not view.concrete(net.availability_zone):
        return
    az = str(net.availability_zone)
    where = view.path("network", "availability_zone")
    region = zone_region(az)
    if AZ_ID.fullmatch(az):
        yield Problem(
            where,
            "this is an AZ ID; give the AZ name (IDs map to different names in each account)",
            got=az,
            fix="aws ec2 describe-availability-zones --zone-ids " + az,
        )
    elif region is None:
        yield Problem(
            where, "expected an AZ name such as us-west-2a, or a Local Zone's such as us-east-1-dfw-2a", got=az
        )


@rule(
    "NET-LOCAL-ZONE",
    "network",
    "network.availability_zone",
    needs=("instance_groups",),
    level=WARNING,
    source="https://docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html (UltraServers "
    "in the Dallas Local Zone; AWS names no other Local Zone, nor other instance types there)",
)
def local_zone(view: ClusterView) -> Iterator[Problem]:
    """A Local Zone is documented for HyperPod only as the Dallas zone of UltraServers: another Local Zone, or other
    instance types in it, AWS does not document."""
    net = view.network
    zone = net.availability_zone if net is not None else None
    if not (isinstance(zone, str) and view.concrete(zone) and LOCAL_ZONE_NAME.fullmatch(zone)):
        return
    where = view.path("network", "availability_zone")
    if zone != ULTRASERVER_ZONE:
        yield Problem(
            where,
            f"a Local Zone: AWS documents HyperPod in one Local Zone only, {ULTRASERVER_ZONE}, for UltraServers; "
            "whether HyperPod launches nodes in this one is not documented",
            got=zone,
            fix=f"use an Availability Zone of {zone_region(zone)}, or {ULTRASERVER_ZONE} for UltraServers",
        )
        return
    others = sorted({t for g in view.groups for t in view.types_of(g) if t not in ULTRASERVER_INSTANCE_TYPES})
    if others:
        yield Problem(
            where,
            f"AWS documents {ULTRASERVER_ZONE} for UltraServers ({', '.join(ULTRASERVER_INSTANCE_TYPES)}); whether "
            f"{', '.join(others)} launch in it is not documented (the stack's new VPC puts every group's nodes there)",
            got=zone,
            fix="check that EC2 offers these types in the Local Zone (aws ec2 describe-instance-type-offerings "
            f"--location-type availability-zone --filters Name=location,Values={zone}), or keep only UltraServer "
            "groups in it (override_vpc with an existing VPC)",
        )


def addresses_per_instance(efa_interfaces: int) -> int:
    """IPv4 addresses one node takes in the subnet: its primary interface, plus one per EFA interface
    (HyperPod attaches EFA interfaces with an IP address; conservative for efa-only cards)."""
    return 1 + efa_interfaces


@rule(
    "NET-SUBNET-CAPACITY",
    "network",
    "network.private_subnet_cidr_mask",
    needs=("instance_groups", "hardware"),
    source="Amazon VPC subnet sizing; EFA interfaces per instance (hardware catalogue)",
)
def subnet_capacity(view: ClusterView) -> Iterator[Problem]:
    """The new nodes' subnet has an address for every interface of every instance (EFA types take many; a scaled
    group counts at scaling.max)."""
    net = view.network
    if net is None or net.vpc_id is not None or not view.concrete(net.private_subnet_cidr_mask):
        return
    mask = net.private_subnet_cidr_mask
    if not SUBNET_PREFIX[0] <= mask <= SUBNET_PREFIX[1]:
        return
    usable = 2 ** (32 - mask) - AWS_RESERVED_ADDRESSES
    needed = 0
    parts = []
    for group in view.groups:
        types = view.types_of(group)
        if not (view.concrete(group.peak_count) and types):
            return
        # A flexible group may be all of its hungriest type; a scaled group may grow to scaling.max.
        each = max(addresses_per_instance(h.efa_interfaces if (h := view.hardware(t)) else 0) for t in types)
        needed += group.peak_count * each
        parts.append(f"{group.name}: {group.peak_count} x {each}")
    if needed > usable:
        fits = next((m for m in range(mask, SUBNET_PREFIX[0] - 1, -1) if 2 ** (32 - m) - 5 >= needed), None)
        yield Problem(
            view.path("network", "private_subnet_cidr_mask"),
            f"a /{mask} subnet has {usable} usable addresses; the groups take {needed} ({'; '.join(parts)})",
            got=mask,
            fix=f"use {fits} or smaller (and a VPC large enough)" if fits else "split the cluster",
        )


@rule("NET-REPLACES", "network", "network", level=WARNING, source="AWS::SageMaker::Cluster VpcConfig (createOnly)")
def network_replaces(view: ClusterView) -> Iterator[Problem]:
    """Moving the cluster to another VPC, subnet or security group replaces the cluster."""
    previous = view.previous
    if previous is None or previous.network is None or view.network is None:
        return
    fields = ("vpc_id", "subnet_id", "security_group_id", "cidr", "availability_zone", "private_subnet_cidr_mask")
    changed = [f for f in fields if getattr(previous.network, f) != getattr(view.network, f)]
    if changed:
        yield Problem(
            view.path("network"),
            f"{', '.join(changed)} changed: the nodes' subnet or security group changes, which replaces the "
            "cluster and every node",
            fix="keep the network as deployed unless you mean to rebuild the cluster",
        )
