"""The cluster's switch (root only, network namespaces, no node booted): a node leaving does not cut the other
nodes off the addresses the switch's bridge holds itself (the control plane's, the metadata service's).

The stall it guards against (docs/local-cluster.md, "The bridge's MAC"): a bridge without a MAC of its own takes the
lowest of its ports' MACs; when the node on that port left, the bridge's MAC changed, and a node that had just
talked to the control plane kept sending to the old MAC until its ARP entry expired (15-45 s), then waited for
TCP's retransmissions: a call from the controller went unanswered for 30-60 s.
Alone: ``python -m pytest tests/test_local_switch.py`` (``make test`` runs it beside another cluster, docs/testing.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_local.bridge import BRIDGE
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.namespaces import Namespaces, list_netns

pytestmark = pytest.mark.local(root_only=True)

SUBNET = "10.231.0.0/24"
STAYING, LEAVING = "10.231.0.10", "10.231.0.11"
CONNECT_S = 5.0
"""Far below the shortest time an ARP entry stays REACHABLE (half of base_reachable_time, 30 s by default)."""


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def switch(tmp_path: Path) -> Iterator[Namespaces]:
    namespaces = Namespaces(
        tmp_path,
        shared_dir=tmp_path,
        fsx_mount_path="/fsx",
        hosts_file=tmp_path / "hosts",
        subnet=SUBNET,
        prefix=f"hpsw{os.getpid() % 10000}",
    )
    try:
        namespaces.create_switch()
        yield namespaces
    finally:
        for name in [namespaces.netns("staying"), namespaces.netns("leaving"), namespaces.switch]:
            if name in list_netns():
                subprocess.run(["ip", "netns", "delete", name], check=False)


def plug(switch: Namespaces, name: str, address: str, port_mac: str) -> str:
    """A node's cable as ``Namespaces`` wires it, with the switch-side end's MAC chosen (the kernel's is random)."""
    netns, port = switch.netns(name), f"v{address.rsplit('.', 1)[1]}"
    ip("netns", "add", netns)
    ip(
        "-n",
        switch.switch,
        "link",
        "add",
        port,
        "address",
        port_mac,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        netns,
    )
    ip("-n", switch.switch, "link", "set", port, "master", BRIDGE, "up")
    ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
    ip("-n", netns, "link", "set", "eth0", "up")
    return port


def connects(switch: Namespaces, name: str, host: str) -> bool:
    probe = f"import socket; socket.create_connection(({host!r}, {control_plane.PORT}), timeout={CONNECT_S}).close()"
    completed = subprocess.run(
        ["ip", "netns", "exec", switch.netns(name), sys.executable, "-c", probe], capture_output=True, timeout=60
    )
    return completed.returncode == 0


def test_a_node_leaving_does_not_cut_the_others_off_the_control_plane(switch: Namespaces) -> None:
    server = control_plane.address(SUBNET)
    ip("-n", switch.switch, "addr", "add", f"{server}/24", "dev", BRIDGE)
    listening = control_plane.bound_in_netns(switch.switch, server, control_plane.PORT)  # as serve() binds it
    try:
        plug(switch, "staying", STAYING, "0e:00:00:00:00:10")
        leaving = plug(switch, "leaving", LEAVING, "02:00:00:00:00:01")  # the lowest MAC on the bridge
        assert connects(switch, "staying", server)  # the staying node's ARP entry for the server is now fresh
        ip("-n", switch.switch, "link", "del", leaving)
        assert connects(switch, "staying", server), "the staying node's ARP entry for the bridge went stale"
    finally:
        listening.close()
