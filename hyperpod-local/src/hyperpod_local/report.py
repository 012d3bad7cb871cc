"""What ``hyperpod-local status`` reports about a cluster: its nodes, their liveness, and sinfo."""

from __future__ import annotations

from typing import Any

from hyperpod_local.emulated import hardware_note
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
        "platform": cluster.state.platform,
        "slurm": cluster.state.slurm,
        "prefix": cluster.state.prefix,
        "subnet": cluster.layout.subnet,
        "shared": f"{cluster.workdir / 'shared'} (at {cluster.state.fsx_mount_path} on every node)",
        "capped": {name: {"config": want, "local": got} for name, (want, got) in cluster.layout.capped().items()},
        "nodes": nodes,
        "sinfo": sinfo(cluster),
        "prometheus": browse_hint(cluster) if running(cluster) else None,
    }
