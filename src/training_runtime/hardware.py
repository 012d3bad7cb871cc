"""What each HyperPod instance type has, as slurm.conf declares it: CPUs, memory, GPUs, Neuron devices, EFA.

The Slurm renderers need these figures for every node *before* the node boots (slurm.conf is the same
on every node), so they come from a table rather than from ``slurmd -C`` on the node: the table derives from
EC2's description of each type (:mod:`training_runtime.instance_facts`, sourced and dated per type). A deployment can
correct or extend the table through the ``node_hardware`` runtime option (see :func:`hardware_for`).

The table stores this project's default ``ThreadsPerCore=1`` (SMT off, the instance-group default in
``hyperpod_cdk``): ``cpus`` is the number of physical cores, which is what ``slurmd -C`` reports on such
an instance. A group's ``threads_per_core`` reaches the node in the parameters file
(``GroupSpec.threads_per_core``), and the Slurm step passes it to :func:`hardware_for`, so a group with
SMT on (2) declares twice the CPUs and ``ThreadsPerCore=2``.
Declaring fewer CPUs than a node has is harmless (Slurm schedules what slurm.conf says); declaring more
makes slurmctld drain the node ("Low socket*core*thread count"), so the table errs low.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from training_runtime.instance_facts import INSTANCE_FACTS, NEURON, NVIDIA_GPU, InstanceFacts

MIB_PER_GIB = 1024

OS_RESERVE_PERCENT = 5
"""Share of memory kept back from Slurm for the kernel, the OS and the node's daemons."""
OS_RESERVE_FLOOR_MIB = 1024
"""Small instances keep back at least this much ..."""
OS_RESERVE_FLOOR_SHARE = 0.25
"""... but never more than this share of their memory, so a 2000 MiB test node keeps 1500 MiB."""

THREADS_PER_CORE = (1, 2)
"""HyperPod's ThreadsPerCore: 1 (SMT off) or 2 (SMT on)."""
GPU_TYPE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


