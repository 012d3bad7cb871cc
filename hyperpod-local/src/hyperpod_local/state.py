"""The local cluster's store: ``<workdir>/state.json`` (:func:`read_state`, :func:`write_state`,
:func:`change_layout`) and the lock that serializes commands on it.

The engine (:mod:`hyperpod_local.cluster`), the agent, membership changes and the control plane's node backend
read the cluster here; none of them imports the engine (``tests/test_import_cycles.py``)."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hyperpod_local.layout import LocalLayout
from hyperpod_local.variant import Variant, VariantError

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
    variant: Variant
    """Which HyperPod the cluster plays (:mod:`hyperpod_local.variant`)."""
    rootfs: str | None = None
    """The nodes' root file system (the overlay's lower layer, with the variant's Slurm); None: the host's ``/``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "config_path": self.config_path,
            "mode": self.mode,
            "fsx_mount_path": self.fsx_mount_path,
            "prefix": self.prefix,
            "layout": self.layout.to_json(),
            "bootstrap": self.bootstrap,
            "variant": self.variant.to_json(),
            "rootfs": self.rootfs,
            "host": {"run_netns_existed": self.host_had_run_netns, "run_mount_existed": self.host_had_run_mount},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterState:
        if data.get("version") != STATE_VERSION:
            raise LocalClusterError(f"state file version {data.get('version')!r} is not {STATE_VERSION}")
        try:  # a state file from before the variant value has its fields at the top
            variant = Variant.from_json(dict(data.get("variant") or data))
        except VariantError as error:
            raise LocalClusterError(f"state file: {error}") from None
        return cls(
            config_path=str(data["config_path"]),
            mode=str(data["mode"]),
            fsx_mount_path=str(data["fsx_mount_path"]),
            prefix=str(data["prefix"]),
            layout=LocalLayout.from_json(data["layout"]),
            bootstrap=bool(data["bootstrap"]),
            host_had_run_netns=bool(data["host"]["run_netns_existed"]),
            host_had_run_mount=bool(data["host"]["run_mount_existed"]),
            variant=variant,
            rootfs=None if data.get("rootfs") is None else str(data["rootfs"]),
        )


# --- the store: what the engine, the agent, membership and the control plane read and change -----------------
def read_state(workdir: Path) -> ClusterState:
    """The state of the cluster in ``workdir``; a :class:`LocalClusterError` saying what to do when there is none."""
    path = workdir / "state.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise LocalClusterError(
            f"no local cluster in {workdir} (no state.json). Fix: `hyperpod-local up --config FILE` "
            f"or pass the --workdir the cluster was created with"
        ) from None
    except ValueError as error:
        raise LocalClusterError(f"{path}: not valid JSON ({error}); remove the work directory") from None
    return ClusterState.from_json(data)


def write_state(workdir: Path, state: ClusterState) -> None:
    """``state`` as ``workdir``'s state file, replaced whole (a reader never sees half of it)."""
    path = workdir / "state.json"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    temporary.replace(path)


def change_layout(workdir: Path, change: Callable[[LocalLayout], LocalLayout]) -> LocalLayout:
    """Apply ``change`` (a function of the current layout returning the new one) to the state file under the
    work directory's lock; returns the new layout. Nodes join and leave this way while the cluster runs."""
    with locked(workdir):
        state = read_state(workdir)
        updated = change(state.layout)
        write_state(workdir, dataclasses.replace(state, layout=updated))
        return updated


def current_state(workdir: Path, known: ClusterState) -> ClusterState:
    """The state file's state now (nodes may have joined or left since ``known`` was read: the emulated control
    plane changes the layout while the cluster runs), or ``known`` when the file is gone or unreadable."""
    try:
        return read_state(workdir)
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
