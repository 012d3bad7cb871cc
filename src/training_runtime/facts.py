"""What a booted node is, written once by ``bootstrap`` for the programs that run after it.

The launcher and the health checks run long after the lifecycle scripts, as any user, and without the
parameters file or HyperPod's resource config (both are root-only or gone by then). Bootstrap therefore
writes the facts they need to :data:`~training_runtime.paths.FACTS_PATH` (world-readable, nothing secret),
and installs a copy of this package under :data:`~training_runtime.paths.INSTALL_DIR` so they can run as
``PYTHONPATH=/opt/hyperpod-cdk/lib python3 -m training_runtime ...``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Dict, Optional

from training_runtime.hardware import NodeHardware
from training_runtime.paths import FACTS_PATH


class FactsError(RuntimeError):
    """The facts file is missing or unreadable (the node was not bootstrapped by hyperpod-cdk)."""


@dataclass(frozen=True)
class NodeFacts:
    cluster: str
    instance_name: str
    """HyperPod's InstanceName (the Slurm node name on the generic platform)."""
    instance_type: str
    """``ml.p5.48xlarge`` and so on."""
    group: str
    role: str
    platform: str
    """``generic`` or ``hyperpod``."""
    shared_mount: Optional[str]
    """Where the shared file system is mounted (``/fsx``); None when the cluster has none."""
    cpus: int
    gpus: int = 0
    neuron_devices: int = 0
    neuron_cores: int = 0
    efa_interfaces: int = 0
    emulated_hardware: bool = False
    """The accelerator and EFA counts above are declared, not present (the local cluster's
    ``hyperpod_cdk.emulation.hardware``): checks skip them and the launcher runs CPU processes."""
    slurm_name: str = ""
    """The node's Slurm node name as bootstrap decided it (:attr:`training_runtime.node.Node.slurm_name`); empty in
    facts written before it was recorded."""

    def dumps(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "NodeFacts":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def load_facts(root: Path = Path("/")) -> NodeFacts:
    path = root / FACTS_PATH.lstrip("/")
    try:
        return NodeFacts.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        raise FactsError(
            "{} does not exist: this node was not bootstrapped by hyperpod-cdk. Fix: pass the instance type "
            "explicitly (--instance-type), or run the lifecycle scripts on this node".format(FACTS_PATH)
        ) from None
    except (OSError, ValueError, TypeError) as error:
        raise FactsError("{} is unreadable ({}). Fix: re-run the node's bootstrap".format(FACTS_PATH, error)) from None


def facts_from(
    hardware: NodeHardware,
    *,
    cluster: str,
    instance_name: str,
    instance_type: str,
    group: str,
    role: str,
    platform: str,
    shared_mount: Optional[str],
    emulated_hardware: bool = False,
    slurm_name: str = "",
) -> NodeFacts:
    """A node's facts: who it is, and what its hardware has (the one place the figures are copied over)."""
    return NodeFacts(
        cluster=cluster,
        instance_name=instance_name,
        instance_type=instance_type,
        group=group,
        role=role,
        platform=platform,
        shared_mount=shared_mount,
        cpus=hardware.cpus,
        gpus=hardware.gpus,
        neuron_devices=hardware.neuron_devices,
        neuron_cores=hardware.neuron_cores,
        efa_interfaces=hardware.efa_interfaces,
        emulated_hardware=emulated_hardware,
        slurm_name=slurm_name,
    )
