"""Shared by the tests that run a local cluster: when they can run here, and why not."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hyperpod_local import LocalCluster, LocalClusterError
from hyperpod_local.hyperpod_platform import node_rootfs
from training_runtime.node import GENERIC

CPU_CLUSTER = Path(__file__).resolve().parent.parent / "examples" / "cpu-cluster.yaml"
"""The config the local-cluster tests bring up: controller (accounting), login node, two workers, a user."""

NEEDED_COMMANDS = ("slurmctld", "slurmd", "munged", "mariadbd", "unshare", "nsenter", "ip")


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the local cluster needs root (namespaces, mounts, veth)"
    missing = [c for c in NEEDED_COMMANDS if shutil.which(c, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if missing:
        return f"missing {', '.join(missing)}; run ./scripts/install-system-packages.sh (make setup does)"
    try:
        probe = subprocess.run(["unshare", "--net", "--time", "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"cannot run unshare: {error}"
    if probe.returncode != 0:
        return f"`unshare --net --time true` failed: {probe.stderr.decode().strip()}"
    return None


REASON = skip_reason()
requires_local_cluster = pytest.mark.skipif(REASON is not None, reason=str(REASON))


def rootfs_reason() -> str | None:
    """Why the emulated HyperPod platform cannot run here (its node root file system is not built), or None."""
    try:
        node_rootfs()
    except LocalClusterError as error:
        return str(error)
    return None


HYPERPOD_REASON = REASON or rootfs_reason()
requires_hyperpod_platform = pytest.mark.skipif(HYPERPOD_REASON is not None, reason=str(HYPERPOD_REASON))


@contextmanager
def cpu_cluster(workdir: Path, prefix: str, subnet: str, platform: str = GENERIC) -> Iterator[LocalCluster]:
    """:data:`CPU_CLUSTER` up in ``workdir`` (the prefix gets this process's id), taken down afterwards."""
    cluster = LocalCluster.up(
        CPU_CLUSTER, workdir, prefix=f"{prefix}{os.getpid() % 10000}", subnet=subnet, platform=platform
    )
    try:
        yield cluster
    finally:
        cluster.down()
