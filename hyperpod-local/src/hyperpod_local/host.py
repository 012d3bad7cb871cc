"""This machine as the local cluster's host: the tools it needs, and cleaning up after earlier runs."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hyperpod_local.state import DEFAULT_WORKDIR, OWN_ENTRIES, LocalClusterError
from training_runtime.files import mount_points


def restore_host(had_run_netns: bool, had_run_mount: bool) -> None:
    """Remove the /run/netns and /run/mount that ``ip netns`` and libmount created on the host (P14), when
    they did not exist before and no other cluster uses them."""
    netns_dir = Path("/run/netns")
    if not had_run_netns and netns_dir.is_dir() and not any(netns_dir.iterdir()):
        # ip netns makes /run/netns a (shared) mount point, sometimes more than once.
        for _ in range(10):
            if str(netns_dir) not in mount_points(Path("/")):  # ismount misses a bind onto itself
                break
            subprocess.run(["umount", "-n", str(netns_dir)], capture_output=True, timeout=30, check=False)
        with contextlib.suppress(OSError):
            netns_dir.rmdir()
    mount_dir = Path("/run/mount")
    if not had_run_mount and mount_dir.is_dir():
        with contextlib.suppress(OSError):
            mount_dir.rmdir()


def check_tools() -> None:
    missing = [tool for tool in ("unshare", "nsenter", "ip", "mount", "tar") if shutil.which(tool) is None]
    if missing:
        raise LocalClusterError(f"missing commands: {', '.join(missing)}. Fix: apt-get install util-linux iproute2")
    probe = subprocess.run(["unshare", "--net", "--time", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise LocalClusterError(
            f"cannot create network and time namespaces here ({probe.stderr.strip()}); the local cluster needs "
            "root with CAP_SYS_ADMIN and CAP_NET_ADMIN and a kernel with time namespaces (5.6+)"
        )


def check_workdir(directory: Path) -> None:
    resolved = directory.resolve()
    if resolved == Path("/run") or Path("/run") in resolved.parents:
        raise LocalClusterError(
            f"work directory {directory} is under /run, which every node replaces with its own tmpfs. "
            f"Fix: use a directory on disk, e.g. {DEFAULT_WORKDIR}"
        )


def check_prefix(prefix: str) -> None:
    if not prefix or len(prefix) > 32 or not all(c.isalnum() or c in "-_" for c in prefix):
        raise LocalClusterError(f"prefix: got {prefix!r}; use 1-32 letters, digits, '-' or '_'")


def check_prefix_free(directory: Path, prefix: str, netns: Sequence[str], open_cluster: Callable[[Path], Any]) -> None:
    """Refuse a prefix whose switch namespace exists (among ``netns``), unless the cluster recorded in ``directory``
    has it (``up`` then reports that one as running)."""
    if f"{prefix}-sw" not in netns:
        return
    try:
        if open_cluster(directory).state.prefix == prefix:
            return
    except LocalClusterError:
        pass
    raise LocalClusterError(
        f"another local cluster uses the prefix {prefix!r} (netns {prefix}-sw exists). Fix: pass a "
        "different --prefix, or take that cluster down with `hyperpod-local down --workdir ...`"
    )


def clear_previous(directory: Path, open_cluster: Callable[[Path], Any]) -> None:
    """Refuse to replace a running cluster; remove what a cluster taken down with --keep left.
    ``open_cluster`` opens the cluster a work directory records (``LocalCluster.open``)."""
    state_path = directory / "state.json"
    if state_path.exists():
        try:
            previous = open_cluster(directory)
        except LocalClusterError:
            previous = None
        if previous is not None and any(previous.namespaces.alive(n.name) for n in previous.nodes):
            raise LocalClusterError(
                f"a local cluster is already running in {directory}. Fix: `hyperpod-local down --workdir "
                f"{directory}` first, or use another --workdir"
            )
        if previous is not None:
            previous._destroy()
    remove_entries(directory, [e for e in OWN_ENTRIES if e != ".lock"])


def remove_entries(directory: Path, entries: Sequence[str] = OWN_ENTRIES) -> None:
    """Delete ``entries`` of ``directory`` (by default all a cluster creates there), directories with their content."""
    for entry in entries:
        path = directory / entry
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
