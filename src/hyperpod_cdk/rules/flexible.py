"""Rules on flexible instance groups: a priority list of types (``InstanceRequirements.InstanceTypes``) instead of
one ``InstanceType``. The per-type rules (offered, EFA, SMT, hardware, subnet addresses) judge every listed type
where they live; these are the rules of the list itself."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.hardware import NodeHardware
from training_runtime.problems import WARNING, Problem

MAX_INSTANCE_TYPES = 20
"""``ClusterInstanceRequirements.InstanceTypes``: 1 to 20 items."""
API_DOC = "SageMaker API ClusterInstanceGroupSpecification.InstanceRequirements, ClusterInstanceRequirements"

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
    """A flexible group lists 1 to 20 instance types, each once (the order is HyperPod's launch priority)."""
    for index, group in enumerate(view.groups):
        types = list(group.instance_types)
        where = group_path(view, index, "instance_types")
        if len(types) > MAX_INSTANCE_TYPES:
            yield Problem(where, f"got {len(types)} types; HyperPod takes 1 to {MAX_INSTANCE_TYPES}", fix="shorten it")
        repeated = sorted({t for t in types if types.count(t) > 1 and view.concrete(t)})
        if repeated:
            yield Problem(where, "list each type once (the order is the launch priority)", got=repeated)


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
