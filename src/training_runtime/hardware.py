"""What each HyperPod instance type has: CPUs, memory, GPUs, Neuron devices, EFA interfaces.

The Slurm renderers need these figures for every node *before* the node boots (slurm.conf is the same
on every node), so they come from a table rather than from ``slurmd -C`` on the node. A deployment can
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
        proportional = -(-self.memory_mib * OS_RESERVE_PERCENT // 100)  # rounded up
        floor = min(OS_RESERVE_FLOOR_MIB, int(self.memory_mib * OS_RESERVE_FLOOR_SHARE))
        return self.memory_mib - max(proportional, floor)

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
        if value is not None and (not isinstance(value, str) or not GPU_TYPE_PATTERN.match(value)):
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


def _hw(
    vcpus: int,
    sockets: int,
    memory_gib: float,
    gpus: int = 0,
    gpu_type: Optional[str] = None,
    nvswitch: bool = False,
    neuron_devices: int = 0,
    neuron_cores: int = 0,
    efa: int = 0,
) -> NodeHardware:
    """A table row from EC2's figures (vCPUs with SMT on), stored as SMT off (ThreadsPerCore=1)."""
    cores = vcpus // 2
    return NodeHardware(
        cpus=cores,
        sockets=sockets,
        cores_per_socket=cores // sockets,
        threads_per_core=1,
        memory_mib=int(memory_gib * MIB_PER_GIB),
        gpus=gpus,
        gpu_type=gpu_type,
        nvswitch=nvswitch,
        neuron_devices=neuron_devices,
        neuron_cores=neuron_cores,
        efa_interfaces=efa,
    )


# EC2 figures: vCPUs (SMT on), sockets as lscpu shows them, memory in GiB. Every x86 type here has two
# threads per core. Socket counts of the single-socket sizes are inferred from the host CPU (one
# instance per socket or less); a wrong socket count only makes slurmd log "reconfigured socket/core
# boundaries", it does not drain the node. EFA counts of the GPU and Trainium types come from the
# awsome-distributed-training health-check profiles and the Neuron multi-node guide. Assumed, not
# checked on an instance: that t3 accepts ThreadsPerCore=1 (if it does not, the node just has twice
# the CPUs declared here). p4de reports its A100 80 GB as type "a100", the same as p4d, so
# --gres=gpu:a100:8 runs on either.
INSTANCE_HARDWARE: Dict[str, NodeHardware] = {
    # --- burstable / general purpose / compute optimised (controllers, login nodes, CPU workers)
    "ml.t3.medium": _hw(2, 1, 4),
    "ml.t3.large": _hw(2, 1, 8),
    "ml.t3.xlarge": _hw(4, 1, 16),
    "ml.t3.2xlarge": _hw(8, 1, 32),
    "ml.m5.large": _hw(2, 1, 8),
    "ml.m5.xlarge": _hw(4, 1, 16),
    "ml.m5.2xlarge": _hw(8, 1, 32),
    "ml.m5.4xlarge": _hw(16, 1, 64),
    "ml.m5.8xlarge": _hw(32, 1, 128),
    "ml.m5.12xlarge": _hw(48, 1, 192),
    "ml.m5.16xlarge": _hw(64, 2, 256),
    "ml.m5.24xlarge": _hw(96, 2, 384),
    "ml.c5.large": _hw(2, 1, 4),
    "ml.c5.xlarge": _hw(4, 1, 8),
    "ml.c5.2xlarge": _hw(8, 1, 16),
    "ml.c5.4xlarge": _hw(16, 1, 32),
    "ml.c5.9xlarge": _hw(36, 1, 72),
    "ml.c5.12xlarge": _hw(48, 1, 96),
    "ml.c5.18xlarge": _hw(72, 2, 144),
    "ml.c5.24xlarge": _hw(96, 2, 192),
    "ml.c5n.large": _hw(2, 1, 5.25),
    "ml.c5n.2xlarge": _hw(8, 1, 21),
    "ml.c5n.4xlarge": _hw(16, 1, 42),
    "ml.c5n.9xlarge": _hw(36, 1, 96, efa=1),
    "ml.c5n.18xlarge": _hw(72, 2, 192, efa=1),
    # --- NVIDIA A10G (g5: EFA, one interface, on 8xlarge and larger)
    "ml.g5.xlarge": _hw(4, 1, 16, gpus=1, gpu_type="a10g"),
    "ml.g5.2xlarge": _hw(8, 1, 32, gpus=1, gpu_type="a10g"),
    "ml.g5.4xlarge": _hw(16, 1, 64, gpus=1, gpu_type="a10g"),
    "ml.g5.8xlarge": _hw(32, 1, 128, gpus=1, gpu_type="a10g", efa=1),
    "ml.g5.12xlarge": _hw(48, 1, 192, gpus=4, gpu_type="a10g", efa=1),
    "ml.g5.16xlarge": _hw(64, 1, 256, gpus=1, gpu_type="a10g", efa=1),
    "ml.g5.24xlarge": _hw(96, 1, 384, gpus=4, gpu_type="a10g", efa=1),
    "ml.g5.48xlarge": _hw(192, 2, 768, gpus=8, gpu_type="a10g", efa=1),
    # --- NVIDIA A100 / H100 / H200 with NVSwitch
    "ml.p4d.24xlarge": _hw(96, 2, 1152, gpus=8, gpu_type="a100", nvswitch=True, efa=4),
    "ml.p4de.24xlarge": _hw(96, 2, 1152, gpus=8, gpu_type="a100", nvswitch=True, efa=4),
    "ml.p5.48xlarge": _hw(192, 2, 2048, gpus=8, gpu_type="h100", nvswitch=True, efa=32),
    "ml.p5e.48xlarge": _hw(192, 2, 2048, gpus=8, gpu_type="h200", nvswitch=True, efa=32),
    "ml.p5en.48xlarge": _hw(192, 2, 2048, gpus=8, gpu_type="h200", nvswitch=True, efa=16),
    # --- AWS Trainium (16 chips; trn1: 2 NeuronCores per chip; trn2: 8 physical per chip, LNC=2 -> 64 logical)
    "ml.trn1.32xlarge": _hw(128, 2, 512, neuron_devices=16, neuron_cores=32, efa=8),
    "ml.trn1n.32xlarge": _hw(128, 2, 512, neuron_devices=16, neuron_cores=32, efa=16),
    # trn2: EFA count (16 x EFAv3 for 3.2 Tbps) not confirmed by a public device listing; check fi_info.
    "ml.trn2.48xlarge": _hw(192, 2, 2048, neuron_devices=16, neuron_cores=64, efa=16),
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
