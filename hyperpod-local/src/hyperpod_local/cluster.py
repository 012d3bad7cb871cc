"""LocalCluster: a HyperPod Slurm cluster emulated on this machine, driven like HyperPod drives one.

``up`` does what HyperPod does for a new cluster, locally: it stages the lifecycle prefix (the same
assets and parameters file the constructs upload) in ``<workdir>/bucket``, starts one namespace node per
instance (:mod:`hyperpod_local.namespaces`), writes ``/opt/ml/config/resource_config.json`` on each,
copies the prefix to ``/opt/ml/lifecycle`` and runs the mode's entry script on every node at once. A JSON
state file in the work directory remembers the cluster, so later commands need only the work directory.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hyperpod_local import agent, enabled, hyperpod_files, hyperpod_platform, rootfs
from hyperpod_local import metrics as metrics_server
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.host import (
    check_prefix,
    check_tools,
    check_workdir,
    clear_previous,
    restore_host,
    runs_here,
)
from hyperpod_local.imds import imds_url
from hyperpod_local.layout import (
    DEFAULT_MAX_PER_GROUP,
    DEFAULT_MAX_WORKERS,
    DEFAULT_SUBNET,
    LocalLayout,
    LocalNode,
    plan_nodes,
    stale_instances,
)
from hyperpod_local.namespaces import (
    DEFAULT_EXEC_TIMEOUT_S,
    DEFAULT_PREFIX,
    NamespaceError,
    Namespaces,
    NodeNet,
    list_netns,
    node_environment,
    require_root,
)
from hyperpod_local.readiness import check_health, sinfo, wait_idle
from hyperpod_local.report import bootstrap_failures, status_report
from hyperpod_local.staging import LIFECYCLE_DIR, LocalInputs, provision, restage, stage
from hyperpod_local.state import (
    OWN_ENTRIES,
    ClusterState,
    LocalClusterError,
    current_state,
    default_workdir,
    locked,
)
from training_runtime.node import HYPERPOD
from training_runtime.params import ENTRYPOINT_BY_MODE
from training_runtime.paths import RESOURCE_CONFIG_PATH

DEFAULT_BOOTSTRAP_TIMEOUT_S = 1800.0
DEFAULT_IDLE_TIMEOUT_S = 180.0


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
        path = directory / "state.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise LocalClusterError(
                f"no local cluster in {directory} (no state.json). Fix: `hyperpod-local up --config FILE` "
                f"or pass the --workdir the cluster was created with"
            ) from None
        except ValueError as error:
            raise LocalClusterError(f"{path}: not valid JSON ({error}); remove the work directory") from None
        return cls(directory, ClusterState.from_json(data))

    @classmethod
    def up(
        cls,
        config_path: Path | str | None = None,
        workdir: Path | str | None = None,
        *,
        assembly: Path | str | None = None,
        stack: str | None = None,
        max_per_group: int = DEFAULT_MAX_PER_GROUP,
        max_workers: int = DEFAULT_MAX_WORKERS,
        subnet: str = DEFAULT_SUBNET,
        prefix: str = DEFAULT_PREFIX,
        platform: str = hyperpod_platform.API_PLATFORM,
        node_names: str | None = None,
        stale_worker_copies: bool = False,
        automatic_topology: bool = True,
        slurm: str | None = None,
        preconfigured_ami: bool = False,
        scaler_timing: tuple[float, float] | None = None,
        bootstrap: bool = True,
        bootstrap_timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT_S,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
        progress: Callable[[str], None] | None = None,
    ) -> LocalCluster:
        """Create the cluster of ``config_path`` (None: the default configuration), or of the stack ``stack``
        of the cloud assembly ``assembly`` (``cdk.out``), in ``workdir`` and, unless ``bootstrap`` is False,
        run the lifecycle scripts on every node and wait until ``sinfo`` shows every compute node idle (failing
        at once when the health checks drain one).

        The nodes get exactly the prefix the deployment uploads (:mod:`hyperpod_local.staging`), with the
        emulation's overlays on the parameters file only.

        ``platform``: ``hyperpod`` emulates HyperPod's part (Slurm 24.11 under /opt/slurm on a trixie root,
        :mod:`hyperpod_local.hyperpod_platform`; the emulated HyperPod agent and ``srun --auto-resume``,
        :mod:`hyperpod_local.agent`); ``generic`` runs the host's Slurm and the runtime's generic path.
        ``node_names``: ``ip`` (the HyperPod platform's default) or ``instance`` (``UseInstanceNames``; the generic
        platform's only naming): the nodes' host and Slurm names (:func:`hyperpod_platform.check_naming`).
        ``stale_worker_copies``: non-controller nodes get a stale resource_config.json that still lists a group
        the controller's copy shows empty (HyperPod platform only; :func:`hyperpod_local.layout.stale_instances`).
        ``automatic_topology`` (HyperPod platform): HyperPod's agent writes ``topology.conf`` and sets
        ``TopologyPlugin=topology/tree``, as since 2026-04; False plays an older AMI without it.
        ``slurm``: the Slurm major the nodes run, on the built root file system that carries it
        (:data:`hyperpod_local.rootfs.SLURM_SUITES`: ``24.11`` trixie, ``26.05`` forky); None: the platform's
        own (HyperPod: 24.11; generic: the host's root and Slurm).
        ``preconfigured_ami`` (HyperPod platform only): the nodes are the 2026 AMI, with its preconfigured pieces
        (:mod:`hyperpod_local.ami`: accounting, Enroot and Pyxis files, two Slurm majors behind ``/opt/slurm`` ...);
        False: an older AMI without them.
        ``scaler_timing`` (interval, minute): the capacity scaler's cycle and the seconds it counts as one of a
        group's ``idle_minutes`` (``hyperpod_cdk.emulation``; None: 60 s each, as on HyperPod).
        A bootstrap failure leaves the nodes running for inspection and raises :class:`LocalClusterError`
        naming each failed node and the last line of its output.
        """
        from hyperpod_local.staging import from_assembly, from_config

        say = progress or (lambda _message: None)
        started = time.monotonic()
        require_root()
        check_tools()
        directory = Path(workdir if workdir is not None else default_workdir()).absolute()
        check_workdir(directory)
        check_prefix(prefix)
        if hyperpod_platform.check_platform(platform) == HYPERPOD and slurm is None:
            slurm = rootfs.DEFAULT_SLURM
        lower = rootfs.node_rootfs(rootfs.check_slurm(slurm)) if slurm is not None else None
        naming = hyperpod_platform.check_naming(platform, node_names)
        if stale_worker_copies and platform != HYPERPOD:
            raise LocalClusterError(
                "stale worker copies need the HyperPod platform: on the generic platform every node renders "
                "slurm.conf from its own copy"
            )
        if preconfigured_ami and platform != HYPERPOD:
            raise LocalClusterError(
                "preconfigured_ami: only the HyperPod platform has HyperPod's AMI; use platform hyperpod"
            )
        if assembly is not None and config_path is not None:
            raise LocalClusterError("give a config file or a cloud assembly (--from), not both")
        inputs = from_assembly(assembly, stack) if assembly is not None else from_config(config_path)
        layout = plan_nodes(
            inputs.cluster_name,
            inputs.groups,
            inputs.counts,
            max_per_group=max_per_group,
            max_workers=max_workers,
            subnet=subnet,
        )
        if stale_worker_copies:
            stale_instances(layout)  # raises when no group can have been scaled to 0
        files = inputs.staged_files(
            imds_url=imds_url(layout.subnet),
            sagemaker_url=control_plane.sagemaker_url(layout.subnet),
            scaler_timing=scaler_timing,
        )
        if f"{prefix}-sw" in list_netns() and not runs_here(directory, prefix, LocalCluster.open):
            raise LocalClusterError(
                f"another local cluster uses the prefix {prefix!r} (netns {prefix}-sw exists). Fix: pass a "
                "different --prefix, or take that cluster down with `hyperpod-local down --workdir ...`"
            )
        directory.mkdir(parents=True, exist_ok=True)
        cluster = cls._create(
            directory,
            inputs,
            layout,
            files,
            prefix=prefix,
            platform=platform,
            rootfs=lower,
            slurm=slurm,
            naming=naming,
            stale_worker_copies=stale_worker_copies,
            automatic_topology=automatic_topology,
            bootstrap=bootstrap,
            say=say,
            preconfigured_ami=preconfigured_ami,
        )
        if bootstrap:
            cluster._converge(bootstrap_timeout, idle_timeout, say)
        say(f"cluster {layout.cluster_name} up in {time.monotonic() - started:.2f} s (work directory {directory})")
        return cluster

    @classmethod
    def _create(
        cls,
        directory: Path,
        inputs: LocalInputs,
        layout: LocalLayout,
        files: Mapping[str, bytes],
        *,
        prefix: str,
        platform: str,
        rootfs: Path | None,
        naming: str,
        stale_worker_copies: bool,
        automatic_topology: bool,
        slurm: str | None,
        bootstrap: bool,
        say: Callable[[str], None],
        preconfigured_ami: bool = False,
    ) -> LocalCluster:
        """The work directory's state and staged prefix (``files``), every node started and (HyperPod platform)
        HyperPod's part done on each, with its agent running; nothing is left behind when a step fails."""
        params = inputs.deployed
        with locked(directory):
            clear_previous(directory, LocalCluster.open)
            state = ClusterState(
                config_path=inputs.source,
                mode=params.mode,
                fsx_mount_path=params.fsx_mount_path,
                prefix=prefix,
                layout=layout,
                bootstrap=bootstrap,
                host_had_run_netns=Path("/run/netns").exists(),
                host_had_run_mount=Path("/run/mount").exists(),
                platform=platform,
                rootfs=str(rootfs) if rootfs else None,
                naming=naming,
                stale_worker_copies=stale_worker_copies,
                automatic_topology=automatic_topology,
                slurm=slurm,
                preconfigured_ami=preconfigured_ami,
            )
            agent_naming = naming if platform == HYPERPOD else None
            stage(directory, layout, files, naming=agent_naming, stale_worker_copies=stale_worker_copies)
            (directory / "state.json").write_text(json.dumps(state.to_json(), indent=2) + "\n")
            cluster = cls(directory, state)
            for name, (want, got) in layout.capped().items():
                say(f"group {name}: {got} of {want} instances (local caps)")
            try:
                cluster.namespaces.create_switch()
                for node in layout.nodes:
                    t0 = time.monotonic()
                    cluster.namespaces.start(cluster.node_net(node))
                    if not bootstrap:  # bootstrap() provisions the node itself
                        cluster.provision(node)
                    say(f"node {node.name} ({node.role}, {node.ip}) up in {time.monotonic() - t0:.2f} s")
                if platform == HYPERPOD:  # HyperPod's part: its agent, and each node ready for its script
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
        cluster, layout = self, self.layout
        cluster.bootstrap_all(timeout=bootstrap_timeout, progress=say)
        if layout.workers:
            t0 = time.monotonic()
            cluster.wait_idle(idle_timeout)
            check_health(cluster)
            say(f"all {len(layout.workers)} compute nodes idle after {time.monotonic() - t0:.1f} s")
        if metrics_server.enabled(cluster):
            say(f"Prometheus: {metrics_server.start(cluster)}")

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

    def crash(self, name: str) -> None:
        """Hard power-off of one node: every process dies, its cable is pulled, its disk stays."""
        node = self.node(name)
        with locked(self.workdir):
            self.namespaces.crash(self.node_net(node))

    def boot(self, name: str, *, bootstrap: bool = False) -> tuple[int, str] | None:
        """Power a crashed node on again as after a HyperPod reboot: same disk, name and address, a fresh boot
        time; HyperPod's part (HyperPod platform), then the daemons the node has enabled
        (:func:`hyperpod_local.enabled.start`). HyperPod does not re-run the lifecycle script after a reboot
        (docs/local-cluster.md, "Reboot and replace"); ``bootstrap`` re-runs it too, for a drill whose booted
        node stands for a new instance. Returns the entry script's (exit code, output), or None when it did not run.
        """
        node = self.node(name)
        with locked(self.workdir):
            try:
                self.namespaces.start(self.node_net(node))
            except NamespaceError as error:
                raise LocalClusterError(str(error)) from None
            if self.state.platform == HYPERPOD:
                hyperpod_platform.prepare(self, node)
            enabled.start(self, node.name)
        return self.bootstrap(name) if bootstrap else None

    def reboot(self, name: str) -> None:
        """HyperPod's reboot of one node (``Action:Reboot``, ``BatchRebootClusterNodes``): :meth:`crash`, then
        :meth:`boot` without the lifecycle script."""
        self.crash(name)
        self.boot(name)

    def replace(self, name: str) -> tuple[int, str]:
        """HyperPod's replacement of one node: terminate the instance and destroy its disk, boot a new one with
        the same name, address and role (HyperPod's part, with the srun wrapper, on the HyperPod platform), run
        the lifecycle entry script on it. Returns the script's (exit code, output)."""
        node = self.node(name)
        net = self.node_net(node)
        with locked(self.workdir):
            self.namespaces.crash(net)
            directory = self.namespaces.node_dir(node.name)
            for disk in ("upper", "work"):
                shutil.rmtree(directory / disk, ignore_errors=True)
            try:
                self.namespaces.start(net)
            except NamespaceError as error:
                raise LocalClusterError(str(error)) from None
            if self.state.platform == HYPERPOD:  # HyperPod's part on the new instance
                hyperpod_platform.prepare(self, node)
        return self.bootstrap(name)

    # --- HyperPod emulation -----------------------------------------------------------------
    def restage(self) -> None:
        """Refresh the local prefix's scripts and runtime from this installation (the parameters stay): the
        edit-and-retry loop for lifecycle code, followed by :meth:`bootstrap` (:func:`staging.restage`)."""
        restage(self.workdir, self.state.mode)

    def provision(self, node: LocalNode) -> None:
        """What HyperPod puts on a node before the lifecycle script (:func:`staging.provision`)."""
        provision(self, node)

    def bootstrap(self, name: str, *, timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT_S) -> tuple[int, str]:
        """(Re-)run the mode's lifecycle entry script on one node, as HyperPod does; returns (exit code,
        output). The output is also in ``<workdir>/logs/<node>-bootstrap.log``."""
        node = self.node(name)
        self.provision(node)
        entry = ENTRYPOINT_BY_MODE[self.state.mode]
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        log_path = logs / f"{node.name}-bootstrap.log"
        argv = self.namespaces.command(node.name, ["bash", f"{LIFECYCLE_DIR}/{entry}"], cwd=LIFECYCLE_DIR)
        env = node_environment({"SAGEMAKER_RESOURCE_CONFIG_PATH": RESOURCE_CONFIG_PATH})
        with log_path.open("wb") as log:
            try:
                completed = subprocess.run(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout
                )
                code = completed.returncode
            except subprocess.TimeoutExpired:
                log.write(f"\nhyperpod-local: {entry} ran past {timeout:.0f} s and was stopped\n".encode())
                code = 124
        return code, log_path.read_text(errors="replace")

    def bootstrap_all(
        self, *, timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT_S, progress: Callable[[str], None] | None = None
    ) -> None:
        """Run the entry script on every node at once; raise naming every node that failed."""
        say = progress or (lambda _message: None)
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, len(self.nodes))) as pool:
            results = list(pool.map(lambda n: (n, self.bootstrap(n.name, timeout=timeout)), self.nodes))
        failures = bootstrap_failures(self.workdir, results)
        if failures:
            raise LocalClusterError(
                f"the lifecycle script failed on {len(failures)} of {len(self.nodes)} nodes:\n"
                + "\n".join(failures)
                + "\nThe nodes are still running for inspection (`hyperpod-local exec NODE -- ...`); "
                "`hyperpod-local down` removes them"
            )
        say(f"lifecycle script ran on {len(self.nodes)} nodes in {time.monotonic() - t0:.1f} s")

    # --- Slurm ------------------------------------------------------------------------------
    def sinfo(self, timeout: float = 10.0) -> str | None:
        """``sinfo -N`` on the first running controller, or None (:func:`readiness.sinfo`)."""
        return sinfo(self, timeout)

    def wait_idle(self, timeout: float = DEFAULT_IDLE_TIMEOUT_S, nodes: Sequence[str] | None = None) -> None:
        """Wait until each compute node (or each of ``nodes``) is idle (:func:`readiness.wait_idle`)."""
        wait_idle(self, timeout, nodes)

    # --- overview and teardown --------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """Nodes, addresses, liveness and sinfo, as ``hyperpod-local status`` prints them."""
        return status_report(self)

    def down(self, *, keep: bool = False) -> None:
        """Remove every node, the switch and what they left on the host; unless ``keep``, also delete the
        work directory's content (node disks, staged prefix, shared directory, logs, state)."""
        with locked(self.workdir):
            self._destroy()
            if not keep:
                for entry in OWN_ENTRIES:
                    path = self.workdir / entry
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path)
                    else:
                        path.unlink(missing_ok=True)
        if not keep:
            with contextlib.suppress(OSError):
                self.workdir.rmdir()

    def _destroy(self) -> None:
        control_plane.stop(self)
        self.state = current_state(self.workdir, self.state)  # with the nodes the control plane added or removed
        metrics_server.stop(self)
        agent.stop(self)
        self.namespaces.destroy_all(self.node_net(n) for n in self.nodes)
        restore_host(self.state.host_had_run_netns, self.state.host_had_run_mount)

    def slurm_name(self, name: str) -> str:
        """Node ``name``'s host and Slurm node name under the cluster's naming (``ip-a-b-c-d`` or ``name``)."""
        return hyperpod_files.node_hostname(self.state.naming, self.node(name))

    def node_net(self, node: LocalNode) -> NodeNet:
        """What the namespaces need to start ``node``: its netns name, address and host name."""
        return NodeNet(name=node.name, ip=node.ip, hostname=self.slurm_name(node.name))
