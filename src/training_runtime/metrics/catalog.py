"""The metric names the runtime configures or emits, per exporter: the one list the dashboards check
their queries against and the local cluster's end-to-end test checks Prometheus for.

``METRICS`` is keyed by exporter: ``node`` (node_exporter, the names the dashboards use, plus Prometheus'
own ``up``), ``slurm`` (our collector), ``dcgm`` (the counters written to dcgm-exporter's CSV, generated
here), ``neuron`` (neuron-monitor's Prometheus bridge), ``efa`` (our collector), ``scaler`` (the capacity
scaler on the controller, :mod:`.scaler`), ``cost`` and ``security`` (the collector's cost report and
the Slurm security gate, :mod:`.security`) and ``guard`` (the Slurm guard on every HyperPod node, :mod:`.guard`).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Tuple

from training_runtime.metrics import cost, efa, guard, scaler, security, slurm

NODE_METRICS = (
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
)

DCGM_COUNTERS: Tuple[Tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total NVLink bandwidth counter over all lanes."),
)
"""(field, Prometheus type, help): the rows of dcgm-exporter's counters CSV (:func:`dcgm_counters_csv`)."""

NEURON_METRICS = (
    "neuroncore_utilization_ratio",
    "neuron_runtime_memory_used_bytes",
    "neurondevice_hw_ecc_events_total",
    "execution_errors_total",
)

METRICS: Dict[str, Tuple[str, ...]] = {
    "node": NODE_METRICS,
    "slurm": slurm.METRIC_NAMES,
    "dcgm": tuple(name for name, _, _ in DCGM_COUNTERS),
    "neuron": NEURON_METRICS,
    "efa": efa.METRIC_NAMES,
    "scaler": scaler.METRIC_NAMES,
    "cost": cost.METRIC_NAMES,
    "security": security.METRIC_NAMES,
    "guard": guard.METRIC_NAMES,
}
ALL_METRICS: FrozenSet[str] = frozenset(name for names in METRICS.values() for name in names)


def dcgm_counters_csv() -> str:
    """dcgm-exporter's ``-f`` file: ``field, type, help`` per line."""
    lines = ["# Written by hyperpod-cdk from training_runtime.metrics.catalog; edits are overwritten."]
    lines += ["{}, {}, {}".format(name, kind, text) for name, kind, text in DCGM_COUNTERS]
    return "\n".join(lines) + "\n"
