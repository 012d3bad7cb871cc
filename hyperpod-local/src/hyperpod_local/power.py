"""What HyperPod does to one instance of a running local cluster: power it off, boot it, replace it, and run the
lifecycle entry script on it. :class:`hyperpod_local.cluster.LocalCluster`'s ``crash``, ``boot``, ``reboot``,
``replace``, ``bootstrap`` and ``bootstrap_all`` are these, on the cluster's nodes by name.

A crash kills every process of the node and pulls its cable; its disk stays. A boot starts it again with the same
disk, name and address, HyperPod's part (HyperPod platform) and the daemons the node has enabled
(:mod:`hyperpod_local.enabled`); HyperPod does not re-run the lifecycle script after a reboot (docs/local-cluster.md,
"Reboot and replace"). A replacement drops the disk and runs the script on the new instance.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from hyperpod_local import enabled, hyperpod_files, hyperpod_platform
from hyperpod_local.layout import LocalNode
from hyperpod_local.namespaces import NamespaceError, NodeNet, node_environment
from hyperpod_local.report import bootstrap_failures
from hyperpod_local.staging import LIFECYCLE_DIR, provision
from hyperpod_local.state import ClusterHandle, LocalClusterError, locked
from training_runtime.params import ENTRYPOINT_BY_MODE
from training_runtime.paths import RESOURCE_CONFIG_PATH

DEFAULT_BOOTSTRAP_TIMEOUT_S = 1800.0


def node_net(cluster: ClusterHandle, node: LocalNode) -> NodeNet:
    """What the namespaces need to start ``node``: its netns name, address and host name."""
    return NodeNet(
        name=node.name, ip=node.ip, hostname=hyperpod_files.node_hostname(cluster.state.variant.naming, node)
    )


def crash(cluster: ClusterHandle, node: LocalNode) -> None:
    """Hard power-off: every process dies, the cable is pulled, the disk stays."""
    with locked(cluster.workdir):
        cluster.namespaces.crash(node_net(cluster, node))


def boot(cluster: ClusterHandle, node: LocalNode, *, bootstrap: bool = False) -> tuple[int, str] | None:
    """Power a crashed node on as after a HyperPod reboot: same disk, name and address, a fresh boot time; HyperPod's
    part (HyperPod platform), then the daemons the node has enabled. ``bootstrap`` re-runs the lifecycle script too
    (a drill whose booted node stands for a new instance). Returns the script's (exit code, output), or None."""
    with locked(cluster.workdir):
        _start(cluster, node)
        enabled.start(cluster, node.name)
    return run_lifecycle(cluster, node) if bootstrap else None


def replace(cluster: ClusterHandle, node: LocalNode) -> tuple[int, str]:
    """HyperPod's replacement: terminate the instance and destroy its disk, boot a new one with the same name, address
    and role (HyperPod's part, with the srun wrapper, on the HyperPod platform), run the lifecycle entry script on
    it. Returns the script's (exit code, output)."""
    with locked(cluster.workdir):
        cluster.namespaces.crash(node_net(cluster, node))
        directory = cluster.namespaces.node_dir(node.name)
        for disk in ("upper", "work"):
            shutil.rmtree(directory / disk, ignore_errors=True)
        _start(cluster, node)
    return run_lifecycle(cluster, node)


def _start(cluster: ClusterHandle, node: LocalNode) -> None:
    try:
        cluster.namespaces.start(node_net(cluster, node))
    except NamespaceError as error:
        raise LocalClusterError(str(error)) from None
    if cluster.state.variant.hyperpod:  # HyperPod's part on the (new) instance
        hyperpod_platform.prepare(cluster, node)


def run_lifecycle(
    cluster: ClusterHandle, node: LocalNode, timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT_S
) -> tuple[int, str]:
    """(Re-)run the mode's lifecycle entry script on ``node``, as HyperPod does; returns (exit code, output). The
    output is also in ``<workdir>/logs/<node>-bootstrap.log``."""
    provision(cluster, node)
    entry = ENTRYPOINT_BY_MODE[cluster.state.mode]
    logs = cluster.workdir / "logs"
    logs.mkdir(exist_ok=True)
    log_path = logs / f"{node.name}-bootstrap.log"
    argv = cluster.namespaces.command(node.name, ["bash", f"{LIFECYCLE_DIR}/{entry}"], cwd=LIFECYCLE_DIR)
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


def run_lifecycle_everywhere(cluster: ClusterHandle, timeout: float, say: Callable[[str], None]) -> None:
    """The entry script on every node at once; a :class:`LocalClusterError` naming every node that failed."""
    nodes = cluster.layout.nodes
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        results = list(pool.map(lambda n: (n, run_lifecycle(cluster, n, timeout)), nodes))
    failures = bootstrap_failures(cluster.workdir, results)
    if failures:
        raise LocalClusterError(
            f"the lifecycle script failed on {len(failures)} of {len(nodes)} nodes:\n"
            + "\n".join(failures)
            + "\nThe nodes are still running for inspection (`hyperpod-local exec NODE -- ...`); "
            "`hyperpod-local down` removes them"
        )
    say(f"lifecycle script ran on {len(nodes)} nodes in {time.monotonic() - t0:.1f} s")
