"""What ``hyperpod-local status`` reports about a cluster (its nodes, their liveness, and sinfo), and what a failed
bootstrap reports."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.emulated import hardware_note
from hyperpod_local.layout import LocalNode
from hyperpod_local.metrics import browse_hint, running
from hyperpod_local.readiness import sinfo
from hyperpod_local.state import ClusterHandle


def status_report(cluster: ClusterHandle) -> dict[str, Any]:
    nodes = []
    for node in cluster.layout.nodes:
        record = cluster.namespaces.record(node.name)
        nodes.append(
            {
                **node.to_json(),
                "slurm_name": cluster.slurm_name(node.name),
                "hardware": hardware_note(node.instance_type),
                "alive": record is not None,
                "pid": record.pid if record else None,
                "netns": cluster.namespaces.netns(node.name),
            }
        )
    return {
        "cluster": cluster.layout.cluster_name,
        "workdir": str(cluster.workdir),
        "config": cluster.state.config_path,
        "mode": cluster.state.mode,
        "platform": cluster.state.variant.platform,
        "slurm": cluster.state.variant.slurm,
        "prefix": cluster.state.prefix,
        "subnet": cluster.layout.subnet,
        "shared": f"{cluster.workdir / 'shared'} (at {cluster.state.fsx_mount_path} on every node)",
        "capped": {name: {"config": want, "local": got} for name, (want, got) in cluster.layout.capped().items()},
        "nodes": nodes,
        "sinfo": sinfo(cluster),
        "prometheus": browse_hint(cluster) if running(cluster) else None,
        "control_plane": control_plane.url(cluster) if control_plane.running(cluster) else None,
    }


def bootstrap_failures(workdir: Path, results: Sequence[tuple[LocalNode, tuple[int, str]]]) -> list[str]:
    """One entry per node whose lifecycle script failed: its exit code, the runtime's own FAILED verdict where it
    printed one, the last line of its output, and where its log is."""
    failures = []
    for node, (code, output) in results:
        if code != 0:
            lines = [line.strip() for line in output.splitlines() if line.strip()]
            last = lines[-1] if lines else "(no output)"
            failed = [line for line in lines if "FAILED" in line and line != last]
            if failed:  # the runtime's own one-line verdict, when it printed one
                last = f"{failed[-1]} | {last}"
            failures.append(
                f"  - {node.name}: exit {code}: {last}\n    (log: {workdir}/logs/{node.name}-bootstrap.log)"
            )
    return failures
