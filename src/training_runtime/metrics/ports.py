"""The TCP ports of the metrics software on a node: the one definition (steps, the local cluster's
Prometheus and the dashboards use these)."""

from __future__ import annotations

NODE_EXPORTER_PORT = 9100
"""Prometheus' node_exporter; also serves the Slurm and EFA metrics through its textfile collector."""
DCGM_EXPORTER_PORT = 9400
"""NVIDIA's dcgm-exporter (NVIDIA nodes)."""
NEURON_MONITOR_PORT = 8000
"""neuron-monitor's Prometheus bridge (Neuron nodes)."""
PROMETHEUS_AGENT_PORT = 9090
"""The node's Prometheus agent (its own health and /metrics; loopback only)."""
