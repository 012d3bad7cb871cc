"""HyperPod's automatic Slurm topology: the runtime leaves it alone and says what it found in its plan.

Since 2026-04-23 HyperPod's cluster agent writes ``topology.conf`` next to slurm.conf and sets
``TopologyPlugin=topology/tree`` (docs/research/hyperpod-2026-fidelity.md §2; awslabs/awsome-distributed-ai,
tools/devops-agent/docs/hyperpod-mental-model.md: the ClusterAgent "Writes ``slurm.conf`` and
``topology.{conf,yaml}``"). Both files are HyperPod's: the runtime writes neither there. A slurm.conf that names
the plugin without the file breaks ``sbatch`` ("Requested topology configuration is not available":
aws-samples/sample-physical-ai-scaffolding-kit PR #14), so the plan warns when it finds that, and when the file
has no switch (a tree over no node: SchedMD/slurm ``src/plugins/topology/tree/switch_record.c``). The generic
platform's renderer sets the plugin only together with a tree of at least one switch (``SlurmSettings.topology``;
``render.topology_conf.automatic_topology`` gives None for a cluster with no Slurm node). The plan only reports:
the repairs, then and whenever HyperPod's agent rewrites the files later, are the Slurm guard's
(:mod:`training_runtime.guard`, its table says which and why).
"""

from __future__ import annotations

import re
from typing import List, Optional

from training_runtime.files import read_text
from training_runtime.node import Node
from training_runtime.steps import Step
from training_runtime.steps.slurm import conf_path

TOPOLOGY_CONF = "topology.conf"
TOPOLOGY_PLUGIN = re.compile(r"^\s*TopologyPlugin\s*=\s*(\S+)", re.IGNORECASE | re.MULTILINE)


def topology_notes(slurm_conf: Optional[str], topology_conf: Optional[str], where: str) -> List[str]:
    """What the plan says about HyperPod's topology, from its two files (None: the file is missing). Pure."""
    found = TOPOLOGY_PLUGIN.findall(slurm_conf or "")
    plugin = found[-1] if found else None
    if plugin is None or plugin.lower() in ("topology/none", "topology/default"):
        return ["no TopologyPlugin in HyperPod's slurm.conf (automatic topology off, or an AMI before 2026-04)"]
    if plugin.lower() == "topology/tree" and topology_conf is None:
        return [
            "WARNING: HyperPod's slurm.conf sets TopologyPlugin=topology/tree but {} is missing: sbatch fails "
            "('Requested topology configuration is not available'). Both files are HyperPod's: left alone".format(where)
        ]
    switches = len(re.findall(r"^\s*SwitchName=", topology_conf or "", re.IGNORECASE | re.MULTILINE))
    if plugin.lower() == "topology/tree" and switches == 0:
        return [
            "WARNING: HyperPod's slurm.conf sets TopologyPlugin=topology/tree but {} has no switches: slurmctld "
            "cannot build the tree ('No switches configured', fatal in current Slurm). Both files are HyperPod's: "
            "left alone".format(where)
        ]
    return ["HyperPod's topology: TopologyPlugin={}, {} with {} switches; left alone".format(plugin, where, switches)]


class HyperPodTopology(Step):
    """Changes nothing; its plan row says what HyperPod's automatic topology looks like on this controller."""

    name = "slurm-topology"

    def needed(self, node: Node) -> bool:
        return False

    def apply(self, node: Node) -> None:
        """Nothing to do: the files are HyperPod's."""

    def left_alone(self, node: Node) -> List[str]:
        where = conf_path(node, TOPOLOGY_CONF)
        return topology_notes(read_text(node, conf_path(node, "slurm.conf")), read_text(node, where), where)
