"""The bridge's address plan (``hyperpod_local.bridge``) is the one the services and the layout use, no address
is taken twice, and docs/local-cluster.md shows it as the module renders it. No root."""

from __future__ import annotations

from pathlib import Path

from hyperpod_cdk.core.config import load_config
from hyperpod_local import bridge, imds, metrics
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.layout import DEFAULT_SUBNET, plan_layout

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- BEGIN GENERATED: bridge-plan -->\n", "<!-- END GENERATED: bridge-plan -->"


def test_each_service_has_its_host_of_the_plan() -> None:
    subnet = "10.250.0.0/24"
    assert imds.imds_address(subnet) == "10.250.0.2"
    assert control_plane.address(subnet) == "10.250.0.3"
    assert metrics.server_address(subnet) == "10.250.0.254"
    assert imds.imds_url(subnet) == "http://10.250.0.2:8111"
    assert control_plane.sagemaker_url(subnet) == "http://10.250.0.3:8112"
    assert metrics.server_address("192.168.7.0/25") == "192.168.7.126"  # the last host of a smaller subnet


def test_nodes_start_at_the_plans_first_node_host_and_no_address_is_shared() -> None:
    subnet = "10.9.0.0/24"
    layout = plan_layout(load_config(ROOT / "examples" / "cpu-cluster.yaml"), subnet=subnet)
    assert layout.nodes[0].ip == bridge.host(subnet, bridge.FIRST_NODE_HOST) == "10.9.0.10"
    services = [imds.imds_address(subnet), control_plane.address(subnet), metrics.server_address(subnet)]
    addresses = services + [n.ip for n in layout.nodes]
    assert len(set(addresses)) == len(addresses)


def test_the_docs_show_the_plan_as_the_module_renders_it() -> None:
    text = (ROOT / "docs" / "local-cluster.md").read_text()
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    expected = bridge.plan_table(DEFAULT_SUBNET)
    assert block == expected, f"docs/local-cluster.md's bridge-plan block is stale; it should read:\n{expected}"
    assert expected.splitlines()[2] == "| 2 | `10.250.0.2` | the fake instance metadata service |"
