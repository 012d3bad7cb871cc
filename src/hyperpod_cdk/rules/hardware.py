"""Rules that decide from the instance types' hardware facts (EC2's description of each type), never from its name.

The facts are :mod:`training_runtime.instance_facts` (docs/instance-types.md): threads per core and the values EC2
accepts, the accelerator kind, EFA. A type whose facts are unknown is not judged by these rules; GRP-HARDWARE-UNKNOWN
says so, naming the type and what to check.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_support import api_rule
from hyperpod_cdk.model import DeepHealthCheck, InstanceGroup
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.hardware import THREADS_PER_CORE
from training_runtime.instance_facts import (
    DESCRIBE_COMMAND,
    NVIDIA_GPU,
    InstanceFacts,
    facts_for,
)
from training_runtime.problems import WARNING, Problem

rule = REGISTRY.rule

THREADS_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceGroupSpecification.html"
THREADS_QUOTE = (
    '"For instance types that support multithreading, you can specify 1 for disabling multithreading and 2 for '
    "enabling multithreading. For instance types that doesn't support multithreading, specify 1.\""
)
DEEP_HEALTH_SLURM = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-deep-health-checks.html"
)
CONNECTIVITY_QUOTE = (
    '"InstanceConnectivity — Runs cluster-level NCCL (NVIDIA Collective Communications Library) tests across '
    "multiple nodes to verify inter-node GPU communication performance. This check requires at least 2 nodes and "
    'is only supported on instances with multi-node GPU communication capabilities."'
)


def _path(view: ClusterView, index: int, field: str) -> str:
    return view.path("instance_groups", f"[{index}].{field}")


def _facts(view: ClusterView, group: InstanceGroup) -> list[tuple[str, InstanceFacts | None]]:
    """Each concrete type of the group with its facts (None: not one HyperPod offers; GRP-INSTANCE-TYPE says so)."""
    return [(t, facts_for(t)) for t in view.types_of(group)]


def _sources(found: list[InstanceFacts]) -> str:
    return "; ".join(dict.fromkeys(f.cited for f in found))


def _listed(types: list[str]) -> str:
    return f"{', '.join(types)} {'has' if len(types) == 1 else 'have'}"


@api_rule(rule, "threads-per-core", "instance_groups", "instance_groups[*].threads_per_core", needs=("hardware",))
def threads_per_core(view: ClusterView) -> Iterator[Problem]:
    """threads_per_core is 1 (SMT off) or 2 (SMT on), and 1 on a type EC2 describes with one thread per core.

    1 is accepted on every type, as HyperPod's API reference says, even where EC2's ValidThreadsPerCore lists only 2
    (g5: EC2's own CPU options cannot turn SMT off there, and HyperPod does not say how it applies 1): see
    docs/instance-types.md. The slurm.conf the runtime renders then declares the cores, which errs low (harmless).
    """
    for index, group in enumerate(view.groups):
        where = _path(view, index, "threads_per_core")
        if group.threads_per_core not in THREADS_PER_CORE:
            yield Problem(where, "allowed: 1 (SMT off) or 2 (SMT on)", got=group.threads_per_core)
            continue
        single = [f for _, f in _facts(view, group) if f is not None and f.supports_threads_per_core(2) is False]
        if group.threads_per_core == 2 and single:
            yield Problem(
                where,
                f"{_listed([f.instance_type for f in single])} one thread per core: EC2 accepts only "
                f"{', '.join(str(v) for v in single[0].valid_threads_per_core or ())} ({_sources(single)}), and "
                f"HyperPod's API says {THREADS_QUOTE} ({THREADS_API})",
                got=2,
                fix="use 1",
            )


@rule(
    "GRP-HARDWARE-UNKNOWN",
    "instance_groups",
    "instance_groups[*].instance_type",
    needs=("hardware",),
    level=WARNING,
    source="hyperpod-cdk (data/instance_hardware.json: a figure no source gives is unknown, not guessed)",
)
def hardware_unknown(view: ClusterView) -> Iterator[Problem]:
    """A group sets threads_per_core 2 or deep health checks on a type whose EC2 facts are unknown: not judged."""
    for index, group in enumerate(view.groups):
        needs = [
            what
            for what, used in (
                ("threads_per_core 2", group.threads_per_core == 2),
                ("deep_health_checks", bool(group.deep_health_checks)),
            )
            if used
        ]
        unknown = [t for t, f in _facts(view, group) if f is not None and not f.known]
        if needs and unknown:
            yield Problem(
                _path(view, index, "instance_type" if not group.flexible else "instance_types"),
                f"no source read describes {', '.join(unknown)} (docs/instance-types.md), so {' and '.join(needs)} "
                "could not be checked against its threads per core and accelerators",
                got=unknown[0] if len(unknown) == 1 else unknown,
                fix="check the type yourself: "
                + "; ".join(DESCRIBE_COMMAND.format(t[3:]) for t in unknown)
                + " (or refresh the facts with scripts/refresh_instance_facts.py)",
            )


def _connectivity(view: ClusterView) -> Iterator[tuple[int, InstanceGroup, list[InstanceFacts]]]:
    """Each group that asks for InstanceConnectivity, with the known facts of its types."""
    for index, group in enumerate(view.groups):
        if DeepHealthCheck.INSTANCE_CONNECTIVITY in [str(c) for c in group.deep_health_checks]:
            yield index, group, [f for _, f in _facts(view, group) if f is not None and f.known]


@api_rule(
    rule,
    "deep-health-connectivity",
    "instance_groups",
    "instance_groups[*].deep_health_checks",
    needs=("hardware",),
)
def deep_health_connectivity(view: ClusterView) -> Iterator[Problem]:
    """InstanceConnectivity (NCCL tests across nodes) only on types with NVIDIA GPUs, per EC2's description: the
    Slurm page says "multi-node GPU communication", so Neuron and CPU types are refused."""
    for index, group, found in _connectivity(view):
        plain = [f for f in found if f.accelerator_kind != NVIDIA_GPU]
        if plain:
            yield Problem(
                _path(view, index, "deep_health_checks"),
                f"{_listed([f.instance_type for f in plain])} no GPU ({_sources(plain)}); "
                f"AWS: {CONNECTIVITY_QUOTE} ({DEEP_HEALTH_SLURM})",
                got=[str(c) for c in group.deep_health_checks],
                fix="remove InstanceConnectivity from this group (InstanceStress still tests CPU, memory and disk)",
            )


@rule(
    "GRP-DEEP-HEALTH-ACCELERATED",
    "instance_groups",
    "instance_groups[*].deep_health_checks",
    needs=("hardware",),
    level=WARNING,
    source=DEEP_HEALTH_SLURM,
)
def deep_health_checks_accelerated(view: ClusterView) -> Iterator[Problem]:
    """InstanceConnectivity on an accelerated type without EFA: AWS does not say which types have "multi-node GPU
    communication capabilities" (a warning, not an error)."""
    for index, group, found in _connectivity(view):
        lone = [f for f in found if f.accelerator_kind == NVIDIA_GPU and not f.efa]
        if lone:
            yield Problem(
                _path(view, index, "deep_health_checks"),
                f"{_listed([f.instance_type for f in lone])} accelerators but no EFA ({_sources(lone)}): AWS supports "
                f"InstanceConnectivity only on {CONNECTIVITY_QUOTE.split('only supported on ')[1].rstrip('.')} "
                f"({DEEP_HEALTH_SLURM}) and does not say which types those are",
                got=[str(c) for c in group.deep_health_checks],
                fix="check with AWS that InstanceConnectivity runs on this type, or keep only InstanceStress",
            )
