"""What HyperPod writes for a Slurm cluster, as the emulator writes it: slurm.conf, topology.conf, the munge key.

Pure (the munge key: a file in the work directory), so it is tested without root
(``tests/test_local_hyperpod_files.py``); :mod:`hyperpod_local.hyperpod_platform` puts these files on a node.
:func:`slurm_conf` renders the controller's ``/opt/slurm/etc/slurm.conf`` from the groups' ``SlurmConfig`` with
the runtime's one slurm.conf writer and :data:`HYPERPOD_SETTINGS`; :func:`topology_conf` the automatic
topology's ``topology.conf``; :func:`munge_key` the cluster's key; :func:`node_hostname` the nodes' host and
Slurm names under the cluster's naming.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from hyperpod_local.layout import LocalLayout, LocalNode, network_layers
from hyperpod_local.overlay import EMULATION_SLURM_OPTIONS, host_hardware
from training_runtime.groups import COMPUTE, LOGIN
from training_runtime.hardware import NodeHardware
from training_runtime.node import HYPERPOD_SLURM
from training_runtime.node_names import slurm_name
from training_runtime.render.slurm_conf import render_slurm_conf
from training_runtime.render.slurm_types import Partition, SlurmNode, SlurmSettings, Switch
from training_runtime.render.topology_conf import automatic_topology, render_topology_conf

SLURM_ETC = HYPERPOD_SLURM.conf_dir
ACCOUNTING_CONF = "accounting.conf"
"""Included by name, next to slurm.conf: slurmctld sends configless nodes only such includes (slurm.conf(5),
``enable_configless``)."""
MUNGE_KEY_SIZE = 1024
HYPERPOD_SETTINGS = SlurmSettings(
    cluster_name="placeholder",
    controller_name="placeholder",
    controller_address="127.0.0.1",
    header=(
        "Written by the hyperpod-local emulator in HyperPod's place (docs/local-cluster.md), with HyperPod's",
        "settings, by the runtime's slurm.conf renderer. The runtime on the node does not change it.",
    ),
    accounting_include=ACCOUNTING_CONF,  # by name, next to slurm.conf: configless nodes are sent it too
    configless=True,  # SlurmctldParameters=enable_configless: login and compute nodes run slurmd --conf-server
    # No systemd and a shared cgroup tree in the emulation: no cgroup plugins (not HyperPod's choice; its own
    # slurm.conf uses task/none, "required for auto-resume", which is the renderer's default too).
    proctrack="proctrack/linuxproc",
    task_plugin="task/none",
    return_to_service=2,
)
"""HyperPod's slurm.conf settings as the emulator plays them; the cluster's names and addresses fill the rest."""


def node_hostname(naming: str, node: LocalNode) -> str:
    """The node's host name and Slurm node name under ``naming`` (the runtime's one rule)."""
    return slurm_name(naming, node.name, node.ip)


DEV_PARTITION = "dev"
"""HyperPod's universal partition: "All nodes are automatically added to the universal ``dev`` partition in addition
to their specified partition" (AWS, sagemaker-hyperpod-ref, ``SlurmConfig.PartitionNames``)."""
TOPOLOGY_CONF = "topology.conf"


def slurm_conf(layout: LocalLayout, naming: str, cpus: int | None = None, topology: bool = True) -> str:
    """``/opt/slurm/etc/slurm.conf`` as HyperPod writes it from the groups' ``SlurmConfig``, rendered by the
    runtime's one slurm.conf writer (:func:`training_runtime.render.slurm_conf.render_slurm_conf`) with
    :data:`HYPERPOD_SETTINGS`: the first controller instance is SlurmctldHost (the others its backups), every
    compute and login instance a NodeName line by its name under ``naming`` (``ip-a-b-c-d`` or the instance
    name; login nodes run slurmd on HyperPod),
    the universal ``dev`` partition with every node (``Nodes=ALL``, the default: a HyperPod cluster's ``sinfo``
    lists ``dev*``, docs/local-cluster.md), every compute group's instances in the group's partition, the
    accounting keys in the included ``accounting.conf``, the emulation's fast failure detection
    (:data:`~hyperpod_local.layout.EMULATION_SLURM_OPTIONS`) and, with ``topology`` (HyperPod's automatic
    topology), ``TopologyPlugin=topology/tree`` over :func:`topology_switches` (none while the tree is empty)."""
    figures = host_hardware(cpus)
    hardware = NodeHardware(
        cpus=figures["cpus"],
        sockets=figures["sockets"],
        cores_per_socket=figures["cores_per_socket"],
        threads_per_core=figures["threads_per_core"],
        memory_mib=figures["memory_mib"],
    )
    primary, *backups = layout.controllers
    settings = dataclasses.replace(
        HYPERPOD_SETTINGS,
        cluster_name=layout.cluster_name,
        controller_name=node_hostname(naming, primary),
        controller_address=primary.ip,
        backup_controllers=tuple((node_hostname(naming, n), n.ip) for n in backups),
        topology=topology_switches(layout, naming) if topology else None,
    )
    fast = EMULATION_SLURM_OPTIONS
    settings = dataclasses.replace(
        settings,
        slurmd_timeout=fast["slurmd_timeout"],
        slurmctld_timeout=fast["slurmctld_timeout"],
        message_timeout=fast["message_timeout"],
        sched_interval=fast["sched_interval"],
        cred_expire=fast["cred_expire"],
    )
    nodes = [SlurmNode(node_hostname(naming, n), n.ip, hardware) for n in layout.nodes if n.role in (COMPUTE, LOGIN)]
    partitions = [Partition(DEV_PARTITION, (), default=True, all_nodes=True)]
    for group in layout.groups:
        members = tuple(node_hostname(naming, n) for n in layout.nodes if n.group == group.name)
        if group.role == COMPUTE:  # a group at 0 nodes keeps its partition, empty (hyperpod_local.membership)
            partitions.append(Partition(group.partition or group.name, members))
    return render_slurm_conf(settings, nodes, partitions)


def topology_switches(layout: LocalLayout, naming: str) -> tuple[Switch, ...] | None:
    """The switch tree HyperPod's agent writes to ``topology.conf``: from each Slurm node's network layers
    (:func:`~hyperpod_local.layout.network_layers`, the instances' ``InstanceLabel``), by Slurm node name.
    None while the cluster has no Slurm node (every compute group at 0): no tree, no plugin
    (:func:`~training_runtime.render.topology_conf.automatic_topology`)."""
    by_instance = network_layers(layout)
    return automatic_topology({node_hostname(naming, layout.node(n)): path for n, path in by_instance.items()})


def topology_conf(layout: LocalLayout, naming: str) -> str | None:
    """``topology.conf`` as HyperPod's agent writes it, or None when there is no tree (:func:`topology_switches`)."""
    switches = topology_switches(layout, naming)
    if switches is None:
        return None
    return render_topology_conf(
        switches,
        (
            "Written by the hyperpod-local emulator in HyperPod's place (automatic Slurm topology,",
            "docs/local-cluster.md).",
        ),
    )


def munge_key(workdir: Path) -> bytes:
    """The cluster's munge key (made once, kept root-only in the work directory like HyperPod keeps it)."""
    path = workdir / "cluster" / "munge.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(os.urandom(MUNGE_KEY_SIZE))
    return path.read_bytes()
