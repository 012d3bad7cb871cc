"""The control plane's backend on a running local cluster: its instances are the cluster's namespace nodes.

A launch adds a node to the layout and publishes the membership (:mod:`hyperpod_local.membership`), boots it with
HyperPod's part and runs its lifecycle script; termination powers it off, drops its disk and publishes again;
reboot and replace are the cluster's own (:meth:`~hyperpod_local.cluster.LocalCluster.reboot`, ``replace``); a
re-image (UpdateClusterSoftware) is the cluster's ``replace`` too: the node's root overlay is dropped and the lifecycle
script runs again on the same name and address, while /fsx (the shared directory) and what lives on it stay.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from hyperpod_local import agent, membership
from hyperpod_local.control_plane.fleet import LaunchError
from hyperpod_local.control_plane.model import Group, Instance
from hyperpod_local.layout import LOCAL_REGION, LocalLayout, LocalNode, instance_id
from hyperpod_local.state import ClusterHandle, LocalClusterError, change_layout
from training_runtime.node_names import private_dns_name


class PoweredCluster(ClusterHandle, Protocol):
    """What the backend does to a running cluster besides :class:`ClusterHandle`: power a node off and on
    (:class:`hyperpod_local.cluster.LocalCluster` is one)."""

    def crash(self, name: str) -> None: ...

    def boot(self, name: str, *, bootstrap: bool = False) -> tuple[int, str] | None: ...


ClusterOpener = Callable[[Path], PoweredCluster]
"""Opens the running cluster of a work directory (``LocalCluster.open``): injected, so this backend does not import
the engine that starts the control plane."""


class LocalClusterBackend:
    """Instances are the cluster's namespace nodes: a launch adds one to the layout, publishes the membership
    (:mod:`hyperpod_local.membership`), boots it with HyperPod's part and runs its lifecycle script; termination
    powers it off, drops its disk and publishes again; reboot and replace are the cluster's own."""

    def __init__(self, workdir: Path, open_cluster: ClusterOpener) -> None:
        self.workdir = workdir
        self.open_cluster = open_cluster
        self.lock = threading.Lock()
        """One membership change at a time (slurm.conf is rewritten whole)."""

    def _open(self) -> PoweredCluster:
        return self.open_cluster(self.workdir)

    def allocate(self, group: Group) -> Instance:
        made: list[LocalNode] = []

        def grow(layout: LocalLayout) -> LocalLayout:
            updated, node = membership.grown(layout, group.name)
            made.append(node)
            return updated

        try:
            layout = change_layout(self.workdir, grow)
        except ValueError as error:  # LayoutError
            raise LaunchError(str(error)) from None
        return instance_of(layout.cluster_name, made[0])

    def boot(self, group: Group, instance: Instance) -> None:
        with self.lock, _agent_paused(self._open()):
            cluster = self._open()
            try:
                membership.publish(cluster)
                code, output = cluster.boot(instance.name, bootstrap=True) or (0, "")
            except LocalClusterError as error:
                raise LaunchError(str(error)) from None
        if code != 0:
            lines = [line for line in output.splitlines() if line.strip()]
            raise LaunchError(f"the lifecycle script failed (exit {code}): {lines[-1] if lines else ''}")

    def terminate(self, instance: Instance) -> None:
        with self.lock, _agent_paused(self._open()):
            cluster = self._open()
            if any(n.name == instance.name for n in cluster.layout.nodes):
                cluster.crash(instance.name)
                node_dir = cluster.namespaces.node_dir(instance.name)
                for disk in ("upper", "work"):
                    subprocess.run(["rm", "-rf", str(node_dir / disk)], check=False)
                change_layout(self.workdir, lambda layout: membership.shrunk(layout, instance.name))
            membership.publish(self._open())

    def reboot(self, instance: Instance) -> None:
        with self.lock, _agent_paused(self._open()):
            try:
                self._open().reboot(instance.name)
            except LocalClusterError as error:
                raise LaunchError(str(error)) from None

    def replace(self, instance: Instance) -> None:
        with self.lock, _agent_paused(self._open()):
            try:
                code, _ = self._open().replace(instance.name)
            except LocalClusterError as error:
                raise LaunchError(str(error)) from None
        if code != 0:
            raise LaunchError(f"the lifecycle script failed on the new instance (exit {code})")

    def reimage(self, instance: Instance) -> None:
        """UpdateClusterSoftware's re-image of the root volume: on the emulator the root overlay is reset and the
        lifecycle script runs again (the cluster's ``replace``: same name, address and instance id)."""
        with self.lock, _agent_paused(self._open()):
            try:
                code, _ = self._open().replace(instance.name)
            except LocalClusterError as error:
                raise LaunchError(str(error)) from None
        if code != 0:
            raise LaunchError(f"the lifecycle script failed on the re-imaged instance (exit {code})")


@contextlib.contextmanager
def _agent_paused(cluster: ClusterHandle) -> Iterator[None]:
    """The emulated HyperPod agent stopped while the control plane powers a node off or on (else it would see the
    node fail and replace it too), then started again: it watches the nodes it finds when it starts."""
    running = agent.enabled(cluster)
    if running:
        agent.stop(cluster)
    try:
        yield
    finally:
        if running:
            agent.start(cluster)


def instance_of(cluster_name: str, node: LocalNode) -> Instance:
    dns = private_dns_name(node.ip, LOCAL_REGION)
    return Instance(instance_id(cluster_name, node.name), node.ip, dns, node.name)
