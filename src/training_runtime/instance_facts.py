"""What EC2 says each instance type HyperPod offers has: the one table of instance-type hardware facts.

The figures (vCPUs, cores, threads per core and the values EC2 accepts, memory, accelerators and their kind, EFA
interfaces, instance store, architecture) come from EC2's own description of the type (``DescribeInstanceTypes``;
``ml.X`` is EC2's ``X``), each type with its source and the date it was read, generated into
:mod:`training_runtime.instance_table` from ``hyperpod_cdk/data/instance_hardware.json`` (scripts/gen_instance_facts.py;
docs/instance-types.md shows the table). A figure no source gives is ``None``: unknown, never guessed, and the rules
that need it say so. :data:`training_runtime.hardware.INSTANCE_HARDWARE` (what slurm.conf declares) derives from
this table; the config rules (threads per core, deep health checks, GPUDirect Storage) read it directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from training_runtime import instance_table

NVIDIA_GPU = "nvidia-gpu"
NEURON = "neuron"
NO_ACCELERATOR = "none"
ACCELERATOR_KINDS = (NVIDIA_GPU, NEURON, NO_ACCELERATOR)
"""EC2's GpuInfo (NVIDIA) or NeuronInfo (AWS Trainium and Inferentia), or neither."""
DESCRIBE_COMMAND = "aws ec2 describe-instance-types --instance-types {}"
"""How a user checks a type's facts for themselves (EC2's name: without ``ml.``)."""


@dataclass(frozen=True)
class InstanceFacts:
    """One type as EC2 describes it (None: unknown), with the hand-kept layout figures EC2 does not give."""

    instance_type: str
    source: str
    checked: str
    vcpus: Optional[int]
    cores: Optional[int]
    threads_per_core: Optional[int]
    """EC2's default (DefaultThreadsPerCore)."""
    valid_threads_per_core: Optional[Tuple[int, ...]]
    """The values EC2 accepts for the type (ValidThreadsPerCore)."""
    memory_mib: Optional[int]
    architecture: Optional[str]
    accelerator_kind: Optional[str]
    accelerators: Optional[int]
    accelerator_model: Optional[str]
    accelerator_memory_mib: Optional[int]
    cores_per_accelerator: Optional[int]
    """NeuronCores per Neuron device (EC2's CoreInfo); None for GPUs."""
    efa_interfaces: Optional[int]
    """EC2's MaximumEfaInterfaces; 0: the type has no EFA."""
    instance_store_disks: Optional[int]
    instance_store_disk_gb: Optional[int]
    instance_store_nvme: Optional[bool]
    sockets: int = 1
    nvswitch: bool = False
    neuron_cores: Optional[int] = None
    """NeuronCores the Neuron runtime shows by default (None: devices x cores per device)."""
    gpudirect_storage: bool = False
    """FSx for Lustre names the type as a GPUDirect Storage client (instance_table.GPUDIRECT_STORAGE_SOURCE)."""

    @property
    def known(self) -> bool:
        """Whether a source describes the type at all."""
        return self.vcpus is not None

    @property
    def efa(self) -> Optional[bool]:
        return None if self.efa_interfaces is None else self.efa_interfaces > 0

    @property
    def ec2_name(self) -> str:
        return self.instance_type[3:] if self.instance_type.startswith("ml.") else self.instance_type

    @property
    def cited(self) -> str:
        """The source and date, as a rule cites them."""
        return "EC2 on {}: {}, read {}".format(self.ec2_name, self.source, self.checked)

    def supports_threads_per_core(self, value: int) -> Optional[bool]:
        """Whether EC2 accepts ``value`` threads per core on the type; None when unknown."""
        if self.valid_threads_per_core is None:
            return None
        return value in self.valid_threads_per_core


def _facts(instance_type: str, row: Sequence[Any]) -> InstanceFacts:
    """A generated row (instance_table.TYPES: its columns) as facts, with the type's layout figures."""
    source, checked = instance_table.SOURCES[row[0]]
    (vcpus, cores, threads, valid, memory, architecture, kind, count, model, device_memory, device_cores) = row[1:12]
    efa, disks, disk_gb, nvme = row[12:16]
    layout: Sequence[Any] = instance_table.LAYOUT.get(instance_type, (1, False, None))
    return InstanceFacts(
        instance_type,
        source,
        checked,
        vcpus,
        cores,
        threads,
        valid,
        memory,
        architecture,
        kind,
        count,
        model,
        device_memory,
        device_cores,
        efa,
        disks,
        disk_gb,
        nvme,
        sockets=layout[0],
        nvswitch=layout[1],
        neuron_cores=layout[2],
        gpudirect_storage=instance_type in instance_table.GPUDIRECT_STORAGE,
    )


INSTANCE_FACTS: Dict[str, InstanceFacts] = {name: _facts(name, row) for name, row in instance_table.TYPES.items()}


def facts_for(instance_type: str) -> Optional[InstanceFacts]:
    """The type's facts; None for a type the table does not hold (not one HyperPod offers)."""
    return INSTANCE_FACTS.get(instance_type)
