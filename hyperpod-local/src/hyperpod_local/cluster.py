"""LocalCluster: a HyperPod Slurm cluster emulated on this machine, driven like HyperPod drives one.

``up`` = :func:`~hyperpod_local.plan.plan` (the prefix the constructs upload, the nodes; no host change) +
``_create`` (the prefix staged in ``<workdir>/bucket``, one namespace node per instance, HyperPod's part as the
:class:`~hyperpod_local.variant.Variant` plays it) + ``_converge`` (the entry script on every node, idle compute
nodes). The state file (:mod:`hyperpod_local.state`) remembers the cluster, so later commands need only the work
directory. What HyperPod does to one instance (crash, boot, replace, its script) is :mod:`hyperpod_local.power`.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hyperpod_local import agent, hyperpod_files, hyperpod_platform, power, rootfs
from hyperpod_local import metrics as metrics_server
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.host import check_prefix_free, check_tools, clear_previous, remove_entries, restore_host
from hyperpod_local.layout import LocalLayout, LocalNode
from hyperpod_local.namespaces import DEFAULT_EXEC_TIMEOUT_S, NamespaceError, Namespaces, list_netns, require_root
from hyperpod_local.plan import DEFAULT_IDLE_TIMEOUT_S, Plan, UpOptions, plan
from hyperpod_local.power import DEFAULT_BOOTSTRAP_TIMEOUT_S
from hyperpod_local.readiness import check_health, sinfo, wait_idle
from hyperpod_local.report import status_report
from hyperpod_local.staging import provision, restage, stage
from hyperpod_local.state import (
    ClusterState,
    LocalClusterError,
    current_state,
    default_workdir,
    locked,
    read_state,
    write_state,
)
from hyperpod_local.variant import Variant


class LocalCluster:
    """One local cluster, found by its work directory. Create it with :meth:`up`, reopen it with :meth:`open`."""

    def __init__(self, workdir: Path, state: ClusterState) -> None:
        self.workdir = workdir
        self.state = state
        self.namespaces = Namespaces(
            workdir,
            shared_dir=workdir / "shared",
            fsx_mount_path=state.fsx_mount_path,
            hosts_file=workdir / "cluster" / "hosts",
            subnet=state.layout.subnet,
            prefix=state.prefix,
            lower=Path(state.rootfs) if state.rootfs else None,
            binds=hyperpod_platform.host_binds() if state.rootfs else (),
        )

    # --- creation ---------------------------------------------------------------------------
    @classmethod
    def open(cls, workdir: Path | str | None = None) -> LocalCluster:
        """The cluster whose state is in ``workdir`` (default: :func:`default_workdir`)."""
        directory = Path(workdir) if workdir is not None else default_workdir()
        return cls(directory, read_state(directory))

    @classmethod
    def up(
        cls,
        config_path: Path | str | None = None,
        workdir: Path | str | None = None,
        variant: Variant | None = None,
        options: UpOptions | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> LocalCluster:
        """Create the cluster of ``config_path`` (None: the default configuration; or ``options.assembly``) in
        ``workdir`` as ``variant`` plays HyperPod (None: ``Variant()``, HyperPod's platform) and, unless
        ``options.bootstrap`` is False, run the lifecycle scripts on every node and wait until ``sinfo`` shows
        every compute node idle (failing at once when the health checks drain one). ``progress`` gets a line per
        step. A bootstrap failure leaves the nodes running for inspection and raises :class:`LocalClusterError`
        naming each failed node and the last line of its output."""
        say = progress or (lambda _message: None)
        started = time.monotonic()
        require_root()
        check_tools()
        decided = plan(config_path, workdir, variant or Variant(), options or UpOptions())
        rest_api = decided.inputs.deployed.rest_api is not None
        if rest_api and not decided.variant.hyperpod:
            raise LocalClusterError(
                "rest_api: the local cluster runs Slurm's REST API on the HyperPod platform only (its emulated "
                "control plane serves the key's secret and the instance role's credentials). Fix: drop --platform "
                "generic, or rest_api from the config"
            )
        cluster = cls._create(decided, say)
        if rest_api:  # the controller reads the key at bootstrap: the stack's secret exists before the nodes boot
            try:
                say(f"control plane (the REST API's key): {control_plane.start(cluster)}")
            except BaseException:
                cluster.down()
                raise
        if decided.options.bootstrap:
            cluster._converge(decided.options.bootstrap_timeout, decided.options.idle_timeout, say)
        name, directory = decided.layout.cluster_name, decided.directory
        say(f"cluster {name} up in {time.monotonic() - started:.2f} s (work directory {directory})")
        return cluster

    @classmethod
    def _create(cls, decided: Plan, say: Callable[[str], None]) -> LocalCluster:
        """The work directory's state and staged prefix, every node started and (HyperPod platform) HyperPod's part
        done on each, with its agent running; nothing is left behind when a step fails."""
        directory, variant, layout, prefix = decided.directory, decided.variant, decided.layout, decided.options.prefix
        lower = rootfs.node_rootfs(variant.slurm) if variant.slurm is not None else None
        check_prefix_free(directory, prefix, list_netns(), LocalCluster.open)
        directory.mkdir(parents=True, exist_ok=True)
        with locked(directory):
            clear_previous(directory, LocalCluster.open)
            state = decided.state(lower, Path("/run/netns").exists(), Path("/run/mount").exists())
            agent_naming = variant.naming if variant.hyperpod else None
            stage(
                directory, layout, decided.files, naming=agent_naming, stale_worker_copies=variant.stale_worker_copies
            )
            write_state(directory, state)
            cluster = cls(directory, state)
            for name, (want, got) in layout.capped().items():
                say(f"group {name}: {got} of {want} instances (local caps)")
            try:
                cluster.namespaces.create_switch()
                for node in layout.nodes:
                    t0 = time.monotonic()
                    cluster.namespaces.start(power.node_net(cluster, node))
                    if not decided.options.bootstrap:  # bootstrap() provisions the node itself
                        provision(cluster, node)
                    say(f"node {node.name} ({node.role}, {node.ip}) up in {time.monotonic() - t0:.2f} s")
                if variant.hyperpod:  # HyperPod's part: its agent, and each node ready for its script
                    for node in layout.nodes:  # controllers first
                        hyperpod_platform.prepare(cluster, node)
                    agent.enable(cluster)
            except BaseException:
                cluster._destroy()
                raise
        return cluster

    def _converge(self, bootstrap_timeout: float, idle_timeout: float, say: Callable[[str], None]) -> None:
        """The lifecycle script on every node, then every compute node idle and each health check run once, then
        the cluster's Prometheus server (when the config has metrics)."""
        self.bootstrap_all(timeout=bootstrap_timeout, progress=say)
        if self.layout.workers:
            t0 = time.monotonic()
            self.wait_idle(idle_timeout)
            check_health(self)
            say(f"all {len(self.layout.workers)} compute nodes idle after {time.monotonic() - t0:.1f} s")
        if metrics_server.enabled(self):
            say(f"Prometheus: {metrics_server.start(self)}")

    # --- nodes ------------------------------------------------------------------------------
    @property
    def layout(self) -> LocalLayout:
        return self.state.layout

    @property
    def nodes(self) -> tuple[LocalNode, ...]:
        return self.state.layout.nodes

    def node(self, name: str) -> LocalNode:
        for node in self.nodes:
            if node.name == name:
                return node
        known = ", ".join(n.name for n in self.nodes)
        raise LocalClusterError(f"no node {name!r} in this cluster; its nodes are {known}")

    def alive(self, name: str) -> bool:
        return self.namespaces.alive(self.node(name).name)

    def exec(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        input: str | bytes | None = None,
        timeout: float | None = DEFAULT_EXEC_TIMEOUT_S,
        capture: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as root on node ``name`` (like ``ssh name argv``); see :meth:`Namespaces.exec`."""
        node = self.node(name)
        try:
            return self.namespaces.exec(
                node.name, argv, cwd=cwd, env=env, input=input, timeout=timeout, capture=capture
            )
        except NamespaceError as error:
            raise LocalClusterError(str(error)) from None

    # --- what HyperPod does to an instance (:mod:`hyperpod_local.power`) -------------------
    def crash(self, name: str) -> None:
        """Hard power-off of one node: every process dies, its cable is pulled, its disk stays."""
        power.crash(self, self.node(name))

    def boot(self, name: str, *, bootstrap: bool = False) -> tuple[int, str] | None:
        """Power a crashed node on as after a HyperPod reboot (:func:`power.boot`; ``bootstrap``: and re-run the
        lifecycle script). Returns the script's (exit code, output), or None when it did not run."""
        return power.boot(self, self.node(name), bootstrap=bootstrap)

    def reboot(self, name: str) -> None:
        """HyperPod's reboot of one node (``Action:Reboot``, ``BatchRebootClusterNodes``): :meth:`crash`, then
        :meth:`boot` without the lifecycle script."""
        self.crash(name)
        self.boot(name)

    def replace(self, name: str) -> tuple[int, str]:
        """HyperPod's replacement of one node (:func:`power.replace`): a fresh disk, the same name, address and
        role, the lifecycle script run. Returns the script's (exit code, output)."""
        return power.replace(self, self.node(name))

    def restage(self) -> None:
        """Refresh the prefix's scripts and runtime from this installation, then :meth:`bootstrap` (:func:`restage`)."""
        restage(self.workdir, self.state.mode)

    def bootstrap(self, name: str, *, timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT_S) -> tuple[int, str]:
        """(Re-)run the mode's lifecycle entry script on one node, as HyperPod does; returns (exit code,
        output). The output is also in ``<workdir>/logs/<node>-bootstrap.log``."""
        return power.run_lifecycle(self, self.node(name), timeout)

    def bootstrap_all(
        self, *, timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT_S, progress: Callable[[str], None] | None = None
    ) -> None:
        """Run the entry script on every node at once; raise naming every node that failed."""
        power.run_lifecycle_everywhere(self, timeout, progress or (lambda _message: None))

    def sinfo(self, timeout: float = 10.0) -> str | None:
        """``sinfo -N`` on the first running controller, or None (:func:`readiness.sinfo`)."""
        return sinfo(self, timeout)

    def wait_idle(self, timeout: float = DEFAULT_IDLE_TIMEOUT_S, nodes: Sequence[str] | None = None) -> None:
        """Wait until each compute node (or each of ``nodes``) is idle (:func:`readiness.wait_idle`)."""
        wait_idle(self, timeout, nodes)

    def status(self) -> dict[str, Any]:
        """Nodes, addresses, liveness and sinfo, as ``hyperpod-local status`` prints them."""
        return status_report(self)

    def down(self, *, keep: bool = False) -> None:
        """Remove every node, the switch and what they left on the host; unless ``keep``, also delete the
        work directory's content (node disks, staged prefix, shared directory, logs, state)."""
        with locked(self.workdir):
            self._destroy()
            if not keep:
                remove_entries(self.workdir)
        if not keep:
            with contextlib.suppress(OSError):
                self.workdir.rmdir()

    def _destroy(self) -> None:
        control_plane.stop(self)
        self.state = current_state(self.workdir, self.state)  # with the nodes the control plane added or removed
        metrics_server.stop(self)
        agent.stop(self)
        self.namespaces.destroy_all(power.node_net(self, n) for n in self.nodes)
        restore_host(self.state.host_had_run_netns, self.state.host_had_run_mount)

    def slurm_name(self, name: str) -> str:
        """Node ``name``'s host and Slurm node name under the cluster's naming (``ip-a-b-c-d`` or ``name``)."""
        return hyperpod_files.node_hostname(self.state.variant.naming, self.node(name))
