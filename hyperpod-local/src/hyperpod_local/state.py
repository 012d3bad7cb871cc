"""The local cluster's memory: ``<workdir>/state.json`` and the lock that serializes commands on it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hyperpod_local.layout import (
    LocalLayout,
)
from training_runtime.node import GENERIC, HYPERPOD
from training_runtime.node_names import INSTANCE_NAMES, IP_NAMES

if TYPE_CHECKING:
    import subprocess

    from hyperpod_local.namespaces import Namespaces

STATE_VERSION = 1


DEFAULT_WORKDIR = "/var/tmp/hyperpod-local"
WORKDIR_ENV = "HYPERPOD_LOCAL_DIR"
OLD_WORKDIR_ENV = "HYPERPOD_CDK_LOCAL_DIR"
"""The variable's name before the emulator had a command of its own; still read when the new one is unset."""
OLD_DEFAULT_WORKDIR = "/var/tmp/hyperpod-cdk-local"
"""The default work directory before the rename: used while a cluster created there still has its state."""


OWN_ENTRIES = ("state.json", ".lock", "bucket", "cluster", "shared", "nodes", "logs", "prometheus")


"""What a cluster creates in its work directory (``down`` removes exactly these)."""


class LocalClusterError(RuntimeError):
    """The local cluster cannot do what was asked; the message says why and what to do."""


def default_workdir() -> Path:
    """``$HYPERPOD_LOCAL_DIR`` (else the old ``$HYPERPOD_CDK_LOCAL_DIR``), else :data:`DEFAULT_WORKDIR`, unless a
    cluster created before the rename still lives in :data:`OLD_DEFAULT_WORKDIR`."""
    chosen = os.environ.get(WORKDIR_ENV) or os.environ.get(OLD_WORKDIR_ENV)
    if chosen:
        return Path(chosen)
    if (Path(OLD_DEFAULT_WORKDIR) / "state.json").exists():
        return Path(OLD_DEFAULT_WORKDIR)
    return Path(DEFAULT_WORKDIR)


@dataclass(frozen=True)
class ClusterState:
    """What ``<workdir>/state.json`` remembers."""

    config_path: str
    mode: str
    fsx_mount_path: str
    prefix: str
    layout: LocalLayout
    bootstrap: bool
    """Whether ``up`` ran the lifecycle scripts (``boot`` re-runs them only then)."""
    host_had_run_netns: bool
    host_had_run_mount: bool
    platform: str = GENERIC
    """``hyperpod`` (emulated HyperPod platform) or ``generic`` (:mod:`hyperpod_local.hyperpod_platform`)."""
    rootfs: str | None = None
    """The nodes' root file system (the overlay's lower layer); None: the host's ``/``."""
    naming: str = INSTANCE_NAMES
    """Slurm node names (and host names): ``ip`` or ``instance`` (:mod:`training_runtime.node_names`)."""
    stale_worker_copies: bool = False
    """Non-controller nodes get a stale resource_config.json (:func:`hyperpod_local.layout.stale_instances`)."""
    automatic_topology: bool = True
    """HyperPod platform: HyperPod's automatic Slurm topology (``topology.conf``, ``TopologyPlugin=topology/tree``;
    AMIs since 2026-04). False: none, as on an older AMI."""
    slurm: str | None = None
    """The Slurm major of that root file system (:data:`hyperpod_local.rootfs.SLURM_SUITES`); None: the host's."""
    preconfigured_ami: bool = False
    """HyperPod platform: the 2026 AMI's preconfigured pieces are laid down on every node (:mod:`hyperpod_local.ami`);
    False: an older AMI without them."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "config_path": self.config_path,
            "mode": self.mode,
            "fsx_mount_path": self.fsx_mount_path,
            "prefix": self.prefix,
            "layout": self.layout.to_json(),
            "bootstrap": self.bootstrap,
            "platform": self.platform,
            "rootfs": self.rootfs,
            "naming": self.naming,
            "stale_worker_copies": self.stale_worker_copies,
            "automatic_topology": self.automatic_topology,
            "slurm": self.slurm,
            "preconfigured_ami": self.preconfigured_ami,
            "host": {"run_netns_existed": self.host_had_run_netns, "run_mount_existed": self.host_had_run_mount},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterState:
        if data.get("version") != STATE_VERSION:
            raise LocalClusterError(f"state file version {data.get('version')!r} is not {STATE_VERSION}")
        return cls(
            config_path=str(data["config_path"]),
            mode=str(data["mode"]),
            fsx_mount_path=str(data["fsx_mount_path"]),
            prefix=str(data["prefix"]),
            layout=LocalLayout.from_json(data["layout"]),
            bootstrap=bool(data["bootstrap"]),
            host_had_run_netns=bool(data["host"]["run_netns_existed"]),
            host_had_run_mount=bool(data["host"]["run_mount_existed"]),
            platform=str(data.get("platform", GENERIC)),
            rootfs=None if data.get("rootfs") is None else str(data["rootfs"]),
            # A state file from before the switch: the names each platform always had.
            naming=str(data.get("naming") or (IP_NAMES if data.get("platform") == HYPERPOD else INSTANCE_NAMES)),
            stale_worker_copies=bool(data.get("stale_worker_copies", False)),
            automatic_topology=bool(data.get("automatic_topology", True)),
            slurm=None if data.get("slurm") is None else str(data["slurm"]),
            preconfigured_ami=bool(data.get("preconfigured_ami", False)),
        )


def current_state(workdir: Path, known: ClusterState) -> ClusterState:
    """The state file's state now (nodes may have joined or left since ``known`` was read: the emulated control
    plane changes the layout while the cluster runs), or ``known`` when the file is gone or unreadable."""
    try:
        return ClusterState.from_json(json.loads((workdir / "state.json").read_text()))
    except (OSError, ValueError, KeyError, LocalClusterError):
        return known


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """One changing command at a time per work directory."""
    with (directory / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class ClusterHandle(Protocol):
    """What the emulator's helpers (the agent, the HyperPod platform's part, metrics, readiness, the status
    report) use of a cluster: :class:`hyperpod_local.cluster.LocalCluster` is one; tests pass small fakes."""

    workdir: Path
    state: ClusterState
    namespaces: Namespaces

    @property
    def layout(self) -> LocalLayout: ...

    def exec(
        self, name: str, argv: Sequence[str], *, input: str | bytes | None = None, timeout: float | None = ...
    ) -> subprocess.CompletedProcess[str]: ...

    def slurm_name(self, name: str) -> str: ...

    def replace(self, name: str) -> tuple[int, str]: ...

    def reboot(self, name: str) -> None: ...
