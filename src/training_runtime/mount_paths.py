"""Where a shared file system may be mounted on a node: one definition, for ``validate`` (``CL-MOUNT-PATH``,
``OZ-MOUNT-PATH``) and for the node, which checks the parameters file again before it writes fstab.

The path is absolute, of plain name characters (no space, newline or ``#``: it becomes an fstab field), without a
trailing slash, and neither a system directory, a directory the node's software lives in, nor below or above one:
mounting there hides what the node needs to boot or run, and a directory cleaned by the system (``/tmp``,
``/run``) would lose the file system's data.
"""

from __future__ import annotations

import re
from typing import Optional

from training_runtime.hyperpod_facts import SLURM_PREFIX
from training_runtime.paths import HOME as RUNTIME_HOME
from training_runtime.problems import Problem

MOUNT_PATH_PATTERN = re.compile(r"^/(?!/)(?!.*/$)[a-zA-Z0-9._-]+(/[a-zA-Z0-9._-]+)*$")
"""Matched in full (``fullmatch``): ``$`` alone would let a trailing newline through."""

SYSTEM_DIRECTORIES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/sys",
    "/tmp",
    "/usr",
    "/var",
)
"""The Filesystem Hierarchy Standard's directories a node needs (and Ubuntu's ``/snap``, ``/lib32``, ``/libx32``);
``/home``, ``/mnt``, ``/srv`` and ``/opt`` itself are not here (the homes go on a shared file system)."""

SOFTWARE_DIRECTORIES = (
    "/opt/ml",
    "/opt/sagemaker",
    SLURM_PREFIX,
    RUNTIME_HOME,
    "/opt/amazon",  # EFA's installer (/opt/amazon/efa)
    "/opt/aws",  # the Neuron SDK (/opt/aws/neuron)
)
"""HyperPod's, Slurm's, this runtime's, EFA's and Neuron's directories on the node."""

RESERVED_MOUNT_PATHS = SYSTEM_DIRECTORIES + SOFTWARE_DIRECTORIES


def reserved_by(path: str) -> Optional[str]:
    """The reserved directory that mounting at ``path`` would hide (it, below it, or above it: ``/`` and
    ``/opt`` hide ``/opt/slurm``), or None."""
    if path == "/":
        return "/"
    for reserved in RESERVED_MOUNT_PATHS:
        if path == reserved or path.startswith(reserved + "/") or reserved.startswith(path + "/"):
            return reserved
    return None


def mount_path_problem(where: str, path: object, example: str) -> Optional[Problem]:
    """What is wrong with the mount path at field ``where``: its form, or a reserved directory; None if nothing."""
    if not isinstance(path, str) or not MOUNT_PATH_PATTERN.fullmatch(path):
        return Problem(
            where,
            "expected an absolute path without a trailing slash, e.g. {}; its names of letters, digits and "
            "'._-'".format(example),
            got=path,
        )
    reserved = reserved_by(path)
    if reserved is not None:
        return Problem(
            where,
            "this directory belongs to the system or to HyperPod ({}); mounting over it breaks the node".format(
                reserved
            ),
            got=path,
            fix="use a directory of its own such as {}".format(example),
        )
    return None
