"""Rules on the node runtime's options and users, and on what they need from the instance groups.

The runtime's own rules (``training_runtime.option_rules.OPTION_RULES``, ``training_runtime.users.USER_RULES``)
are registered here, so the config is checked with the code the node uses. The rules that join options
with instance types (PyTorch on Trainium, SMDDP) live here: the config decides them, so they run at
synth and not on every node at boot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import ViewValues, needs
from hyperpod_cdk.rules.view import ClusterView
from training_runtime import options as runtime_options
from training_runtime import pins, slurm_security
from training_runtime.checkpoint.budget import FIX, GIB, MIB, StagingBudget
from training_runtime.option_rules import OPTION_RULES
from training_runtime.option_types import SLURM_MAJOR
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.problems import WARNING, Problem
from training_runtime.users import USER_RULES, users_problems

rule = REGISTRY.rule


@rule("RT-SHAPE", "runtime", "runtime", source="hyperpod-cdk (training_runtime.options)")
def shape(view: ClusterView) -> list[Problem]:
    """runtime holds known sections and keys with values of the right type."""
    return [
        p
        for p in runtime_options.shape_problems(dict(view.runtime), view.path("runtime"))
        if p.rule == runtime_options.SHAPE_RULE
    ]


@rule("RT-NODE-HARDWARE", "runtime", "runtime.node_hardware.<type>.<field>", source="hyperpod-cdk (hardware.py)")
def node_hardware(view: ClusterView) -> list[Problem]:
    """node_hardware gives consistent figures (cpus = sockets x cores x threads) for known fields only."""
    return [
        p
        for p in runtime_options.shape_problems(dict(view.runtime), view.path("runtime"))
        if p.rule == runtime_options.HARDWARE_RULE
    ]


def _register_runtime_books() -> None:
    for book_rule in OPTION_RULES.rules:

        def check(view: ClusterView, _check=book_rule.check) -> list[Problem]:  # type: ignore[no-untyped-def]
            options = view.runtime_options
            return [] if options is None else list(_check(options, view.path("runtime")))

        check.__doc__ = book_rule.doc
        rule(book_rule.id, "runtime", book_rule.field, source=book_rule.source)(check)
    for book_rule in USER_RULES.rules:

        def check_users(view: ClusterView, _id: str = book_rule.id) -> list[Problem]:
            return [p for p in users_problems(list(view.users), view.path("users")) if p.rule == _id]

        check_users.__doc__ = book_rule.doc
        rule(book_rule.id, "users", book_rule.field, source=book_rule.source)(check_users)


_register_runtime_books()


def _trainium_groups(view: ClusterView) -> list[str]:
    found = []
    for group in view.compute_groups:
        trainium = [t for t in view.types_of(group) if (h := view.hardware(t)) is not None and h.neuron_devices]
        if trainium:
            found.append(f"{group.name} ({', '.join(trainium)})")
    return found


@rule(
    "RT-PYTORCH-NEURON",
    "runtime",
    "runtime.pytorch.version",
    needs=("instance_groups", "hardware"),
    source="AWS Neuron release notes (torch-neuronx support matrix)",
)
def pytorch_on_trainium(view: ClusterView) -> Iterator[Problem]:
    """On Trainium groups the PyTorch version is the line the pinned torch-neuronx supports."""
    options = view.runtime_options
    if options is None or options.pytorch is None:
        return
    series = ".".join(options.pytorch.version.split(".")[:2])
    trainium = _trainium_groups(view)
    if trainium and series != pins.NEURON_TORCH_SERIES:
        yield Problem(
            view.path("runtime", "pytorch.version"),
            f"Trainium groups {', '.join(trainium)} need PyTorch {pins.NEURON_TORCH_SERIES}.x: the pinned "
            f"torch-neuronx ({pins.TORCH_NEURONX}) runs on it, the last PyTorch/XLA line Neuron supports "
            "for training",
            got=options.pytorch.version,
            fix=f"set runtime.pytorch.version to {pins.NEURON_TORCH_SERIES}.0",
        )


@rule(
    "RT-PYTORCH-SMDDP",
    "runtime",
    "runtime.pytorch.smddp",
    needs=("instance_groups", "hardware"),
    source="SageMaker developer guide: SMDDP supported frameworks and instance types",
)
def smddp(view: ClusterView) -> Iterator[Problem]:
    """SMDDP runs only on p4d/p4de, never on Trainium, and exists for a listed set of torch versions."""
    options = view.runtime_options
    if options is None or options.pytorch is None or not options.pytorch.smddp:
        return
    where = view.path("runtime", "pytorch.smddp")
    trainium = _trainium_groups(view)
    if trainium:
        yield Problem(
            where,
            f"SMDDP is a CUDA library; it cannot run on the Trainium groups {', '.join(trainium)}",
            got=True,
            fix="set smddp: false",
        )
    compute_types = {t for g in view.compute_groups for t in g.types}
    known = all(view.concrete(t) for t in compute_types)
    if compute_types and known and not compute_types & set(pins.SMDDP_INSTANCE_TYPES):
        yield Problem(
            where,
            f"SMDDP's collectives run only on {', '.join(pins.SMDDP_INSTANCE_TYPES)}; no compute group has one",
            got=True,
            fix="use p4d/p4de compute groups, or set smddp: false",
        )
    versions = sorted({w.torch for w in pins.SMDDP_WHEELS})
    if options.pytorch.version not in versions:
        yield Problem(
            where,
            f"no SMDDP wheel is published for torch {options.pytorch.version} (published for: {', '.join(versions)})",
            got=True,
            fix="choose a listed torch version, or set smddp: false",
        )


def _option(part: str, field: str, when: Callable[[Any], bool] = lambda value: value is not None) -> ViewValues:
    """The runtime option ``part.field`` with its path, when ``when`` holds for it (nothing when the section's
    shape is wrong: RT-SHAPE reports it)."""

    def values(view: ClusterView) -> list[tuple[str, Any]]:
        options = view.runtime_options
        value = getattr(getattr(options, part), field) if options is not None else None
        return [(view.path("runtime", f"{part}.{field}"), value)] if options is not None and when(value) else []

    return values


slurm_version_mode = rule(
    "CL-SLURM-VERSION-MODE",
    "runtime",
    "runtime.slurm.version",
    needs=("cluster",),
    source="awslabs/awsome-distributed-ai PR #1107 (the switch runs before the Slurm daemons start); "
    "SageMaker ClusterLifeCycleConfig (OnInitComplete runs after HyperPod configured the instance)",
)(
    needs(
        "A Slurm major is chosen only in lifecycle-driven mode, where the runtime switches it before Slurm starts.",
        _option("slurm", "version"),
        lambda view: view.mode == LIFECYCLE_DRIVEN,
        "in api-driven mode HyperPod starts Slurm before the OnInitComplete script runs, so the runtime could "
        "switch /opt/slurm only under running daemons, which AWS's runbook does by restarting every daemon on "
        "every node and losing running jobs; the runtime switches only in lifecycle-driven mode, before Slurm starts",
        fix="remove runtime.slurm.version (keep the AMI's default), or use mode: lifecycle-driven",
    )
)


containers_shared_cache = rule(
    "CL-CONTAINERS-SHARED-CACHE",
    "runtime",
    "runtime.containers.enroot_cache",
    needs=("storage",),
    source="awslabs/awsome-distributed-ai install_enroot_pyxis.sh (ENROOT_CACHE_PATH /fsx/enroot when FSx is mounted)",
)(
    needs(
        "enroot_cache: shared puts enroot's cache on the cluster's FSx for Lustre, so the cluster needs one.",
        _option("containers", "enroot_cache", lambda value: value == "shared"),
        lambda view: view.storage is not None,
        "a shared enroot cache lives on the cluster's FSx for Lustre (<mount path>/enroot), and the config has no "
        "storage section",
        fix="add a storage section, or use enroot_cache: auto or nvme (the instance store)",
    )
)


SECURITY_SOURCE = (
    "SchedMD's security advisories as data/slurm_security.yaml cites them; AWS's SageMaker HyperPod AMI releases for "
    "Slurm (docs/operations.md, Slurm security releases)"
)
SECURITY_FIX = (
    "run a fixed Slurm: a new AMI, or runtime.slurm.version on an AMI whose release of it is fixed, rolled out drain "
    "first with `hyperpod-cdk update-software` (docs/operations.md, Slurm security releases); `hyperpod-cdk status "
    "CLUSTER --slurm` reads the release running. Or suppress this rule, saying why"
)


@rule(
    "RT-SLURM-SECURITY", "runtime", "runtime.slurm.version", needs=("cluster",), level=WARNING, source=SECURITY_SOURCE
)
def slurm_security_version(view: ClusterView) -> Iterator[Problem]:
    """The Slurm major runtime.slurm.version chooses has no release a known security advisory affects.

    Unset, the AMI's default is answered by `plan` and `status --slurm`, not here: the finding would be every
    config's."""
    options = view.runtime_options
    version = options.slurm.version if options is not None else None
    if version is None or view.mode != LIFECYCLE_DRIVEN or not SLURM_MAJOR.fullmatch(version):
        return  # unset: the AMI's default (plan and status --slurm answer for it); api-driven: CL-SLURM-VERSION-MODE
    answer = slurm_security.ami_verdict(version)
    if answer.affected:
        yield Problem(
            view.path("runtime", "slurm.version"), slurm_security.ami_summary(version), got=version, fix=SECURITY_FIX
        )


