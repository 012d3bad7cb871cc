"""Shared storage: the FSx for Lustre mount (lifecycle-driven mode) and the runtime's directory on it."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from typing import List, Optional

from training_runtime.apt import apt_install
from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, is_mountpoint, read_text, with_block, write_file
from training_runtime.node import Node
from training_runtime.params import API_DRIVEN
from training_runtime.paths import CLUSTERS_DIR, OWNER_FILE, RUNTIME_DIR_ON_SHARED
from training_runtime.probe import PROBE_TIMEOUT_S, probe_argv
from training_runtime.retry import NotReady
from training_runtime.run import CommandError
from training_runtime.steps import Step

LUSTRE_OPTIONS = "defaults,noatime,flock,_netdev,x-systemd.automount,x-systemd.requires=network-online.target"
LUSTRE_CLIENT_PACKAGE = "lustre-client-modules-aws"


FSTAB_FIELD = re.compile(r"[A-Za-z0-9._-]+")
"""The file system's DNS name and mount name as they go into the fstab line (``fs-0123….fsx.us-west-2.amazonaws.com``,
``abcdefgh``): nothing that splits the line (space, newline) or comments it out (``#``)."""


def fstab_line(dns_name: str, mount_name: str, mount_path: str) -> str:
    """The Lustre line of /etc/fstab; StepFailed when a field would split the line (the mount path is checked
    with the parameters file: :mod:`training_runtime.mount_paths`)."""
    for key, value in (("fsx_dns_name", dns_name), ("fsx_mountname", mount_name)):
        if not FSTAB_FIELD.fullmatch(value):
            raise StepFailed(
                "{}: got {!r}; expected letters, digits and '._-' only (a field of /etc/fstab). Fix: give the "
                "file system's own DNS and mount names".format(key, value)
            )
    return "{}@tcp:/{} {} lustre {} 0 0".format(dns_name, mount_name, mount_path, LUSTRE_OPTIONS)


class LustreMount(Step):
    """Mounts FSx for Lustre at the configured path, with an fstab entry so it comes back after a reboot."""

    name = "fsx-mount"

    def _line(self, node: Node) -> str:
        params = node.params
        assert params.fsx_dns_name and params.fsx_mountname
        return fstab_line(params.fsx_dns_name, params.fsx_mountname, params.fsx_mount_path)

    def _fstab(self, node: Node) -> str:
        return with_block(read_text(node, "/etc/fstab") or "", "fsx", self._line(node))

    def _client_missing(self, node: Node) -> bool:
        return node.which("mount.lustre") is None

    def needed(self, node: Node) -> bool:
        return (
            self._client_missing(node)
            or read_text(node, "/etc/fstab") != self._fstab(node)
            or not is_mountpoint(node, node.params.fsx_mount_path)
        )

    def apply(self, node: Node) -> None:
        path = node.params.fsx_mount_path
        if self._client_missing(node):
            apt_install(node, [LUSTRE_CLIENT_PACKAGE])
        write_file(node, "/etc/fstab", self._fstab(node), mode=0o644)
        node.path(path).mkdir(parents=True, exist_ok=True)
        if not is_mountpoint(node, path):
            node.retry.call(
                lambda: node.run(["mount", path], timeout=120), what="mount " + path, retry_on=(CommandError,)
            )

    def describe(self, node: Node) -> List[str]:
        actions = []
        if self._client_missing(node):
            actions.append("apt-get install " + LUSTRE_CLIENT_PACKAGE)
        actions.append("fstab: " + self._line(node))
        actions.append("mount " + node.params.fsx_mount_path)
        return actions


def owner_file(node: Node) -> str:
    """The file naming the cluster whose state the runtime's directory on shared storage holds."""
    return "{}/{}".format(node.shared_dir, OWNER_FILE)


def owner_problem(node: Node) -> Optional[str]:
    """Why this node must not use the runtime's directory on shared storage: it is marked as another cluster's.
    None when it is this cluster's, or not marked yet (:func:`claim` marks it)."""
    text = read_text(node, owner_file(node))
    if text is None or text.strip() == node.cluster_identity:
        return None
    return (
        "{} holds the runtime state of cluster {!r} ({} says so), not of this cluster {!r}: two clusters use this "
        "file system, and sharing its state would share the munge key, the PyTorch environments and the users' "
        "homes. Fix: set storage.existing.shared: true in this cluster's config (its state then lives in "
        "{}/{}/{}/{} and its homes in {}/.{}/{}), or give this cluster a file system of its own; to hand the state "
        "to this cluster (a cluster re-created under a new name), an admin writes its name into {}".format(
            node.shared_dir,
            text.strip()[:64],
            owner_file(node),
            node.cluster_identity,
            node.params.fsx_mount_path.rstrip("/"),
            RUNTIME_DIR_ON_SHARED,
            CLUSTERS_DIR,
            node.cluster_identity,
            node.params.homes_dir.rstrip("/"),
            CLUSTERS_DIR,
            node.cluster_identity,
            owner_file(node),
        )
    )


def claim(node: Node) -> None:
    """Mark the runtime's directory on shared storage as this cluster's, unless it is marked. The mark is linked
    into place (a link never replaces a name), so of two clusters bootstrapping at once only one claims it; state
    written before there was a mark (an earlier release) is this cluster's, the first to run this release."""
    target = node.path(owner_file(node))
    if os.path.lexists(str(target)):
        return
    fd, temporary = tempfile.mkstemp(dir=str(target.parent), prefix="." + OWNER_FILE + ".")
    try:
        os.fchmod(fd, 0o644)
        os.write(fd, (node.cluster_identity + "\n").encode())
        os.fsync(fd)
        os.close(fd)
        with contextlib.suppress(FileExistsError):  # another node marked it first: owner_problem decides
            os.link(temporary, str(target))
    finally:
        os.unlink(temporary)


class SharedStorage(Step):
    """The shared file system is mounted and writable, and holds the runtime's cluster-wide directory, marked
    with the cluster's name (:func:`claim`); a directory marked by another cluster is refused.

    In API-driven mode HyperPod mounts FSx itself before our script runs; this step only waits for that
    mount and never touches it.
    """

    name = "shared-storage"

    def _probe_problem(self, node: Node) -> Optional[str]:
        path = node.params.fsx_mount_path
        if node.params.has_fsx and not is_mountpoint(node, path):
            return "{} is not mounted".format(path)
        if not node.path(path).is_dir():
            return "{} does not exist".format(path)
        directory = "{}/{}/probe".format(path.rstrip("/"), RUNTIME_DIR_ON_SHARED)
        try:
            result = node.run(probe_argv(directory, node.hostname), timeout=PROBE_TIMEOUT_S, check=False)
        except CommandError as error:
            if error.returncode is None:
                return "a write to {} did not finish within {:.0f} s (a hung mount?)".format(path, PROBE_TIMEOUT_S)
            raise
        if not result.ok:
            lines = (result.stdout + "\n" + result.stderr).strip().splitlines()
            return "{} is not writable: {}".format(path, lines[-1] if lines else "exit {}".format(result.returncode))
        return None

    def needed(self, node: Node) -> bool:
        shared = node.path(node.shared_dir)
        if not shared.is_dir() or (shared.stat().st_mode & 0o7777) != 0o755:
            return True
        return read_text(node, owner_file(node)) is None or owner_problem(node) is not None

    def apply(self, node: Node) -> None:
        def ready() -> None:
            problem = self._probe_problem(node)
            if problem:
                raise NotReady(problem)

        try:
            node.retry.call(ready, what="shared storage at " + node.params.fsx_mount_path)
        except NotReady as error:
            hint = (
                "HyperPod mounts FSx before OnInitComplete; check the cluster's InstanceStorageConfigs"
                if node.params.mode == API_DRIVEN
                else "check the fsx-mount step's log and the file system's security group"
            )
            raise StepFailed("shared storage is not usable: {}. {}".format(error, hint)) from None
        ensure_dir(node, node.shared_dir, mode=0o755)
        claim(node)
        problem = owner_problem(node)
        if problem:
            raise StepFailed(problem)

    def describe(self, node: Node) -> List[str]:
        return [
            "check {} is writable; create {} (marked as cluster {})".format(
                node.params.fsx_mount_path, node.shared_dir, node.cluster_identity
            )
        ]
