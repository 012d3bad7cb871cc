"""topology.conf for Slurm's topology/tree plugin: the switch tree, built from each node's network layers.

HyperPod's automatic Slurm topology (since 2026-04-23) has its cluster agent write ``topology.conf`` and set
``TopologyPlugin=topology/tree`` in slurm.conf, from each instance's ``InstanceLabel.network-node-layer-{1,2,3}``
in ``resource_config.json`` (EC2's instance topology: layer 1 is the top of the hierarchy, the last layer is the
switch the instance hangs off; awslabs/awsome-distributed-ai, tools/devops-agent/docs/hyperpod-mental-model.md).
The runtime never writes this file on HyperPod (it is the agent's); the emulator plays the agent with it.
"""

from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from training_runtime.render.hostlist import compress
from training_runtime.render.slurm_types import Switch

SWITCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def switches_from_layers(layers: Mapping[str, Sequence[str]]) -> Tuple[Switch, ...]:
    """The tree from each Slurm node's network nodes, top layer first (``[layer-1, layer-2, layer-3]``).

    The last layer's switches hold the nodes, every other switch its children of the next layer. Nodes with
    no layers are left out (Slurm then keeps them out of multi-node jobs that need the tree). Deterministic:
    switches in name order per layer, nodes in the order given."""
    depth = max((len(v) for v in layers.values()), default=0)
    children: List[Dict[str, List[str]]] = [{} for _ in range(depth)]
    for node, path in layers.items():
        if not path:
            continue
        for level, switch in enumerate(path):
            below = path[level + 1] if level + 1 < len(path) else node
            below_it = children[level].setdefault(switch, [])
            if below not in below_it:
                below_it.append(below)
    switches: List[Switch] = []
    for level in reversed(range(depth)):  # leaves first, as topology.conf lists them
        for name in sorted(children[level]):
            members = tuple(children[level][name])
            leaf = any(m in layers for m in members)
            switches.append(Switch(name, nodes=members if leaf else (), switches=() if leaf else members))
    return tuple(switches)


def automatic_topology(layers: Mapping[str, Sequence[str]]) -> Optional[Tuple[Switch, ...]]:
    """HyperPod's automatic topology as ``SlurmSettings.topology``: the tree of :func:`switches_from_layers`, or
    None while no Slurm node has network layers (a cluster whose compute groups are all at 0 and no login node).

    Slurm's topology/tree cannot run over no switches ("No switches configured", fatal for slurmctld in current
    Slurm: SchedMD/slurm ``src/plugins/topology/tree/switch_record.c``), so such a cluster's slurm.conf names no
    TopologyPlugin and has no topology.conf; the first node that joins brings both (an ``scontrol reconfigure``),
    and the last one to leave takes them away again."""
    return switches_from_layers(layers) or None


def render_topology_conf(switches: Sequence[Switch], header: Optional[Sequence[str]] = None) -> str:
    """The file: one ``SwitchName=`` line per switch (``Nodes=`` for a leaf switch, ``Switches=`` above)."""
    lines = ["# " + line for line in (header or ("topology.conf: Slurm's switch tree (topology/tree).",))]
    for switch in switches:
        if switch.nodes:
            lines.append("SwitchName={} Nodes={}".format(switch.name, compress(switch.nodes)))
        else:
            lines.append("SwitchName={} Switches={}".format(switch.name, ",".join(switch.switches)))
    return "\n".join(lines) + "\n"


def topology_problems(switches: Sequence[Switch], nodes: Set[str]) -> List[str]:
    """Every problem of a switch tree over the declared ``nodes``, in one list."""
    problems: List[str] = []
    if not switches:
        problems.append("settings.topology: no switches; give at least one, or None for no TopologyPlugin")
    names = [s.name for s in switches]
    for index, switch in enumerate(switches):
        where = "settings.topology[{}]".format(index)
        if not isinstance(switch.name, str) or not SWITCH_NAME.fullmatch(switch.name):
            problems.append("{}.name: got {!r}; use 1-64 letters, digits, '.', '_' and '-'".format(where, switch.name))
        elif names.count(switch.name) > 1 and names.index(switch.name) == index:
            problems.append("{}.name: {!r} is used twice; switch names must be unique".format(where, switch.name))
        if bool(switch.nodes) == bool(switch.switches):
            problems.append("{} ({}): give nodes or child switches, exactly one of them".format(where, switch.name))
        unknown = sorted(set(switch.nodes) - nodes)
        if unknown:
            problems.append("{}.nodes: {} not among the nodes".format(where, ", ".join(repr(n) for n in unknown)))
        missing = sorted(set(switch.switches) - set(names))
        if missing:
            problems.append("{}.switches: {} not defined".format(where, ", ".join(repr(n) for n in missing)))
    return problems
