"""What ``LocalCluster.up`` will create, decided before anything is created: :class:`UpOptions` (sizes, names,
timeouts: the rest of what ``up`` needs besides the :class:`~hyperpod_local.variant.Variant`) and :func:`plan`,
which reads the config or cloud assembly, places the nodes and renders the prefix the nodes get.

A plan needs neither root nor namespaces: every mistake in a config, a variant or an option shows before a node
starts, and tests read a plan without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hyperpod_local.control_plane.local import sagemaker_url
from hyperpod_local.host import check_prefix, check_workdir
from hyperpod_local.imds import imds_url
from hyperpod_local.layout import (
    DEFAULT_MAX_PER_GROUP,
    DEFAULT_MAX_WORKERS,
    DEFAULT_SUBNET,
    LOGIN_POOL_NODES,
    LocalLayout,
    plan_nodes,
    stale_instances,
)
from hyperpod_local.namespaces import DEFAULT_PREFIX
from hyperpod_local.power import DEFAULT_BOOTSTRAP_TIMEOUT_S
from hyperpod_local.staging import LocalInputs, from_assembly, from_config
from hyperpod_local.state import ClusterState, LocalClusterError, default_workdir
from hyperpod_local.variant import Variant

DEFAULT_IDLE_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class UpOptions:
    """How ``up`` builds the cluster on this machine (``hyperpod-local up``'s other options); the defaults are
    the command line's."""

    assembly: Path | str | None = None
    """A synthesized cloud assembly (``cdk.out``) to run instead of a config file (``--from``)."""
    stack: str | None = None
    """With ``assembly``: the stack (None: the one stack with a HyperPod cluster)."""
    max_per_group: int = DEFAULT_MAX_PER_GROUP
    """Nodes per compute group at most (the local caps: :func:`hyperpod_local.layout.plan_nodes`)."""
    max_workers: int = DEFAULT_MAX_WORKERS
    """Compute nodes in all at most."""
    subnet: str = DEFAULT_SUBNET
    """The nodes' network."""
    prefix: str = DEFAULT_PREFIX
    """Prefix of the network namespaces' names (one cluster per prefix on a host)."""
    scaler_timing: tuple[float, float] | None = None
    """(interval, minute): the capacity scaler's cycle and the seconds it counts as one of a group's
    ``idle_minutes`` (``hyperpod_cdk.emulation``; None: 60 s each, as on HyperPod)."""
    bootstrap: bool = True
    """Run the lifecycle scripts on every node and wait for idle compute nodes; False: stop once the nodes exist."""
    bootstrap_timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT_S
    """Seconds one node's lifecycle script may run."""
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    """Seconds to wait for the compute nodes to be idle after the scripts."""


@dataclass(frozen=True)
class Plan:
    """One cluster decided: where, what the deployment gives HyperPod, the nodes, the prefix's files."""

    directory: Path
    variant: Variant
    options: UpOptions
    inputs: LocalInputs
    layout: LocalLayout
    files: Mapping[str, bytes]

    def state(self, rootfs: Path | None, host_had_run_netns: bool, host_had_run_mount: bool) -> ClusterState:
        """What the state file remembers of this cluster, on nodes whose lower layer is ``rootfs`` (None: the
        host's ``/``), on a host that had ``/run/netns`` and ``/run/mount`` or not before."""
        deployed = self.inputs.deployed
        return ClusterState(
            config_path=self.inputs.source,
            mode=deployed.mode,
            fsx_mount_path=deployed.fsx_mount_path,
            prefix=self.options.prefix,
            layout=self.layout,
            bootstrap=self.options.bootstrap,
            host_had_run_netns=host_had_run_netns,
            host_had_run_mount=host_had_run_mount,
            variant=self.variant,
            rootfs=str(rootfs) if rootfs else None,
        )


def plan(config_path: Path | str | None, workdir: Path | str | None, variant: Variant, options: UpOptions) -> Plan:
    """The cluster of ``config_path`` (None: the default configuration) or of ``options.assembly``, in ``workdir``
    (None: :func:`~hyperpod_local.state.default_workdir`): its nodes placed under the local caps and the prefix the
    deployment uploads (:mod:`hyperpod_local.staging`), with the emulation's overlays on the parameters file only.
    A :class:`LocalClusterError` (or the config's own error) for anything that cannot be built."""
    directory = Path(workdir if workdir is not None else default_workdir()).absolute()
    check_workdir(directory)
    check_prefix(options.prefix)
    if options.assembly is not None and config_path is not None:
        raise LocalClusterError("give a config file or a cloud assembly (--from), not both")
    inputs = (
        from_assembly(options.assembly, options.stack) if options.assembly is not None else from_config(config_path)
    )
    layout = plan_nodes(
        inputs.cluster_name,
        inputs.groups,
        inputs.counts,
        max_per_group=options.max_per_group,
        max_workers=options.max_workers,
        subnet=options.subnet,
        login_nodes=LOGIN_POOL_NODES if inputs.deployed.login_pool is not None else 1,  # a pool: two login nodes
    )
    if variant.stale_worker_copies:
        stale_instances(layout)  # raises when no group can have been scaled to 0
    files = inputs.staged_files(
        imds_url=imds_url(layout.subnet),
        sagemaker_url=sagemaker_url(layout.subnet),
        secretsmanager_url=sagemaker_url(layout.subnet),  # the control plane serves Secrets Manager too
        scaler_timing=options.scaler_timing,
    )
    return Plan(directory, variant, options, inputs, layout, files)
