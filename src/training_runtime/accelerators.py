"""Which accelerators and fabric adapters this node has, read from the node itself.

Detection only: pure reads under ``node.root`` (sysfs and ``/dev``), no commands, no changes. The counts
come from the PCI bus (``/sys/bus/pci/devices/*/{vendor,device,class}``), which lists devices whether or
not their driver is loaded; the device nodes in ``/dev`` (which exist only once a driver is loaded) are
the fallback where sysfs shows nothing (a container with a partial /sys) and a cross-check otherwise.

The instance type is never used to decide what a node has: a p5 whose GPU fell off the bus must be seen
with 7 GPUs, not 8. The hardware table (:mod:`training_runtime.hardware`) is only consulted to *warn*
when the counts found differ from what the instance type should have.

PCI identifiers and where they were checked:

* Amazon's vendor id is ``0x1d0f``. EFA devices are ``0xefa0``-``0xefa4`` in the Linux ``efa`` driver's
  id table (``drivers/infiniband/hw/efa/efa_main.c``; ``0xefa4`` was added in 2025). Like the EFA
  installer, which detects EFA with the ``lspci -n`` prefix ``1d0f:efa``, any ``0xefaX`` counts.
* Neuron devices, from the ``aws-neuron-driver`` source (``neuron_device.h``): ``0x7164`` Trainium1,
  ``0x7264`` Inferentia2, ``0x7364`` Trainium2; ``0x7064``-``0x7067`` are Inferentia1, which the
  ``aws-neuronx`` stack does not drive, so they are not counted. ``0x7564``/``0x7565`` (Trainium3) come
  from a secondary description of a newer driver, not from the driver header itself: unverified.
* NVIDIA's vendor id is ``0x10de``. Data-centre GPUs are PCI class ``0x0302`` (3D controller); some
  boards show as ``0x0300`` (VGA). NVSwitch chips (A100/H100 HGX boards) are class ``0x0680`` (bridge,
  other) - the EC2 p4d/p5 ``lspci`` listings show them as "Bridge: NVIDIA Corporation Device".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from training_runtime.hardware import hardware_for
from training_runtime.node import Node

AMAZON_VENDOR = 0x1D0F
NVIDIA_VENDOR = 0x10DE

EFA_DEVICE_PREFIX = 0xEFA0
"""EFA device ids are ``0xefa0``-``0xefaf`` (the installer's ``1d0f:efa`` prefix)."""

NEURON_DEVICE_IDS: Dict[int, str] = {
    0x7164: "trainium1",
    0x7264: "inferentia2",
    0x7364: "trainium2",
    0x7564: "trainium3",  # unverified (see module docstring)
    0x7565: "trainium3",  # unverified
}

GPU_CLASSES = (0x0302, 0x0300)
"""PCI base class + subclass (the top 16 bits of the 24-bit class code)."""
NVSWITCH_CLASS = 0x0680

PCI_DEVICES = "/sys/bus/pci/devices"

_UVERBS = re.compile(r"^uverbs\d+$")
_NVIDIA_GPU = re.compile(r"^nvidia\d+$")
_NVSWITCH = re.compile(r"^nvidia-nvswitch\d+$")
_NEURON = re.compile(r"^neuron\d+$")


@dataclass(frozen=True)
class Accelerators:
    efa: int = 0
    nvidia_gpus: int = 0
    nvswitches: int = 0
    neuron_devices: int = 0

    @property
    def any(self) -> bool:
        return bool(self.efa or self.nvidia_gpus or self.neuron_devices)


def _hex(path: Path) -> Optional[int]:
    try:
        return int(path.read_text().strip(), 16)
    except (OSError, ValueError):
        return None


def pci_counts(node: Node) -> Optional[Accelerators]:
    """Counts from the PCI bus, or None when the node shows no PCI bus at all."""
    root = node.path(PCI_DEVICES)
    try:
        entries = sorted(root.iterdir())
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    if not entries:
        return None
    efa = gpus = switches = neuron = 0
    for entry in entries:
        vendor = _hex(entry / "vendor")
        device = _hex(entry / "device")
        klass = _hex(entry / "class")
        if vendor is None or device is None:
            continue
        subclass = (klass >> 8) if klass is not None else None
        if vendor == AMAZON_VENDOR:
            if device & 0xFFF0 == EFA_DEVICE_PREFIX:
                efa += 1
            elif device in NEURON_DEVICE_IDS:
                neuron += 1
        elif vendor == NVIDIA_VENDOR:
            if subclass in GPU_CLASSES:
                gpus += 1
            elif subclass == NVSWITCH_CLASS:
                switches += 1
    return Accelerators(efa=efa, nvidia_gpus=gpus, nvswitches=switches, neuron_devices=neuron)


def _matching(node: Node, directory: str, pattern: "re.Pattern[str]") -> int:
    try:
        return sum(1 for entry in node.path(directory).iterdir() if pattern.fullmatch(entry.name))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return 0


def device_node_counts(node: Node) -> Accelerators:
    """Counts from the device nodes the drivers create (zero for a device whose driver is not loaded)."""
    return Accelerators(
        efa=_matching(node, "/dev/infiniband", _UVERBS),
        nvidia_gpus=_matching(node, "/dev", _NVIDIA_GPU),
        nvswitches=_matching(node, "/dev", _NVSWITCH),
        neuron_devices=_matching(node, "/dev", _NEURON),
    )


def detect(node: Node) -> Accelerators:
    """What this node has: the PCI bus's count of each kind, or the device nodes' where the bus shows none."""
    pci = pci_counts(node) or Accelerators()
    dev = device_node_counts(node)
    return Accelerators(
        efa=pci.efa or dev.efa,
        nvidia_gpus=pci.nvidia_gpus or dev.nvidia_gpus,
        nvswitches=pci.nvswitches or dev.nvswitches,
        neuron_devices=pci.neuron_devices or dev.neuron_devices,
    )


_WORDS = (
    ("efa", "EFA interfaces", "/dev/infiniband/uverbsN"),
    ("nvidia_gpus", "NVIDIA GPUs", "/dev/nvidiaN"),
    ("nvswitches", "NVSwitches", "/dev/nvidia-nvswitchN"),
    ("neuron_devices", "Neuron devices", "/dev/neuronN"),
)


def detection_warnings(node: Node, found: Optional[Accelerators] = None) -> List[str]:
    """Differences worth a log line: bus vs device nodes, and found vs the instance type's expected figures.

    Never changes what the steps do; a count that differs from the table is reported, not corrected.
    """
    found = found if found is not None else detect(node)
    warnings: List[str] = []
    pci = pci_counts(node)
    dev = device_node_counts(node)
    if pci is not None:
        for field, words, nodes in _WORDS:
            on_bus, with_node = getattr(pci, field), getattr(dev, field)
            if on_bus and with_node != on_bus and field != "nvswitches":
                warnings.append(
                    "{} {} on the PCI bus but {} {} device nodes (driver not loaded, or a device failed to "
                    "initialise)".format(on_bus, words, with_node, nodes)
                )
    warnings.extend(_expected_warnings(node, found))
    return warnings


def _expected_warnings(node: Node, found: Accelerators) -> List[str]:
    instance_type = node.instance_type
    try:
        expected = hardware_for(instance_type, node.options.node_hardware)
    except ValueError as error:
        return ["cannot compare with the hardware table for {}: {}".format(instance_type, error)]
    if expected is None:
        return []
    pairs = (
        ("EFA interfaces", expected.efa_interfaces, found.efa),
        ("NVIDIA GPUs", expected.gpus, found.nvidia_gpus),
        ("Neuron devices", expected.neuron_devices, found.neuron_devices),
    )
    warnings = [
        "{} has {} {} but {} were found on this node{}".format(
            instance_type, want, words, got, "; a missing device usually means failing hardware" if got < want else ""
        )
        for words, want, got in pairs
        if want != got
    ]
    if expected.nvswitch and expected.gpus and found.nvidia_gpus and not found.nvswitches:
        warnings.append(
            "{} has NVSwitch but none was found on the PCI bus; fabric manager will not be set up".format(instance_type)
        )
    return warnings
