"""HyperPod's part of bringing up a node, played by the emulator on the emulated HyperPod platform.

On SageMaker HyperPod the instance's image and HyperPod's agent set up Slurm before the lifecycle script
runs; our runtime then takes its HyperPod-platform path (``/opt/sagemaker_cluster`` exists, HyperPod owns
``/opt/slurm/etc/slurm.conf``). The emulator does that part here, from AWS's documents (docs/local-cluster.md,
"The emulated HyperPod platform", names the source of each behaviour and what is not emulated):

* the node runs Debian trixie's Slurm 24.11 (or, ``slurm="26.05"``, forky's: :mod:`hyperpod_local.rootfs`) in
  HyperPod's layout (``/opt/slurm/{bin,sbin,etc}``) from the root file system ``build-node-rootfs.sh``
  (package data) builds, not the host's packages;
* its host name and Slurm node name are HyperPod's ``ip-a-b-c-d`` or, with the naming ``instance``
  (``cluster_agent.json``'s ``UseInstanceNames``), its instance name (the variant's ``node_names``);
* :func:`prepare` writes the marker, the controller's ``slurm.conf`` from each group's ``SlurmConfig`` (node
  type, partition; every node also in the universal ``dev`` partition) with configless Slurm enabled and, with
  automatic topology (the variant's ``automatic_topology``), ``topology.conf``; the cluster's munge key,
  starts munged and, in the
  API-driven mode, slurmctld or (on login and compute nodes, from the controller's configuration) slurmd,
  and installs srun with ``--auto-resume`` (:mod:`hyperpod_local.agent`; ``LocalCluster.up`` starts the
  emulated HyperPod agent that answers it).

The generic platform (the host's own root and Slurm, the runtime renders slurm.conf) stays available.
Stdlib only: the emulator does not need aws_cdk.
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
import sysconfig
import tarfile
from pathlib import Path

from hyperpod_local import agent, ami
from hyperpod_local.layout import LocalLayout, LocalNode, network_layers
from hyperpod_local.overlay import EMULATION_SLURM_OPTIONS, host_hardware
from hyperpod_local.paths import JOBS_DIR
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.groups import COMPUTE, CONTROLLER, LOGIN
from training_runtime.hardware import NodeHardware
from training_runtime.node import HYPERPOD_MARKER, HYPERPOD_SLURM
from training_runtime.node_names import slurm_name
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.paths import MUNGE_KEY, MUNGED_ARGV, MUNGED_PID_FILE, MUNGED_RUN_DIR
from training_runtime.render.slurm_conf import render_slurm_conf
from training_runtime.render.slurm_types import Partition, SlurmNode, SlurmSettings, Switch
from training_runtime.render.topology_conf import render_topology_conf, switches_from_layers

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
STAGING = "/run/hyperpod-agent"
"""Where :func:`prepare` unpacks its files on the node before installing them (a tmpfs: gone at boot)."""


def node_hostname(naming: str, node: LocalNode) -> str:
    """The node's host name and Slurm node name under ``naming`` (the runtime's one rule)."""
    return slurm_name(naming, node.name, node.ip)


def host_binds() -> tuple[str, ...]:
    """Host paths every node sees read-only at the same path: the example job scripts (package data) and the
    Python that runs this module with its virtual environment (torch for jobs: trixie's Python is 3.13, the
    pinned CPU torch is installed for this one; docs/local-cluster.md)."""
    # The environment at its real path too: a virtual environment reached through a link has scripts (torchrun)
    # whose first line names the interpreter by the real path.
    paths = [str(JOBS_DIR), sys.prefix, os.path.realpath(sys.prefix)]
    base = sys.base_prefix
    if base in ("/usr", "/"):  # a distribution's Python: its interpreter and standard library only
        paths += [os.path.realpath(sys.executable), sysconfig.get_paths()["stdlib"]]
    else:
        paths.append(base)
    unique: list[str] = []
    for path in paths:
        if path not in unique and not any(path.startswith(p.rstrip("/") + "/") for p in unique):
            unique.append(path)
    return tuple(unique)


def torchrun() -> str:
    """The torchrun that jobs on the local cluster run (the same path on the host and on every node)."""
    return str(Path(sys.prefix) / "bin" / "torchrun")


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
    topology), ``TopologyPlugin=topology/tree`` over :func:`topology_switches`."""
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


def topology_switches(layout: LocalLayout, naming: str) -> tuple[Switch, ...]:
    """The switch tree HyperPod's agent writes to ``topology.conf``: from each Slurm node's network layers
    (:func:`~hyperpod_local.layout.network_layers`, the instances' ``InstanceLabel``), by Slurm node name."""
    by_instance = network_layers(layout)
    return switches_from_layers({node_hostname(naming, layout.node(n)): path for n, path in by_instance.items()})


