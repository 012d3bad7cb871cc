"""Where the metrics software keeps its files on a node (stdlib; imported by job-time tools)."""

from __future__ import annotations

from typing import Dict

TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
"""node_exporter's textfile collector directory (the Debian/Ubuntu package's own default): every ``*.prom``
file here is served with the node's metrics."""
SLURM_TEXTFILE = "slurm.prom"
EFA_TEXTFILE = "efa.prom"
COST_TEXTFILE = "hyperpod_cost.prom"
SECURITY_TEXTFILE = "slurm_security.prom"
"""The Slurm security gate's metric (:mod:`.security`), from the controller's collector."""
GPU_JOB_DIR = "/run/hyperpod-cdk/gpu-jobs"
"""dcgm-exporter's ``--hpc-job-mapping-dir``: one file per GPU index listing the Slurm jobs on that GPU.
Under /run, so a reboot forgets jobs that died with the node."""
CONFIG_DIR = "/etc/hyperpod-cdk/metrics"
"""The runtime's metrics configuration: the agent's config, the DCGM counter list."""


def target_labels(cluster: str, instance: str, group: str, role: str) -> Dict[str, str]:
    """The labels every series of a node gets (the contract the dashboards rely on)."""
    return {"cluster": cluster, "instance": instance, "instance_group": group, "role": role}
