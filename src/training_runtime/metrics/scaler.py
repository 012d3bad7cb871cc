"""The scaler's metrics (controller): written by the scaler service into node_exporter's textfile directory
(:data:`SCALER_TEXTFILE`) each cycle. The heartbeat is a timestamp: its age is ``time() -
hyperpod_scaler_heartbeat_timestamp_seconds`` in PromQL (a stopped service cannot report its own age)."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple

from training_runtime.metrics.exposition import Family

SCALER_TEXTFILE = "scaler.prom"
REQUESTED = "hyperpod_scaler_nodes_requested_total"
DELETED = "hyperpod_scaler_nodes_deleted_total"
IN_FLIGHT = "hyperpod_scaler_in_flight_operations"
GROUP_NODES = "hyperpod_scaler_group_nodes"
PENDING = "hyperpod_scaler_pending_nodes"
LAST_ERROR = "hyperpod_scaler_last_error"
HEARTBEAT = "hyperpod_scaler_heartbeat_timestamp_seconds"
METRIC_NAMES = (REQUESTED, DELETED, IN_FLIGHT, GROUP_NODES, PENDING, LAST_ERROR, HEARTBEAT)


def scaler_families(
    totals: Mapping[str, int],
    in_flight: Mapping[str, int],
    groups: Mapping[str, Tuple[int, int, int, int]],
    pending: Mapping[str, int],
    last_error: Optional[str],
    heartbeat: float,
) -> List[Family]:
    """``groups``: name -> (current, target, min, max); ``pending``: group -> nodes pending jobs ask for."""
    requested = Family(REQUESTED, "Nodes the scaler asked HyperPod to add (BatchAddClusterNodes)", "counter")
    deleted = Family(DELETED, "Nodes the scaler deleted (BatchDeleteClusterNodes)", "counter")
    flight = Family(IN_FLIGHT, "Scaling operations in flight, by kind (add, delete)")
    nodes = Family(GROUP_NODES, "A scaled group's node counts: current, target, min, max")
    waiting = Family(PENDING, "Nodes that jobs pending for resources ask for, per scaled group")
    error = Family(LAST_ERROR, "1 when the scaler's last cycle failed, by error kind; 0 when it worked")
    beat = Family(HEARTBEAT, "When the scaler last finished a cycle (epoch seconds)")
    requested.set(totals.get("requested", 0))
    deleted.set(totals.get("deleted", 0))
    for kind in ("add", "delete"):
        flight.set(in_flight.get(kind, 0), kind=kind)
    for name, counts in sorted(groups.items()):
        for index, label in enumerate(("current", "target", "min", "max")):
            nodes.set(counts[index], group=name, count=label)
        waiting.set(pending.get(name, 0), group=name)
    error.set(1 if last_error else 0, kind=last_error or "none")
    beat.set(heartbeat)
    by_name: Dict[str, Family] = {f.name: f for f in (requested, deleted, flight, nodes, waiting, error, beat)}
    return [by_name[n] for n in METRIC_NAMES]
