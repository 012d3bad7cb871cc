"""The metric names each exporter on our nodes emits: one definition for the runtime and the dashboards.

Placeholder with the names of the observability contract (issue #15) until the node runtime's own catalog
(branch obs-node) lands; that version replaces this file.
"""

from typing import Dict, FrozenSet, Tuple

METRICS: Dict[str, Tuple[str, ...]] = {
    "node": (
        "node_cpu_seconds_total",
        "node_memory_MemAvailable_bytes",
        "node_memory_MemTotal_bytes",
        "node_network_receive_bytes_total",
        "node_network_transmit_bytes_total",
        "node_filesystem_avail_bytes",
        "node_filesystem_size_bytes",
        "node_boot_time_seconds",
        "node_load1",
        "up",
    ),
    "slurm": (
        "slurm_nodes",
        "slurm_node_state",
        "slurm_jobs",
        "slurm_job_nodes",
        "slurm_cpus",
        "slurm_gpus",
        "slurm_scheduler_cycle_mean_microseconds",
        "slurm_scheduler_queue_length",
        "slurm_collector_success",
    ),
    "dcgm": (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    ),
    "neuron": (),
    "efa": (),
}
"""For each exporter ("node", "slurm", "dcgm", "neuron", "efa"), the metric names it emits."""

ALL_METRICS: FrozenSet[str] = frozenset(name for names in METRICS.values() for name in names)
"""Every metric name any of our exporters emits."""
