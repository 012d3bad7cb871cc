"""The cluster's bridge and its address plan: which host of the subnet is whose (pure; the one definition).

Every node's cable ends on one Linux bridge, :data:`BRIDGE`, in the cluster's switch network namespace
(:mod:`hyperpod_local.namespaces`). The host-side services put their addresses on that bridge, so the nodes reach
them without leaving the cluster; the nodes count up from :data:`FIRST_NODE_HOST`. Host ``n`` is the subnet's
network address plus ``n`` (``10.250.0.2`` is host 2 of ``10.250.0.0/24``); :data:`PLAN` lists them and
:func:`plan_table` renders the table docs/local-cluster.md shows (a test compares the two).
"""

from __future__ import annotations

import ipaddress

BRIDGE = "br0"
"""The bridge's name inside the switch namespace."""
IMDS_HOST = 2
"""The fake instance metadata service (:mod:`hyperpod_local.imds`; a thread of the control plane when that runs)."""
CONTROL_PLANE_HOST = 3
"""The emulated SageMaker API for the nodes (:mod:`hyperpod_local.control_plane.local`)."""
FIRST_NODE_HOST = 10
"""The first node's address; the others follow (:mod:`hyperpod_local.layout`)."""
PROMETHEUS_HOST = -1
"""The cluster's Prometheus server (:mod:`hyperpod_local.metrics`): the subnet's last host."""
PLAN = (
    ("the fake instance metadata service", IMDS_HOST),
    ("the emulated control plane, for the nodes", CONTROL_PLANE_HOST),
    ("the nodes, in layout order", FIRST_NODE_HOST),
    ("the Prometheus server", PROMETHEUS_HOST),
)
"""(what, host) in address order; a negative host counts from the end (-1: the last host)."""


def host(subnet: str, number: int) -> str:
    """Host ``number`` of ``subnet``: the network address plus ``number``; -1 is the last host, -2 the one before."""
    network = ipaddress.IPv4Network(subnet)
    if number < 0:
        return str(network.broadcast_address + number)
    return str(network.network_address + number)


def imds_address(subnet: str) -> str:
    return host(subnet, IMDS_HOST)


def control_plane_address(subnet: str) -> str:
    return host(subnet, CONTROL_PLANE_HOST)


def prometheus_address(subnet: str) -> str:
    return host(subnet, PROMETHEUS_HOST)


def plan_table(subnet: str) -> str:
    """The plan as a Markdown table, with ``subnet``'s addresses."""
    rows = ["| Host | Address | What |", "|---|---|---|"]
    for what, number in PLAN:
        shown = "last" if number == PROMETHEUS_HOST else f"{number}" + (" on" if number == FIRST_NODE_HOST else "")
        more = ", ..." if number == FIRST_NODE_HOST else ""
        rows.append(f"| {shown} | `{host(subnet, number)}`{more} | {what} |")
    return "\n".join(rows) + "\n"
