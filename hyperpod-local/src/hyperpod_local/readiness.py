"""When a local cluster is ready, and when it will not be: compute nodes idle, or out of service for good.

``up`` waits for every compute node to be idle, and fails at once, naming the reason, when one will not come
back by waiting: drained by the node runtime's health checks (reason ``hyperpod-cdk:<check>: ...``; not a Spot
reclaim's drain, which a replaced node leaves) or
``inval`` (Slurm refused what the node registered). slurmd runs the health check only every interval, so a node
may show idle before its first check: ``up`` runs each compute node's check once itself before it returns.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.health.remedy import NodeState
from training_runtime.paths import HEALTH_CHECK, HEALTH_LOG


def reasons(cluster: ClusterHandle, timeout: float = 10.0) -> dict[str, str]:
    """Every node out of service (down, drained, failed, invalid) with its reason (``sinfo -R`` on the first
    running controller); empty when sinfo cannot run."""
    controller = next((n.name for n in cluster.layout.controllers if cluster.namespaces.alive(n.name)), None)
    if controller is None:
        return {}
    try:
        result = cluster.exec(controller, ["sinfo", "-h", "-N", "-R", "-o", "%N|%E"], timeout=timeout)
    except (subprocess.TimeoutExpired, LocalClusterError):
        return {}
    found = {}
    for line in result.stdout.splitlines() if result.returncode == 0 else ():
        name, _, reason = line.partition("|")
        found[name.strip()] = reason.strip()
    return found


def fail_if_out_of_service(cluster: ClusterHandle, wanted: set[str], states: Mapping[str, str]) -> None:
    """Raise naming every node of ``wanted`` (Slurm node names) that will not become idle by waiting: drained by
    our health checks, or ``inval`` in ``states`` (Slurm node name -> sinfo state)."""
    out = {
        name: reason
        for name, reason in reasons(cluster).items()
        if name in wanted and (states.get(name) == "inval" or NodeState("DRAIN", reason).ours)
    }
    if out:
        raise LocalClusterError(
            "compute nodes are out of service and will not become idle:\n"
            + "\n".join(f"  - {name}: {reason}" for name, reason in sorted(out.items()))
            + f"\nThe nodes are still running for inspection; the health checks log to {HEALTH_LOG}, "
            "Slurm to /var/log/slurm/ on each node"
        )


def check_health(cluster: ClusterHandle) -> None:
    """Run each compute node's health check once now (as slurmd or the HyperPod timer would later), then fail
    as :func:`fail_if_out_of_service` does when one drained its node."""
    workers = [n.name for n in cluster.layout.workers]
    argv = ["sh", "-c", f"[ ! -x {HEALTH_CHECK} ] || {HEALTH_CHECK}"]
    with ThreadPoolExecutor(max_workers=max(1, len(workers))) as pool:
        list(pool.map(lambda name: cluster.exec(name, argv, timeout=120), workers))
    fail_if_out_of_service(cluster, {cluster.slurm_name(name) for name in workers}, {})


def sinfo(cluster: ClusterHandle, timeout: float = 10.0) -> str | None:
    """``sinfo -N`` on the first running controller (node name and state per line: a backup answers when
    the primary is down), or None when it cannot run."""
    controller = next((n.name for n in cluster.layout.controllers if cluster.namespaces.alive(n.name)), None)
    if controller is None:
        return None
    try:
        result = cluster.exec(controller, ["sinfo", "-h", "-N", "-o", "%N %T"], timeout=timeout)
    except (subprocess.TimeoutExpired, LocalClusterError):
        return None
    return result.stdout if result.returncode == 0 else None


def wait_idle(cluster: ClusterHandle, timeout: float, nodes: Sequence[str] | None = None) -> None:
    """Wait until ``sinfo`` on the controller shows each compute node (or each of ``nodes``) idle; fail at
    once, naming the reason, when one will not become idle (:func:`fail_if_out_of_service`)."""
    wanted = {cluster.slurm_name(n) for n in (nodes if nodes is not None else [w.name for w in cluster.layout.workers])}
    deadline = time.monotonic() + timeout
    last: str | None = None
    while True:
        last = sinfo(cluster)
        states = dict(line.split(None, 1) for line in (last or "").splitlines() if len(line.split()) == 2)
        if all(states.get(name) == "idle" for name in wanted):
            return
        if any(states.get(name, "").startswith(("drain", "inval")) for name in wanted):
            fail_if_out_of_service(cluster, wanted, states)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    controller = cluster.layout.controller.name
    raise LocalClusterError(
        f"compute nodes not idle after {timeout:.0f} s; sinfo on {controller} says:\n"
        f"{(last or '(sinfo did not run)').rstrip()}\n"
        f"Look at the Slurm logs: `hyperpod-local exec {controller} -- tail -n 50 /var/log/slurm/slurmctld.log`"
    )