def topology_conf(layout: LocalLayout, naming: str) -> str:
    return render_topology_conf(
        topology_switches(layout, naming),
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


def conf_server(layout: LocalLayout) -> str:
    """``slurmd --conf-server``'s value: every controller's address, the primary first."""
    return ",".join(n.ip for n in layout.controllers)


def agent_script(
    role: str, mode: str, conf_servers: str, topology: bool = True, preconfigured_ami: bool = False
) -> str:
    """The shell script :func:`prepare` runs on a node (as root; its files are unpacked in STAGING).

    As on HyperPod (docs/node-runtime.md, "Configless compute and login nodes"), only the controller keeps
    slurm.conf; login and compute nodes run ``slurmd --conf-server`` and have no local copy (removed, like
    the ExecStartPre of HyperPod's slurmd unit does), so their commands read the file slurmd fetched.
    ``topology``: the controller gets ``topology.conf`` next to slurm.conf (slurmctld sends it to configless
    nodes with slurm.conf); without it, none (an AMI before automatic topology).
    ``preconfigured_ami``: the 2026 AMI's pieces are laid down first (:mod:`hyperpod_local.ami`)."""
    munged = " ".join(MUNGED_ARGV)
    run_dir, owner, run_mode = MUNGED_RUN_DIR
    lines = ["set -eu", f"s={STAGING}", *(ami.slurm_layout() if preconfigured_ami else [])]
    lines.append(f"install -d -m 0755 {HYPERPOD_MARKER} {SLURM_ETC}")
    if preconfigured_ami:
        lines += ami.image(SLURM_ETC)
        if mode != LIFECYCLE_DRIVEN:  # the AMI's own setup: no OnCreate script takes over
            lines += ami.setup(role, conf_servers.split(",")[0], SLURM_ETC)
    if role == CONTROLLER:
        lines += [
            f"install -m 0644 $s/slurm.conf {SLURM_ETC}/slurm.conf",
            f"install -m 0644 $s/{TOPOLOGY_CONF} {SLURM_ETC}/{TOPOLOGY_CONF}"
            if topology
            else f"rm -f {SLURM_ETC}/{TOPOLOGY_CONF}",
            # Slurm warns about an empty include: the file starts with a comment (accounting is added later).
            f"[ -e {SLURM_ETC}/{ACCOUNTING_CONF} ] || echo '# Accounting settings' >{SLURM_ETC}/{ACCOUNTING_CONF}",
        ]
    else:
        lines.append(f"rm -f {SLURM_ETC}/slurm.conf {SLURM_ETC}/{ACCOUNTING_CONF} {SLURM_ETC}/{TOPOLOGY_CONF}")
    lines += [
        "install -d -o munge -g munge -m 0700 /etc/munge",
        f"install -o munge -g munge -m 0400 $s/munge.key {MUNGE_KEY}",
        "install -d -o slurm -g slurm -m 0755 /var/log/slurm /var/spool/slurmctld",
        "install -d -m 0755 /var/spool/slurmd",
        'rm -rf "$s"',
        'running() { [ -s "$1" ] && [ "$(cat /proc/$(cat "$1")/comm 2>/dev/null)" = "$2" ]; }',
        f"install -d -o {owner} -g {owner} -m {run_mode:o} {run_dir}",
        f"running {MUNGED_PID_FILE} munged || {munged}",
    ]
    if preconfigured_ami and mode != LIFECYCLE_DRIVEN and role == CONTROLLER:
        lines += ami.accounting_daemons(SLURM_ETC)
    if mode != LIFECYCLE_DRIVEN:  # API-driven: HyperPod starts Slurm before OnInitComplete runs
        if role == CONTROLLER:
            lines.append(f"running /run/slurmctld.pid slurmctld || {HYPERPOD_SLURM.command('slurmctld', True)}")
        else:
            slurmd = f"{HYPERPOD_SLURM.command('slurmd', True)} --conf-server {conf_servers}"
            lines.append(f"running /run/slurmd.pid slurmd || {slurmd}")
    return "\n".join(lines) + "\n"


def prepare(cluster: ClusterHandle, node: LocalNode) -> None:
    """HyperPod's part on one booted node, before its lifecycle script: the marker, slurm.conf, munge
    (key and daemon), in the API-driven mode the node's Slurm daemon, and srun with ``--auto-resume``.
    Idempotent: running daemons are left alone, so a node prepared again keeps its PIDs."""
    topology = cluster.state.variant.automatic_topology
    naming = cluster.state.variant.naming
    files = {
        "slurm.conf": slurm_conf(cluster.layout, naming, topology=topology).encode(),
        "munge.key": munge_key(cluster.workdir),
    }
    if topology:
        files[TOPOLOGY_CONF] = topology_conf(cluster.layout, naming).encode()
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    unpack = f'rm -rf {STAGING} && install -d -m 0700 {STAGING} && tar -C {STAGING} -xf - && exec sh -c "$0"'
    script = agent_script(
        node.role,
        cluster.state.mode,
        conf_server(cluster.layout),
        topology,
        preconfigured_ami=cluster.state.variant.preconfigured_ami,
    )
    result = cluster.exec(node.name, ["/bin/sh", "-c", unpack, script], input=archive.getvalue())
    if result.returncode != 0:
        raise LocalClusterError(
            f"node {node.name}: the emulated HyperPod agent failed: {(result.stderr or result.stdout).strip()}"
        )
    agent.install(cluster, node.name)
