"""Rules on flexible instance groups: a priority list of types (``InstanceRequirements.InstanceTypes``) instead of
one ``InstanceType``. The per-type rules (offered, EFA, SMT, hardware, subnet addresses) judge every listed type
where they live; these are the rules of the list itself."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_support import api_rule
from hyperpod_cdk.model import InstanceGroup, NodeProvisioningMode
from hyperpod_cdk.rules.field_values import scoped_values
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.hardware import NodeHardware
from training_runtime.problems import WARNING, Problem

MAX_INSTANCE_TYPES = 20
"""``ClusterInstanceRequirements.InstanceTypes``: 1 to 20 items."""
API_DOC = "SageMaker API ClusterInstanceGroupSpecification.InstanceRequirements, ClusterInstanceRequirements"
EKS_CREATE_DOC = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-cli-command-create-cluster.html"
)
EKS_UPDATE_DOC = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-cli-command-update-cluster.html"
)

rule = REGISTRY.rule


@rule(
    "GRP-FLEX-EXCLUSIVE",
    "instance_groups",
    "instance_groups[*].{instance_type,instance_types}",
    source=f"{API_DOC} (InstanceType and InstanceRequirements are mutually exclusive)",
)
def exclusive(view: ClusterView) -> Iterator[Problem]:
    """A group gives exactly one of instance_type (one type) and instance_types (a flexible group's list)."""
    for index, group in enumerate(view.groups):
        if group.instance_type is not None and group.instance_types:
            yield Problem(
                group_path(view, index),
                "gives both instance_type and instance_types; HyperPod takes one type or a priority list, not both",
                got={"instance_type": group.instance_type, "instance_types": list(group.instance_types)},
                fix="keep instance_types (put the preferred type first) or keep instance_type",
            )
        elif group.instance_type is None and not group.instance_types:
            yield Problem(
                group_path(view, index, "instance_type"),
                "the group has no instance type",
                fix="give instance_type, or instance_types (1-20 types in priority order) for a flexible group",
            )


@rule(
    "GRP-FLEX-TYPES",
    "instance_groups",
    "instance_groups[*].instance_types",
    source=f"{API_DOC} (1-20 instance types, in priority order)",
)
def listed_types(view: ClusterView) -> Iterator[Problem]:
    """A flexible group lists 1 to 20 instance types (the order is HyperPod's launch priority)."""
    for index, group in enumerate(view.groups):
        types = list(group.instance_types)
        if len(types) > MAX_INSTANCE_TYPES:
            yield Problem(
                group_path(view, index, "instance_types"),
                f"got {len(types)} types; HyperPod takes 1 to {MAX_INSTANCE_TYPES}",
                fix="shorten it",
            )


@api_rule(rule, "flexible-duplicates", "instance_groups", "instance_groups[*].instance_types")
def duplicate_types(view: ClusterView) -> Iterator[Problem]:
    """A flexible group lists each type once: AWS's EKS page says the list must not contain duplicates."""
    for index, group in enumerate(view.groups):
        types = list(group.instance_types)
        repeated = sorted({t for t in types if types.count(t) > 1 and view.concrete(t)})
        if repeated:
            yield Problem(
                group_path(view, index, "instance_types"),
                f'listed more than once; AWS ({EKS_CREATE_DOC}): "the list must not contain duplicates"',
                got=repeated,
                fix="list each type once (the order is the launch priority)",
            )


@api_rule(rule, "flexible-continuous", "instance_groups", "instance_groups[*].instance_types", needs=("cluster",))
def flexible_continuous(view: ClusterView) -> Iterator[Problem]:
    """A flexible group needs node_provisioning_mode continuous (AWS's EKS pages: "Flexible instance groups require
    continuous node provisioning mode")."""
    if view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS:
        return
    for where, value in scoped_values(view, "flexible-continuous"):
        yield Problem(
            where,
            f'AWS ({EKS_CREATE_DOC}): "Flexible instance groups require continuous node provisioning mode."',
            got=list(value) if isinstance(value, tuple) else value,
            fix="set node_provisioning_mode: continuous (a new cluster), or give the group one instance_type",
        )


def _deployed_groups(view: ClusterView) -> Iterator[tuple[int, InstanceGroup, InstanceGroup]]:
    """(index, group, its deployed self) for each group the deployed config (validate --previous) also has."""
    previous = view.previous
    if previous is None:
        return
    deployed = {g.name: g for g in previous.groups}
    for index, group in enumerate(view.groups):
        if group.name in deployed:
            yield index, group, deployed[group.name]


@rule(
    "GRP-FLEX-SWITCH",
    "instance_groups",
    "instance_groups[*].{instance_type,instance_types}",
    level=WARNING,
    source=f"{EKS_UPDATE_DOC} (for EKS clusters; on Slurm flexible groups are unconfirmed: GRP-FLEX-SLURM)",
)
def switch(view: ClusterView) -> Iterator[Problem]:
    """A deployed group keeps its kind: AWS's EKS update page says an existing group cannot switch between one
    instance type and a flexible list."""
    for index, group, before in _deployed_groups(view):
        if group.flexible != before.flexible and group.types and before.types:
            yield Problem(
                group_path(view, index, "instance_types" if group.flexible else "instance_type"),
                f"the deployed group has {'instance_types' if before.flexible else 'instance_type'}; AWS "
                f'({EKS_UPDATE_DOC}): "You also cannot switch between InstanceType and InstanceRequirements when '
                'updating an existing instance group."',
                got=list(group.types),
                fix="keep the group's kind; for the other kind add a new group, move the work, then remove this one",
            )


@rule(
    "GRP-FLEX-TYPE-REMOVED",
    "instance_groups",
    "instance_groups[*].instance_types",
    level=WARNING,
    source=f"{EKS_UPDATE_DOC} (for EKS clusters; on Slurm flexible groups are unconfirmed: GRP-FLEX-SLURM)",
)
def type_removed(view: ClusterView) -> Iterator[Problem]:
    """A type dropped from a deployed flexible group's list may still run nodes, which AWS's EKS update page says
    cannot be removed (whether any do is known only on the cluster)."""
    for index, group, before in _deployed_groups(view):
        if not (group.flexible and before.flexible):
            continue
        dropped = [t for t in before.instance_types if t not in group.instance_types]
        if dropped:
            yield Problem(
                group_path(view, index, "instance_types"),
                f'drops {", ".join(dropped)} from the deployed list; AWS ({EKS_UPDATE_DOC}): "you cannot remove '
                'an instance type that has active nodes running on it"',
                got=list(group.instance_types),
                fix="check that no node of the group runs on it (hyperpod-cdk status), or scale the group down first",
            )


def _kind(hardware: NodeHardware) -> str:
    if hardware.gpus:
        return "NVIDIA GPUs"
    if hardware.neuron_devices:
        return "Trainium (Neuron)"
    return "no accelerator"


def _kinds(view: ClusterView, types: tuple[str, ...]) -> dict[str, list[str]]:
    """Types by accelerator kind; types without figures are left out (GRP-HARDWARE-KNOWN speaks of them)."""
    kinds: dict[str, list[str]] = {}
    for instance_type in types:
        hardware = view.hardware(instance_type)
        if hardware is not None:
            kinds.setdefault(_kind(hardware), []).append(instance_type)
    return kinds


@rule(
    "GRP-FLEX-ACCELERATOR",
    "instance_groups",
    "instance_groups[*].instance_types",
    needs=("hardware",),
    source="hyperpod-cdk (a partition's jobs run one software stack: CUDA or Neuron); AWS ParallelCluster "
    "InstancesAcceleratorsValidator",
)
def same_accelerator(view: ClusterView) -> Iterator[Problem]:
    """A flexible group's types share one accelerator kind (NVIDIA GPUs, Trainium, or none): its nodes form one
    partition, and one job's ranks cannot mix CUDA and Neuron."""
    for index, group in enumerate(view.groups):
        kinds = _kinds(view, view.types_of(group)) if group.flexible else {}
        if len(kinds) > 1:
            shown = "; ".join(f"{kind}: {', '.join(types)}" for kind, types in kinds.items())
            yield Problem(
                group_path(view, index, "instance_types"),
                f"mixes accelerator kinds ({shown}); a job on this group's partition could land on both",
                fix="keep types of one kind in this group; put the others in a group (partition) of their own",
            )


@rule(
    "GRP-FLEX-ACCELERATOR-COUNT",
    "instance_groups",
    "instance_groups[*].instance_types",
    needs=("hardware",),
    level=WARNING,
    source="hyperpod-cdk (slurm.conf Gres per node); AWS ParallelCluster InstancesAcceleratorsValidator",
)
def same_accelerator_count(view: ClusterView) -> Iterator[Problem]:
    """A flexible group's accelerated types have the same GPU or Neuron device count per node: a job that asks for
    more per node than the smallest type has can only run on the larger nodes."""
    for index, group in enumerate(view.groups):
        counts: dict[int, list[str]] = {}
        for instance_type in view.types_of(group) if group.flexible else ():
            hardware = view.hardware(instance_type)
            if hardware is not None and (hardware.gpus or hardware.neuron_devices):
                counts.setdefault(hardware.gpus or hardware.neuron_devices, []).append(instance_type)
        if len(counts) > 1:
            shown = "; ".join(f"{n} per node: {', '.join(types)}" for n, types in sorted(counts.items()))
            yield Problem(
                group_path(view, index, "instance_types"),
                f"the types differ in accelerators per node ({shown}); --gpus-per-node above the smallest count "
                "leaves the smaller nodes idle",
                fix="list types with the same accelerator count, or size jobs for the smallest",
            )


@rule(
    "GRP-FLEX-PARAMETER",
    "parameters",
    "parameters.instance_groups.<name>.instance_types",
    needs=("instance_groups",),
    source="hyperpod-cdk (a type parameter sets InstanceType, which a flexible group does not have)",
)
def no_type_parameter(view: ClusterView) -> Iterator[Problem]:
    """A flexible group's types are fixed at synth: its instance type cannot also be a launch parameter."""
    choices = view.parameters
    if choices is None:
        return
    flexible = {g.name for g in view.groups if g.flexible}
    for name, chosen in choices.instance_groups.items():
        if name in flexible and chosen.instance_types is not None:
            yield Problem(
                f"parameters.instance_groups.{name}.instance_types",
                f"group {name!r} is flexible (instance_types): HyperPod already picks among its types by priority "
                "and capacity, and a type parameter would set InstanceType beside InstanceRequirements",
                fix="drop the parameter, or give the group one instance_type",
            )
