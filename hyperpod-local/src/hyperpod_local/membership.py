"""Nodes joining and leaving a running local cluster, as HyperPod's agent handles a scaled instance group.

HyperPod names the instances and writes their Slurm lines: in Continuous provisioning "HyperPod only updates the
partition-related sections of slurm.conf (such as partition name and node name entries)"
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-scaling-slurm.html), and every node's
``/opt/ml/config/resource_config.json`` lists the cluster's instances. So when a node is added or removed the
emulator, in the agent's place, (1) changes the layout in the state file (:func:`grown`, :func:`shrunk`: pure;
:func:`hyperpod_local.state.change_layout` stores the result), and (2) publishes it (:func:`publish`): the
controller's ``slurm.conf`` and ``topology.conf`` re-rendered by the same function that wrote them at ``up``
(:func:`hyperpod_local.hyperpod_files.slurm_conf`), every running node's resource_config.json and
``/etc/hosts`` line, then ``scontrol reconfigure`` (since Slurm 23.11 it adds and removes nodes without
restarting the daemons by hand).

A group at 0 nodes keeps its partition with no ``Nodes=`` (slurm.conf(5): a partition may exist with no
resources); jobs submitted to it stay pending until a node joins. AWS does not document what its agent writes
for a compute group scaled to 0; this is the emulator's choice.

Names: a new node is ``<group>-<n>`` with n one past the highest the group ever had (a removed node's name, and so
its instance id, is never reused, as EC2 never reuses instance ids); its address is the lowest free one from the
subnet's 10th host. Its host and Slurm name follow the cluster's naming (:mod:`training_runtime.node_names`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json

from hyperpod_local import breakage, hyperpod_files
from hyperpod_local.layout import (
    FIRST_HOST_INDEX,
    LayoutError,
    LocalLayout,
    LocalNode,
    _local_type,
    hosts_file,
    resource_config,
)
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.node_names import ip_name
from training_runtime.paths import RESOURCE_CONFIG_PATH

SLURM_ETC = hyperpod_files.SLURM_ETC


def grown(layout: LocalLayout, group_name: str) -> tuple[LocalLayout, LocalNode]:
    """``layout`` with one more node in ``group_name``, and that node."""
    spec = next((g for g in layout.groups if g.name == group_name), None)
    if spec is None:
        raise LayoutError("local cluster", [f"instance group {group_name!r}: not in this cluster"])
    index = (
        max(
            [layout.launched.get(group_name, 0)]
            + [int(n.name.rsplit("-", 1)[1]) for n in layout.nodes if n.group == group_name]
        )
        + 1
    )
    network = ipaddress.IPv4Network(layout.subnet)
    used = {n.ip for n in layout.nodes}
    hosts = list(network.hosts())[FIRST_HOST_INDEX:]
    free = next((str(h) for h in hosts if str(h) not in used), None)
    if free is None:
        raise LayoutError("local cluster", [f"subnet {layout.subnet}: no free address for another node"])
    node = LocalNode(f"{group_name}-{index}", group_name, spec.role, _local_type(spec, index - 1), free)
    launched = {**layout.launched, group_name: index}
    return dataclasses.replace(layout, nodes=(*layout.nodes, node), launched=launched), node


def shrunk(layout: LocalLayout, name: str) -> LocalLayout:
    """``layout`` without node ``name``."""
    layout.node(name)  # raises for an unknown node
    return dataclasses.replace(layout, nodes=tuple(n for n in layout.nodes if n.name != name))


def publish(cluster: ClusterHandle) -> None:
    """HyperPod's agent after a membership change: slurm.conf (and topology.conf) on the controllers, the
    resource config and hosts on every running node and in the work directory, then ``scontrol reconfigure``."""
    layout, naming = cluster.layout, cluster.state.variant.naming
    staged = cluster.workdir / "cluster"
    config = json.dumps(resource_config(layout), indent=2) + "\n"
    (staged / "resource_config.json").write_text(config)
    (staged / "hosts").write_text(hosts_file(layout))
    topology = cluster.state.variant.automatic_topology
    conf = hyperpod_files.slurm_conf(layout, naming, topology=topology)
    tree = hyperpod_files.topology_conf(layout, naming) if topology else None
    conf, tree = breakage.topology_as_written(cluster, conf, tree)  # a drill's broken agent, if any
    alive = [n for n in layout.nodes if cluster.namespaces.alive(n.name)]
    for node in alive:
        if node in layout.controllers:
            _write(cluster, node.name, f"{SLURM_ETC}/slurm.conf", conf)
            topology_path = f"{SLURM_ETC}/{hyperpod_files.TOPOLOGY_CONF}"
            if tree is not None:
                _write(cluster, node.name, topology_path, tree)
            elif topology:  # the last Slurm node left: no tree, so no plugin and no file (automatic_topology)
                cluster.exec(node.name, ["rm", "-f", topology_path], timeout=30)
        _write(cluster, node.name, RESOURCE_CONFIG_PATH, config)
        lines = "".join(f"{n.ip}\t{n.name} {ip_name(n.ip)}\n" for n in layout.nodes)
        script = (
            'while read -r ip names; do grep -q "^$ip[[:space:]]" /etc/hosts '
            '|| printf "%s\\t%s\\n" "$ip" "$names" >>/etc/hosts; done'
        )
        cluster.exec(node.name, ["/bin/sh", "-c", script], input=lines, timeout=30)
    primary = next((n for n in layout.controllers if n in alive), None)
    if primary is None:
        raise LocalClusterError("no controller is running: slurm.conf cannot be reconfigured")
    result = cluster.exec(primary.name, ["scontrol", "reconfigure"], timeout=60)
    if result.returncode != 0:
        raise LocalClusterError(
            f"scontrol reconfigure failed on {primary.name}: {(result.stderr or result.stdout).strip()}"
        )


def _write(cluster: ClusterHandle, name: str, path: str, text: str) -> None:
    script = 'mkdir -p "$(dirname "$0")" && cat >"$0.tmp" && chmod 0644 "$0.tmp" && mv "$0.tmp" "$0"'
    result = cluster.exec(name, ["/bin/sh", "-c", script, path], input=text, timeout=30)
    if result.returncode != 0:
        raise LocalClusterError(f"node {name}: writing {path} failed: {result.stderr.strip()}")
