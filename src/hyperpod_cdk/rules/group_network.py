"""Rules on a group's own networking: its subnets and security groups, and its EFA interface type."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.rules.groups import each_group, group_path
from hyperpod_cdk.rules.network import ID_PATTERNS, id_format_problem
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import needs
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

MAX_SUBNETS = 16
MAX_SECURITY_GROUPS = 5
OVERRIDE_VPC_DOC = (
    "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceGroupSpecification.html "
    "(OverrideVpcConfig: multi-AZ subnets and security groups per group)"
)
LUSTRE_AZ_DOC = (
    "FSx for Lustre user guide: a file system lives in one AZ; clients in other AZs of the VPC reach it across AZs "
    "(inter-AZ data transfer, higher latency) and need its security group's Lustre ports (988, 1018-1023)"
)

rule = REGISTRY.rule


@rule(
    "GRP-OVERRIDE-VPC",
    "instance_groups",
    "instance_groups[*].override_vpc",
    source="AWS::SageMaker::Cluster OverrideVpcConfig (1-16 subnets, 1-5 security groups); Amazon EC2 resource IDs",
)
def override_vpc(view: ClusterView) -> Iterator[Problem]:
    """A group's own VPC settings name 1 to 16 subnet IDs and 1 to 5 security group IDs (subnet-…, sg-…)."""
    for index, group in enumerate(view.groups):
        override = group.override_vpc
        if override is None:
            continue
        where = group_path(view, index, "override_vpc")
        lists = (
            ("subnet_ids", override.subnet_ids, MAX_SUBNETS, ID_PATTERNS["subnet_id"]),
            ("security_group_ids", override.security_group_ids, MAX_SECURITY_GROUPS, ID_PATTERNS["security_group_id"]),
        )
        for field, values, most, pattern in lists:
            if not 1 <= len(values) <= most:
                yield Problem(f"{where}.{field}", f"give 1 to {most}", got=list(values))
            for number, value in enumerate(values):
                if view.concrete(value) and (
                    problem := id_format_problem(f"{where}.{field}[{number}]", pattern, value)
                ):
                    yield problem


override_vpc_existing = rule(
    "GRP-OVERRIDE-VPC-EXISTING",
    "instance_groups",
    "instance_groups[*].override_vpc",
    needs=("network",),
    source=f"{OVERRIDE_VPC_DOC}; hyperpod-cdk (a new VPC's subnet IDs exist only after deploy)",
)(
    needs(
        "A group's own subnets need an existing VPC (network.vpc_id): the subnets of a new VPC have no IDs yet.",
        each_group("override_vpc", set_only=True),
        lambda view: view.network is None or bool(view.network.vpc_id),
        "only with an existing VPC (network.vpc_id): the stack's new VPC has one subnet, whose ID is only "
        "known at deploy, and the group's subnets must be in the cluster's VPC",
        fix="set network.vpc_id, subnet_id and availability_zone, or remove override_vpc",
        show_value=False,
    )
)


override_vpc_fsx = rule(
    "GRP-OVERRIDE-VPC-FSX",
    "instance_groups",
    "instance_groups[*].override_vpc",
    needs=("storage",),
    level=WARNING,
    source=f"{OVERRIDE_VPC_DOC}; {LUSTRE_AZ_DOC}",
)(
    needs(
        "A group in its own subnets may sit in another AZ than FSx: Lustre across AZs is billed and slower.",
        each_group("override_vpc", set_only=True),
        lambda view: view.storage is None,
        "the file system lives in network.availability_zone and a subnet's AZ cannot be known offline: a "
        "group in another AZ reads FSx for Lustre across AZs (inter-AZ data transfer is billed, latency "
        "rises). The stack admits the group's security groups to the file system's on the Lustre ports; "
        "their own outbound rules must allow it too",
        fix="use subnets in the file system's AZ (network.availability_zone)",
        show_value=False,
    )
)


@rule(
    "GRP-NETWORK-INTERFACE",
    "instance_groups",
    "instance_groups[*].network_interface",
    needs=("hardware",),
    source="AWS::SageMaker::Cluster NetworkInterface.InterfaceType (efa, efa-only); EFA per type (hardware catalogue)",
)
def network_interface(view: ClusterView) -> Iterator[Problem]:
    """network_interface (efa, efa-only) only on instance types that have EFA (a flexible group's every type)."""
    for index, group in enumerate(view.groups):
        if group.network_interface is None:
            continue
        without = [t for t in view.types_of(group) if (h := view.hardware(t)) is not None and not h.efa_interfaces]
        if without:
            yield Problem(
                group_path(view, index, "network_interface"),
                f"{', '.join(without)} {'has' if len(without) == 1 else 'have'} no EFA interface to configure",
                got=str(group.network_interface),
                fix="remove it, or choose an instance type with EFA (e.g. ml.p5.48xlarge, ml.trn1.32xlarge)",
            )
