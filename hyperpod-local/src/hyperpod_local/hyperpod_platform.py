"""HyperPod's part of bringing up a node, played by the emulator on the emulated HyperPod platform.

On SageMaker HyperPod the instance's image and HyperPod's agent set up Slurm before the lifecycle script
runs; our runtime then takes its HyperPod-platform path (``/opt/sagemaker_cluster`` exists, HyperPod owns
``/opt/slurm/etc/slurm.conf``). The emulator does that part here, from AWS's documents (docs/local-cluster.md,
"The emulated HyperPod platform", names the source of each behaviour and what is not emulated):

* the node runs Debian trixie's Slurm 24.11 in HyperPod's layout (``/opt/slurm/{bin,sbin,etc}``) from the
  root file system ``build-node-rootfs.sh`` (package data) builds, not the host's packages;
* its host name and Slurm node name are HyperPod's ``ip-a-b-c-d``;
* :func:`prepare` writes the marker, the controller's ``slurm.conf`` from each group's ``SlurmConfig`` (node
  type, partition) with configless Slurm enabled, the cluster's munge key, starts munged and, in the
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
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

from hyperpod_local import agent, ami
from hyperpod_local.layout import LocalLayout, LocalNode
from hyperpod_local.overlay import EMULATION_SLURM_OPTIONS, host_hardware
from hyperpod_local.paths import JOBS_DIR, ROOTFS_SCRIPT
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.groups import COMPUTE, CONTROLLER, LOGIN
from training_runtime.hardware import NodeHardware
from training_runtime.node import GENERIC, HYPERPOD, HYPERPOD_MARKER, HYPERPOD_SLURM
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.paths import MUNGE_KEY, MUNGED_ARGV, MUNGED_PID_FILE, MUNGED_RUN_DIR
from training_runtime.render.slurm_conf import render_slurm_conf
from training_runtime.render.slurm_types import Partition, SlurmNode, SlurmSettings
from training_runtime.resources import hyperpod_hostname

PLATFORMS = (HYPERPOD, GENERIC)
"""``hyperpod``: trixie root, Slurm 24.11 under /opt/slurm, HyperPod's part emulated. ``generic``: the
host's root and Slurm, the runtime does everything (its generic platform)."""
API_PLATFORM = GENERIC
"""``LocalCluster.up``'s default: a caller names the platform it needs (tests do)."""
COMMAND_LINE_PLATFORM = HYPERPOD
"""``hyperpod-local up``'s default: what a person trying a config wants to see (docs/local-cluster.md)."""
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


def check_platform(platform: str) -> str:
    if platform not in PLATFORMS:
        raise LocalClusterError(f"platform: got {platform!r}; allowed: {', '.join(PLATFORMS)}")
    return platform


def node_hostname(platform: str, node: LocalNode) -> str:
    """The node's host name: HyperPod's ``ip-a-b-c-d`` on its platform, the instance name on the generic one."""
    return hyperpod_hostname(node.ip) if platform == HYPERPOD else node.name


def node_rootfs(build: bool = False) -> Path:
    """The trixie root file system of the current package list (built by the script when ``build``)."""
    argv = ["bash", str(ROOTFS_SCRIPT)] if build else ["bash", str(ROOTFS_SCRIPT), "--print-path"]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    lines = result.stdout.strip().splitlines()
    path = Path(lines[-1]) if result.returncode == 0 and lines else None
    if path is None or not (path / "etc" / "os-release").exists():
        why = f" ({result.stderr.strip()})" if result.stderr.strip() else ""
        raise LocalClusterError(
            f"the HyperPod platform's node root file system is not built{why}. Fix: sudo {ROOTFS_SCRIPT} "
            "(make setup runs it; about 25 s and 650 MB), or use platform 'generic'"
        )
    return path


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


def slurm_conf(layout: LocalLayout, cpus: int | None = None) -> str:
    """``/opt/slurm/etc/slurm.conf`` as HyperPod writes it from the groups' ``SlurmConfig``, rendered by the
    runtime's one slurm.conf writer (:func:`training_runtime.render.slurm_conf.render_slurm_conf`) with
    :data:`HYPERPOD_SETTINGS`: the first controller instance is SlurmctldHost (the others its backups), every
    compute and login instance a NodeName line by its ``ip-a-b-c-d`` name, every compute group's instances in
    the group's partition (the first one the default), the accounting keys in the included ``accounting.conf``,
    and the emulation's fast failure detection (:data:`~hyperpod_local.layout.EMULATION_SLURM_OPTIONS`)."""
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
        controller_name=hyperpod_hostname(primary.ip),
        controller_address=primary.ip,
        backup_controllers=tuple((hyperpod_hostname(n.ip), n.ip) for n in backups),
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
    nodes = [SlurmNode(hyperpod_hostname(n.ip), n.ip, hardware) for n in layout.nodes if n.role in (COMPUTE, LOGIN)]
    partitions: list[Partition] = []
    for group in layout.groups:
        members = tuple(hyperpod_hostname(n.ip) for n in layout.nodes if n.group == group.name)
        if group.role == COMPUTE and members:
            partitions.append(Partition(group.partition or group.name, members, default=not partitions))
    return render_slurm_conf(settings, nodes, partitions)


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


def agent_script(role: str, mode: str, conf_servers: str, preconfigured_ami: bool = False) -> str:
    """The shell script :func:`prepare` runs on a node (as root; its files are unpacked in STAGING).

    As on HyperPod (docs/node-runtime.md, "Configless compute and login nodes"), only the controller keeps
    slurm.conf; login and compute nodes run ``slurmd --conf-server`` and have no local copy (removed, like
    the ExecStartPre of HyperPod's slurmd unit does), so their commands read the file slurmd fetched.
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
            # Slurm warns about an empty include: the file starts with a comment (accounting is added later).
            f"[ -e {SLURM_ETC}/{ACCOUNTING_CONF} ] || echo '# Accounting settings' >{SLURM_ETC}/{ACCOUNTING_CONF}",
        ]
    else:
        lines.append(f"rm -f {SLURM_ETC}/slurm.conf {SLURM_ETC}/{ACCOUNTING_CONF}")
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
    files = {"slurm.conf": slurm_conf(cluster.layout).encode(), "munge.key": munge_key(cluster.workdir)}
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    unpack = f'rm -rf {STAGING} && install -d -m 0700 {STAGING} && tar -C {STAGING} -xf - && exec sh -c "$0"'
    script = agent_script(
        node.role, cluster.state.mode, conf_server(cluster.layout), preconfigured_ami=cluster.state.preconfigured_ami
    )
    result = cluster.exec(node.name, ["/bin/sh", "-c", unpack, script], input=archive.getvalue())
    if result.returncode != 0:
        raise LocalClusterError(
            f"node {node.name}: the emulated HyperPod agent failed: {(result.stderr or result.stdout).strip()}"
        )
    agent.install(cluster, node.name)
