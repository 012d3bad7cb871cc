"""Instance groups as the runtime sees them: roles, capacities, the name rules, and :class:`GroupSpec`.

The parameters parser (:mod:`.params`) builds these and the group rules (:mod:`.group_rules`) check them;
both import this module, so neither imports the other's definitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from training_runtime.scaling import ScalingSpec

CONTROLLER = "controller"
LOGIN = "login"
COMPUTE = "compute"
ROLES = (CONTROLLER, LOGIN, COMPUTE)

SPOT = "spot"
ON_DEMAND = "on-demand"
CAPACITIES = (SPOT, ON_DEMAND)
"""A group's ``capacity``: where its instances come from (HyperPod's ``CapacityRequirements``)."""

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
"""Cluster, instance-group and partition names (HyperPod's pattern, also valid Slurm names)."""
MAX_NAME_LENGTH = 63
"""Cluster and instance-group names (HyperPod)."""
MAX_PARTITION_LENGTH = 128
"""Slurm partition names (the renderer's limit too)."""


@dataclass(frozen=True)
class GroupSpec:
    """What the runtime needs to know about one instance group."""

    name: str
    role: str
    instance_type: Optional[str]
    """The SageMaker instance type; None when the template leaves it to a parameter (the node then takes it
    from HyperPod's resource config before any step runs)."""
    partition: Optional[str] = None
    threads_per_core: int = 1
    """HyperPod's ``ThreadsPerCore`` for the group: 1 (SMT off) or 2 (SMT on); sizes the node in slurm.conf."""
    instance_types: Tuple[str, ...] = ()
    """A flexible group's candidate types in priority order (``InstanceRequirements.InstanceTypes``); its nodes
    may differ in type, so ``instance_type`` is None and each node's own type comes from the resource config."""
    capacity: Optional[str] = None
    """``spot``, ``on-demand``, or None (not said: HyperPod's default, On-Demand). A Spot group's compute
    nodes watch for EC2's interruption notice (:mod:`training_runtime.spot`)."""
    scaling: Optional[ScalingSpec] = None
    """A compute group the scaler grows and shrinks with the queue (:mod:`training_runtime.scaler`); None: not
    scaled (the template's instance count is the count)."""

    @property
    def flexible(self) -> bool:
        return bool(self.instance_types)

    @property
    def is_spot(self) -> bool:
        return self.capacity == SPOT

    @property
    def resolved_type(self) -> str:
        """The instance type, known on a node once :class:`training_runtime.node.Node` has resolved it."""
        if self.instance_type is None:
            raise ValueError(
                "instance group {!r}: the instance type was not resolved from the resource config".format(self.name)
            )
        return self.instance_type