def usable_memory_mib(memory_mib: int) -> int:
    """``memory_mib`` less the OS reserve (:attr:`NodeHardware.slurm_memory_mib`): 5 %, at least 1 GiB, at most a
    quarter on tiny nodes. What Slurm may give jobs, and what the checkpoint staging budget is a share of."""
    proportional = -(-memory_mib * OS_RESERVE_PERCENT // 100)  # rounded up
    floor = min(OS_RESERVE_FLOOR_MIB, int(memory_mib * OS_RESERVE_FLOOR_SHARE))
    return memory_mib - max(proportional, floor)


_POSITIVE = ("cpus", "sockets", "cores_per_socket", "threads_per_core", "memory_mib")
_COUNTS = ("gpus", "neuron_devices", "neuron_cores", "efa_interfaces")
_TOPOLOGY = ("sockets", "cores_per_socket", "threads_per_core")


@dataclass(frozen=True)
class NodeHardware:
    """One instance type's figures, as Slurm should see them."""

    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memory_mib: int
    """What the instance has (EC2's figure); Slurm gets :attr:`slurm_memory_mib`."""
    gpus: int = 0
    gpu_type: Optional[str] = None
    """Slurm GRES type name, e.g. ``a100``, ``h100``, ``h200`` (``--gres=gpu:h100:8``)."""
    nvswitch: bool = False
    """GPUs are linked through NVSwitch (needs nvidia-fabricmanager)."""
    neuron_devices: int = 0
    """Trainium chips (``/dev/neuron*``)."""
    neuron_cores: int = 0
    """NeuronCores the runtime sees by default (logical cores on trn2, where LNC=2 is the default)."""
    efa_interfaces: int = 0

    @property
    def slurm_memory_mib(self) -> int:
        """``RealMemory`` for slurm.conf: the memory minus a reserve for the OS.

        The reserve is 5 % of the memory (ParallelCluster's default ratio too), at least 1 GiB, but at
        most a quarter of the memory on tiny nodes. It is deliberately not capped on large instances: the
        kernel's page tables alone take about 1.6 % of RAM (64 bytes per 4 KiB page), so a fixed cap of a
        few GiB would put RealMemory above what a 2 TiB node reports, and slurmctld drains a node that
        reports less memory than configured ("Low RealMemory").
        """
        return usable_memory_mib(self.memory_mib)

    def with_threads_per_core(self, threads_per_core: int) -> "NodeHardware":
        """The same instance with SMT set as given (HyperPod's ``ThreadsPerCore``: 1 or 2)."""
        if threads_per_core not in THREADS_PER_CORE:
            raise ValueError("threads_per_core: got {!r}; allowed: 1 (SMT off) or 2 (SMT on)".format(threads_per_core))
        return dataclasses.replace(
            self,
            threads_per_core=threads_per_core,
            cpus=self.sockets * self.cores_per_socket * threads_per_core,
        )

    def problems(self, path: str) -> List[str]:
        """Every inconsistency in these figures, each prefixed with ``path``."""
        problems = [p for p in (_field_problem(f, getattr(self, f), path + "." + f) for f in FIELDS) if p]
        if not problems and self.cpus != self.sockets * self.cores_per_socket * self.threads_per_core:
            problems.append(
                "{}.cpus: got {}; must equal sockets * cores_per_socket * threads_per_core = {} * {} * {} = {} "
                "(what slurmd -C reports). Fix: give all four consistently, or only cpus".format(
                    path,
                    self.cpus,
                    self.sockets,
                    self.cores_per_socket,
                    self.threads_per_core,
                    self.sockets * self.cores_per_socket * self.threads_per_core,
                )
            )
        return problems


FIELDS: Tuple[str, ...] = tuple(f.name for f in dataclasses.fields(NodeHardware))


def _field_problem(name: str, value: Any, path: str) -> Optional[str]:
    """What is wrong with one field's value, or None."""
    if name in _POSITIVE or name in _COUNTS:
        minimum = 1 if name in _POSITIVE else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            allowed = "a positive integer" if minimum else "an integer of 0 or more"
            return "{}: got {!r}; allowed: {}".format(path, value, allowed)
    elif name == "gpu_type":
        if value is not None and (not isinstance(value, str) or not GPU_TYPE_PATTERN.fullmatch(value)):
            return (
                "{}: got {!r}; allowed: null or 1-32 lower-case letters, digits, '-' and '_' (a Slurm GRES "
                "type such as 'h100')".format(path, value)
            )
    elif name == "nvswitch":
        if not isinstance(value, bool):
            return "{}: got {!r}; allowed: true or false".format(path, value)
    else:
        return "{}: got {!r}; unknown field. Allowed: {}".format(path, value, ", ".join(FIELDS))
    return None


def gres_type(model: str) -> str:
    """The Slurm GRES type of an NVIDIA GPU from EC2's model name: ``H100`` -> ``h100``, ``RTX PRO 4500`` ->
    ``rtx-pro-4500`` (``--gres=gpu:h100:8``). p4de reports its A100 80 GB as ``A100``, the same as p4d, so
    ``--gres=gpu:a100:8`` runs on either."""
    return "-".join(model.lower().split())[:32]


def _row(facts: InstanceFacts) -> Optional[NodeHardware]:
    """The slurm.conf figures of a type from EC2's facts, stored as SMT off (ThreadsPerCore=1: ``cpus`` is the
    number of physical cores); None when EC2's facts of the type are unknown."""
    if facts.cores is None or facts.memory_mib is None or facts.accelerator_kind is None:
        return None
    sockets = facts.sockets if facts.cores % facts.sockets == 0 else 1
    gpus = facts.accelerators or 0 if facts.accelerator_kind == NVIDIA_GPU else 0
    devices = facts.accelerators or 0 if facts.accelerator_kind == NEURON else 0
    neuron_cores = facts.neuron_cores
    if neuron_cores is None:
        neuron_cores = devices * (facts.cores_per_accelerator or 0)
    return NodeHardware(
        cpus=facts.cores,
        sockets=sockets,
        cores_per_socket=facts.cores // sockets,
        threads_per_core=1,
        memory_mib=facts.memory_mib,
        gpus=gpus,
        gpu_type=gres_type(facts.accelerator_model) if gpus and facts.accelerator_model else None,
        nvswitch=facts.nvswitch,
        neuron_devices=devices,
        neuron_cores=neuron_cores,
        efa_interfaces=facts.efa_interfaces or 0,
    )


# The figures of every type whose EC2 facts are known (training_runtime.instance_facts: EC2's DescribeInstanceTypes,
# with source and date per type). Sockets, NVSwitch and Trn2's default NeuronCores are not in EC2's description: the
# data file's hand-kept "layout" section gives them with its source; a type not listed there has one socket (a wrong
# socket count only makes slurmd log "reconfigured socket/core boundaries", it does not drain the node).
INSTANCE_HARDWARE: Dict[str, NodeHardware] = {
    name: row for name, row in ((n, _row(f)) for n, f in sorted(INSTANCE_FACTS.items())) if row is not None
}


def overrides_problems(overrides: Any, path: str = "node_hardware") -> List[str]:
    """Every problem in a ``node_hardware`` mapping, for validating it before any node boots."""
    if not isinstance(overrides, Mapping):
        return ["{}: got {!r}; expected a mapping of instance type to figures".format(path, overrides)]
    problems: List[str] = []
    for instance_type in sorted(overrides, key=str):
        _merge(str(instance_type), overrides[instance_type], path, problems)
    return problems


def hardware_for(
    instance_type: str,
    overrides: Mapping[str, Mapping[str, Any]],
    threads_per_core: int = 1,
) -> Optional[NodeHardware]:
    """The figures for ``instance_type``: the table's row with SMT as given, then ``overrides`` applied.

    ``overrides[instance_type]`` may set any :class:`NodeHardware` field. For a type the table lacks it
    must give at least ``cpus`` and ``memory_mib`` (topology then defaults to one socket of ``cpus``
    single-thread cores). Giving ``cpus`` without topology fields resets the topology the same way;
    giving topology fields without ``cpus`` derives ``cpus``. Returns None for a type that is neither in
    the table nor in ``overrides``; raises ValueError naming ``node_hardware.<type>.<field>`` otherwise.
    """
    entry = overrides.get(instance_type) if isinstance(overrides, Mapping) else None
    base = INSTANCE_HARDWARE.get(instance_type)
    if base is not None and threads_per_core != base.threads_per_core:
        base = base.with_threads_per_core(threads_per_core)
    if entry is None:
        return base
    problems: List[str] = []
    hardware = _merge(instance_type, entry, "node_hardware", problems, base)
    if problems:
        raise ValueError(
            "node_hardware for {} is invalid ({} problem{}):\n{}".format(
                instance_type, len(problems), "" if len(problems) == 1 else "s", "\n".join("  - " + p for p in problems)
            )
        )
    return hardware


def _merge(
    instance_type: str,
    entry: Any,
    path: str,
    problems: List[str],
    base: Optional[NodeHardware] = None,
) -> Optional[NodeHardware]:
    where = "{}.{}".format(path, instance_type)
    if base is None:
        base = INSTANCE_HARDWARE.get(instance_type)
    if not isinstance(entry, Mapping):
        problems.append("{}: got {!r}; expected a mapping of field names to values".format(where, entry))
        return None
    before = len(problems)
    for key in sorted(entry, key=str):
        problem = _field_problem(str(key), entry[key], "{}.{}".format(where, key))
        if problem:
            problems.append(problem)
    if base is None:
        missing = [name for name in ("cpus", "memory_mib") if name not in entry]
        if missing:
            problems.append(
                "{}: {} is not in the hardware table, so its entry must give {}".format(
                    where, instance_type, " and ".join(missing)
                )
            )
    if len(problems) > before:
        return None
    values: Dict[str, Any] = dataclasses.asdict(base) if base is not None else {}
    values.update(entry)
    if not any(name in entry for name in _TOPOLOGY):
        if "cpus" in entry:  # cpus alone: one socket of single-thread cores
            values.update(sockets=1, cores_per_socket=values["cpus"], threads_per_core=1)
    else:
        values.setdefault("sockets", 1)
        values.setdefault("threads_per_core", 1)
        if "cores_per_socket" not in values:  # a new type that gives sockets or threads but not cores
            values["cores_per_socket"] = values.get("cpus")
            if _all_positive(values, ("cpus", "sockets", "threads_per_core")):
                threads_per_socket = values["sockets"] * values["threads_per_core"]
                if values["cpus"] % threads_per_socket == 0:
                    values["cores_per_socket"] = values["cpus"] // threads_per_socket
        if "cpus" not in entry and _all_positive(values, _TOPOLOGY):
            values["cpus"] = values["sockets"] * values["cores_per_socket"] * values["threads_per_core"]
    hardware = NodeHardware(**values)
    problems.extend(hardware.problems(where))
    return None if len(problems) > before else hardware


def _all_positive(values: Mapping[str, Any], names: Tuple[str, ...]) -> bool:
    return all(isinstance(values.get(n), int) and not isinstance(values.get(n), bool) and values[n] > 0 for n in names)
