"""Prices as Slurm billing on the node: each partition's ``TRESBillingWeights``
(:mod:`training_runtime.billing_weights`) from the parameters file's ``prices``.

Generic platform: the rendered slurm.conf carries them on its partition lines (:func:`.slurm.partitions`).
HyperPod: HyperPod writes slurm.conf and owns its partition lines (its drift detection compares them:
sagemaker-hyperpod-ref, ``SlurmConfigStrategy``), so the controller sets the weights in slurmctld's state with
``scontrol update PartitionName=<p> TRESBillingWeights=<w>`` (scontrol(1): TRESBillingWeights is one of the partition
fields ``update`` takes). That state does not outlive a slurmctld restart that re-reads slurm.conf: "Without this
option [-R], ... node, partition and power save state will be recovered from the configuration file" (slurmctld(8));
the controller's next bootstrap sets them again, and ``hyperpod-cdk cost`` leaves unweighted partitions out and
says so. docs/cost.md, "Prices", warns.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from training_runtime.billing_weights import partition_weights
from training_runtime.hardware import hardware_for
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.run import CommandError
from training_runtime.steps import Step


def partition_members(node: Node) -> Tuple[Dict[str, List[Tuple[str, int]]], List[str]]:
    """Each compute partition's (instance type, Slurm CPUs per node): a group's type, or a flexible group's
    candidates; and notes for types whose CPUs the catalogue does not know."""
    members: Dict[str, List[Tuple[str, int]]] = {}
    notes: List[str] = []
    for group in node.params.groups:
        if group.role != "compute" or not group.partition:
            continue
        kinds = members.setdefault(group.partition, [])
        for name in [group.instance_type] if group.instance_type else list(group.instance_types):
            hardware = hardware_for(name, node.options.node_hardware, group.threads_per_core) if name else None
            if hardware is None:
                notes.append("partition {}: CPUs of {} unknown (runtime.node_hardware)".format(group.partition, name))
                members.pop(group.partition, None)
                break
            kinds.append((name, hardware.cpus))
    return members, notes


def billing_weights(node: Node) -> Tuple[Dict[str, str], List[str]]:
    """Partition -> ``TRESBillingWeights`` for this cluster's prices, and why any partition has none."""
    members, notes = partition_members(node)
    weights, more = partition_weights(members, node.params.prices)
    return weights, notes + more


def current_weights(text: str) -> Optional[str]:
    """``TRESBillingWeights`` in one ``scontrol -o show partition`` line; None when unset."""
    for part in text.split():
        if part.startswith("TRESBillingWeights="):
            value = part.split("=", 1)[1]
            return None if value in ("", "(null)") else value
    return None


class HyperPodBillingWeights(Step):
    """HyperPod controller: each priced partition's TRESBillingWeights in slurmctld (``scontrol update``)."""

    name = "slurm-billing-weights"

    def _changes(self, node: Node) -> List[List[str]]:
        scontrol = node.slurm.command("scontrol")
        changes = []
        for partition, weights in sorted(billing_weights(node)[0].items()):
            try:
                result = node.run([scontrol, "-o", "show", "partition", partition], check=False, timeout=30)
            except CommandError:
                result = None
            if result is not None and result.ok and current_weights(result.stdout) == weights:
                continue
            changes.append([scontrol, "update", "PartitionName=" + partition, "TRESBillingWeights=" + weights])
        return changes

    def needed(self, node: Node) -> bool:
        return bool(self._changes(node))

    def apply(self, node: Node) -> None:
        for notes in billing_weights(node)[1]:
            log("billing_weights_skipped", warning=notes)
        for argv in self._changes(node):
            node.run(argv, timeout=60)

    def describe(self, node: Node) -> List[str]:
        return [" ".join(argv) for argv in self._changes(node)]
