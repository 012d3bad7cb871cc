"""Prices as Slurm billing: each partition's ``TRESBillingWeights`` from its instance type's price per hour.

The weight is on the CPU TRES alone: ``CPU = node_billing_per_minute(price) / CPUs per node``
(:mod:`training_runtime.billing`), so a job holding a whole node bills the node's price. Why the CPU and not
``GRES/gpu``: Slurm sums the weighted TRES unless ``PriorityFlags=MAX_TRES`` is set ("By default the billing of
TRES is calculated as the sum of all TRES types multiplied by their corresponding billing weight", slurm.conf,
TRESBillingWeights), and PriorityFlags is a cluster-wide key that HyperPod's slurm.conf owns; with one weighted
TRES the sum is the node price. Every job holds CPUs on every instance type (Trainium, GPU, CPU-only, and the
emulator's GPU-less nodes), while a GPU weight would bill CPU-only jobs nothing. The cost: a job that takes all
of a node's GPUs but few of its CPUs bills only its CPUs' share; HyperPod training jobs that ask for whole nodes
(``--exclusive``, which allocates every CPU) bill the whole node. Stdlib only (Python 3.8+).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from training_runtime.billing import node_billing_per_minute


@dataclass(frozen=True)
class InstancePrice:
    """One instance type's price per hour and where it came from (``snapshot <date>``, ``price-list <date>``,
    ``config: <source>``)."""

    per_hour: float
    source: str


def cpu_weight(price_per_hour: float, cpus: int) -> float:
    """The CPU billing weight that makes a node of ``cpus`` CPUs bill ``node_billing_per_minute(price)``."""
    if cpus <= 0:
        raise ValueError("cpus: got {!r}; a node has one CPU or more".format(cpus))
    return node_billing_per_minute(price_per_hour) / cpus


def weights_text(weight: float) -> str:
    """``TRESBillingWeights``' value: ``CPU=<weight>`` with six significant decimals (Slurm reads a float)."""
    return "CPU={}".format(("%.6f" % weight).rstrip("0").rstrip("."))


def partition_weights(
    members: Mapping[str, Iterable[Tuple[str, int]]], prices: Mapping[str, InstancePrice]
) -> Tuple[Dict[str, str], List[str]]:
    """Each partition's ``TRESBillingWeights`` from its nodes' (instance type, CPUs); and notes for partitions
    left without weights (a type without a price) or priced at their dearest type's per-CPU rate (mixed types:
    a flexible group)."""
    result: Dict[str, str] = {}
    notes: List[str] = []
    for partition in sorted(members):
        kinds = sorted(set(members[partition]))
        unpriced = sorted({t for t, _ in kinds if t not in prices})
        if not kinds or unpriced:
            if unpriced:
                notes.append(
                    "partition {}: no price for {}; it keeps Slurm's default billing (allocated CPUs)".format(
                        partition, ", ".join(unpriced)
                    )
                )
            continue
        weights = {cpu_weight(prices[t].per_hour, cpus) for t, cpus in kinds}
        weight: Optional[float] = max(weights)
        if len(weights) > 1:
            notes.append(
                "partition {}: instance types {} differ in price per CPU; billed at the highest".format(
                    partition, ", ".join(sorted({t for t, _ in kinds}))
                )
            )
        result[partition] = weights_text(weight or 0.0)
    return result, notes
