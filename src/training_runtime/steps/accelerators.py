"""EFA, NVIDIA and Neuron software on the nodes that have the hardware.

Which steps a node gets depends only on what :func:`training_runtime.accelerators.detect` finds on it
(never on the instance type), and on the ``install_accelerator_software`` option: with it off, the
runtime leaves the accelerator software entirely to the AMI.

* :class:`EfaSoftware` - libfabric with the ``efa`` provider (and, on NVIDIA nodes, the aws-ofi-nccl
  plugin, which the EFA installer ships since 1.39), installed from the pinned EFA installer when the
  provider is missing, and ``kernel.yama.ptrace_scope = 0`` (libfabric's shared-memory transport uses
  cross-process memory access, which Ubuntu's default ptrace protection blocks).
* :class:`NvidiaSoftware` - the driver must come with the AMI (checked, never installed); fabric
  manager (NVSwitch systems only: without it CUDA fails with error 802 "system not yet initialized") and
  DCGM are installed and started when missing.
* :class:`NeuronSoftware` - the Neuron apt repository (signed-by keyring) and the pinned driver,
  runtime, collectives and tools.

The steps live in :mod:`.efa`, :mod:`.nvidia` and :mod:`.neuron`; the versions they install in
:mod:`training_runtime.pins`.
"""

from __future__ import annotations

from typing import List

from training_runtime.accelerators import detect, detection_warnings
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.steps import Step
from training_runtime.steps.efa import EfaSoftware
from training_runtime.steps.neuron import NeuronSoftware
from training_runtime.steps.nvidia import NvidiaSoftware

# --- which steps a node gets ---------------------------------------------------------------------


def accelerator_steps(node: Node) -> List[Step]:
    """The accelerator steps for this node, in order; none on a node without the hardware."""
    if not node.options.install_accelerator_software:
        return []
    found = detect(node)
    if found.any:
        log(
            "accelerators",
            efa=found.efa,
            nvidia_gpus=found.nvidia_gpus,
            nvswitches=found.nvswitches,
            neuron_devices=found.neuron_devices,
        )
    for warning in detection_warnings(node, found):
        log("accelerator_warning", message=warning)
    steps: List[Step] = []
    if found.nvidia_gpus:
        steps.append(NvidiaSoftware(found))
    if found.neuron_devices:
        steps.append(NeuronSoftware())
    if found.efa:
        steps.append(EfaSoftware(found))
    return steps
