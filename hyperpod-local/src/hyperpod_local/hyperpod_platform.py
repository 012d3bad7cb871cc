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
  automatic topology (the variant's ``automatic_topology``), ``topology.conf``; the cluster's munge key
  (the files are rendered by :mod:`hyperpod_local.hyperpod_files`, pure), starts munged and, in the API-driven
  mode, slurmctld or (on login and compute nodes, from the controller's configuration) slurmd,
  and installs srun with ``--auto-resume`` (:mod:`hyperpod_local.agent`; ``LocalCluster.up`` starts the
  emulated HyperPod agent that answers it).

The generic platform (the host's own root and Slurm, the runtime renders slurm.conf) stays available.
Stdlib only: the emulator does not need aws_cdk.
"""

from __future__ import annotations

import io
import os
import sys
import sysconfig
import tarfile
from pathlib import Path

from hyperpod_local import agent, ami
from hyperpod_local.hyperpod_files import (
    ACCOUNTING_CONF,
    SLURM_ETC,
    TOPOLOGY_CONF,
    munge_key,
    slurm_conf,
    topology_conf,
)
from hyperpod_local.layout import LocalLayout, LocalNode
from hyperpod_local.paths import JOBS_DIR
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.groups import CONTROLLER
from training_runtime.hyperpod_facts import SLURM_LOG_DIR, SLURMCTLD_PID_FILE, SLURMD_PID_FILE, SLURMD_SPOOL_DIR
from training_runtime.node import HYPERPOD_MARKER, HYPERPOD_SLURM
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.paths import MUNGE_KEY, MUNGED_ARGV, MUNGED_PID_FILE, MUNGED_RUN_DIR, SLURMCTLD_STATE_DIR

STAGING = "/run/hyperpod-agent"
"""Where :func:`prepare` unpacks its files on the node before installing them (a tmpfs: gone at boot)."""


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
        f"install -d -o slurm -g slurm -m 0755 {SLURM_LOG_DIR} {SLURMCTLD_STATE_DIR}",
        f"install -d -m 0755 {SLURMD_SPOOL_DIR}",
        'rm -rf "$s"',
        'running() { [ -s "$1" ] && [ "$(cat /proc/$(cat "$1")/comm 2>/dev/null)" = "$2" ]; }',
        f"install -d -o {owner} -g {owner} -m {run_mode:o} {run_dir}",
        f"running {MUNGED_PID_FILE} munged || {munged}",
    ]
    if preconfigured_ami and mode != LIFECYCLE_DRIVEN and role == CONTROLLER:
        lines += ami.accounting_daemons(SLURM_ETC)
    if mode != LIFECYCLE_DRIVEN:  # API-driven: HyperPod starts Slurm before OnInitComplete runs
        if role == CONTROLLER:
            lines.append(f"running {SLURMCTLD_PID_FILE} slurmctld || {HYPERPOD_SLURM.command('slurmctld', True)}")
        else:
            slurmd = f"{HYPERPOD_SLURM.command('slurmd', True)} --conf-server {conf_servers}"
            lines.append(f"running {SLURMD_PID_FILE} slurmd || {slurmd}")
    return "\n".join(lines) + "\n"


def prepare(cluster: ClusterHandle, node: LocalNode) -> None:
    """HyperPod's part on one booted node, before its lifecycle script: the marker, slurm.conf, munge
    (key and daemon), in the API-driven mode the node's Slurm daemon, and srun with ``--auto-resume``.
    Idempotent: running daemons are left alone, so a node prepared again keeps its PIDs."""
    naming = cluster.state.variant.naming
    files = {
        "slurm.conf": slurm_conf(cluster.layout, naming, topology=cluster.state.variant.automatic_topology).encode(),
        "munge.key": munge_key(cluster.workdir),
    }
    tree = topology_conf(cluster.layout, naming) if cluster.state.variant.automatic_topology else None
    topology = tree is not None
    if tree is not None:
        files[TOPOLOGY_CONF] = tree.encode()
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
