"""Where the emulator's own files are: its Python code (for the helper processes it starts: agent, fake IMDS) and
its package data, found from this file, so an installed hyperpod-local runs without the repository checkout."""

from __future__ import annotations

import os
from pathlib import Path

import training_runtime

PACKAGE_DIR = Path(__file__).resolve().parent
"""The installed ``hyperpod_local`` package (a checkout's ``hyperpod-local/src/hyperpod_local``)."""
NODE_INIT = PACKAGE_DIR / "node_init.sh"
"""PID 1 of every node."""
ROOTFS_SCRIPT = PACKAGE_DIR / "build-node-rootfs.sh"
"""Builds the HyperPod platform's node root file system (``scripts/build-node-rootfs.sh`` runs this one)."""
ROOTFS_PACKAGES = PACKAGE_DIR / "node-rootfs.packages"
"""The Debian packages of that root file system (the script reads it from beside itself)."""
JOBS_DIR = PACKAGE_DIR / "jobs"
"""The example job scripts (``examples/jobs`` in the repository is a link to this directory); nodes see it."""
PACKAGE_DATA = (NODE_INIT, ROOTFS_SCRIPT, ROOTFS_PACKAGES, JOBS_DIR)
"""Every file and directory of package data the emulator uses (tests/test_local_package.py checks the wheel)."""


def subprocess_env() -> dict[str, str]:
    """This environment with ``PYTHONPATH`` naming the directories this package and the node runtime were
    imported from (a checkout's source directories or site-packages), so ``python -m hyperpod_local.<x>``
    runs the same code as this process."""
    runtime = Path(training_runtime.__file__ or "").resolve().parents[1]
    roots = dict.fromkeys([str(PACKAGE_DIR.parent), str(runtime)])
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*roots, *inherited])}
