"""What a local node's instance type has that this machine cannot: its hardware, declared emulated.

Every local node runs with ``hyperpod_cdk.emulation.hardware`` (:func:`hyperpod_local.overlay.emulated`):
its CPUs and memory are this machine's, and its GPUs, Neuron devices and EFA interfaces are declared by the
instance type and not present. The health checks skip those, saying so; the launcher runs CPU processes and
sets ``HYPERPOD_CDK_EMULATED_HARDWARE=1``; ``hyperpod-local status`` names them with this text.
"""

from __future__ import annotations

from training_runtime.hardware import hardware_for


def declared_devices(instance_type: str) -> str | None:
    """``"8 GPUs (h100), 32 EFA interfaces"``: what the type declares beyond CPUs and memory, or None."""
    try:
        hardware = hardware_for(instance_type, {})
    except ValueError:
        return None
    if hardware is None:
        return None
    parts = []
    if hardware.gpus:
        parts.append(f"{hardware.gpus} GPUs" + (f" ({hardware.gpu_type})" if hardware.gpu_type else ""))
    if hardware.neuron_devices:
        parts.append(f"{hardware.neuron_devices} Neuron devices")
    if hardware.efa_interfaces:
        parts.append(f"{hardware.efa_interfaces} EFA interfaces")
    return ", ".join(parts) or None


def hardware_note(instance_type: str) -> str:
    """One line for ``local status``: the node's type and what of it is emulated."""
    devices = declared_devices(instance_type)
    if devices is None:
        return f"{instance_type} (CPUs and memory: this machine's)"
    return f"{instance_type} (emulated: {devices} declared, not present; CPUs and memory: this machine's)"
