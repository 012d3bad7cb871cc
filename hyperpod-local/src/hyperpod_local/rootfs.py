"""The nodes' root file systems: which Debian suite carries which Slurm major, and where its built copy is.

A cluster's nodes run on an overlay whose lower layer is the host's ``/`` (the generic platform's default)
or one of the root file systems ``build-node-rootfs.sh`` (package data) builds with mmdebstrap. Each built
root is named by the Slurm major it carries, so a cluster picks its Slurm (``Variant(slurm=...)``,
``hyperpod-local up --slurm``) and the suite follows from one table (:data:`hyperpod_local.variant.SLURM_SUITES`):

* ``24.11``: Debian trixie, HyperPod's current major (the HyperPod platform's default);
* ``26.05``: Debian forky, the next release (its Slurm packages from deb.debian.org were 26.05.5-1, its
  python3 3.14, when this table was written); it runs the runtime on Slurm's next major before AWS ships one,
  so renamed or removed options show up here first (docs/local-cluster.md, "Slurm's next major"). Forky is
  Debian testing: when its Slurm moves on, tests/test_local_next_slurm.py says so and this table changes.

Stdlib only.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hyperpod_local.paths import ROOTFS_SCRIPT
from hyperpod_local.state import LocalClusterError
from hyperpod_local.variant import DEFAULT_SLURM, SLURM_SUITES

BUILD_TIME = "about 1 min and 650 MB each"
"""What building one root costs (measured: trixie 65 s, forky 54 s on 2 shared cores; 645 and 654 MB)."""


def check_slurm(major: str) -> str:
    """``major`` when the table has it; else a :class:`LocalClusterError` naming the allowed ones."""
    if major not in SLURM_SUITES:
        allowed = ", ".join(f"{m} (Debian {s})" for m, s in SLURM_SUITES.items())
        raise LocalClusterError(f"slurm: got {major!r}; allowed: {allowed}. Fix: pass one of them (--slurm)")
    return major


def build_command(major: str, *, print_path: bool = False) -> list[str]:
    """The script's command line that builds (or, with ``print_path``, locates) ``major``'s root file system."""
    argv = ["bash", str(ROOTFS_SCRIPT), "--suite", SLURM_SUITES[check_slurm(major)]]
    return [*argv, "--print-path"] if print_path else argv


def node_rootfs(slurm: str = DEFAULT_SLURM, build: bool = False) -> Path:
    """The built root file system that carries Slurm ``slurm`` (built by the script first when ``build``);
    a :class:`LocalClusterError` saying how to build it when it is not there."""
    argv = build_command(slurm, print_path=not build)
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    lines = result.stdout.strip().splitlines()
    path = Path(lines[-1]) if result.returncode == 0 and lines else None
    if path is None or not (path / "etc" / "os-release").exists():
        why = f" ({result.stderr.strip()})" if result.stderr.strip() else ""
        suite = SLURM_SUITES[slurm]
        raise LocalClusterError(
            f"the node root file system with Slurm {slurm} (Debian {suite}) is not built{why}. Fix: sudo "
            f"{ROOTFS_SCRIPT} --suite {suite} (make setup builds every one; {BUILD_TIME})"
        )
    return path