@rule(
    "RT-CHECKPOINT-MEMORY",
    "runtime",
    "runtime.checkpoint.state_gib_per_node",
    needs=("instance_groups", "hardware"),
    source="PyTorch distributed_async_checkpoint_recipe (staging raises CPU memory by checkpoint_size_per_rank x "
    "number_of_ranks; pinned memory is scarce); hyperpod-cdk (training_runtime/checkpoint/budget.py)",
)
def checkpoint_memory(view: ClusterView) -> Iterator[Problem]:
    """The checkpoint state a node stages per save fits half of each compute type's memory less the OS reserve."""
    options = view.runtime_options
    declared = options.checkpoint.state_gib_per_node if options is not None else None
    if not isinstance(declared, int) or declared < 1:  # RT-CHECKPOINT-SIZE judges the value itself
        return
    staging = declared * GIB
    over = []
    for group in view.compute_groups:
        for instance_type in view.types_of(group):
            hardware = view.hardware(instance_type)
            if hardware is None:  # not a type HyperPod offers: GRP-INSTANCE-TYPE says so
                continue
            budget = StagingBudget(hardware.memory_mib * MIB)
            if not budget.fits(staging):
                over.append(f"{instance_type} of group {group.name}: {budget.describe()}")
    if over:
        yield Problem(
            view.path("runtime", "checkpoint.state_gib_per_node"),
            f"asynchronous checkpoints would stage {declared} GiB per node, over the staging budget of "
            f"{'; '.join(over)}",
            got=declared,
            fix=FIX,
        )
