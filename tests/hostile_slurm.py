"""Slurm jobs whose user-written fields try to get a command run by the tools that read Slurm's output as root
(issue #39, finding H3 and L6): for the local-cluster tests and the hostile-user drill.

A job's name and comment are the user's text. ``scontrol -o show job`` prints them among Slurm's own ``Key=Value``
fields, so a reader that splits that line takes ``JobId=1;touch${IFS}<marker>`` in a name for the job's id, and
a privileged shell line built from it (``scontrol requeue <id>``) runs the ``touch``. Each crafted field creates
its own marker file when a shell runs it; :func:`injected` says which markers exist on a node, so a test asserts
that none does. ``${IFS}`` stands for the spaces a job name may hold but a ``Key=Value`` value may not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MARKER_DIR = "/tmp"
NAME_MARKER = MARKER_DIR + "/hyperpod-cdk-injected-by-name"
COMMENT_MARKER = MARKER_DIR + "/hyperpod-cdk-injected-by-comment"
MARKERS = (NAME_MARKER, COMMENT_MARKER)


def crafted_name(marker: str = NAME_MARKER) -> str:
    """A job name that reads as ``JobId=1;touch <marker>`` to a ``Key=Value`` splitter."""
    return f"train JobId=1;touch${{IFS}}{marker}"


def crafted_comment(marker: str = COMMENT_MARKER) -> str:
    """A job comment that does the same, after Slurm's own JobId in the line, with the reader's ``|`` in it."""
    return f"x|y JobId=2;touch${{IFS}}{marker} Requeue=1 BatchFlag=1"


def crafted_sbatch_args() -> list[str]:
    """``sbatch`` options giving a job the crafted name and comment."""
    return ["-J", crafted_name(), "--comment", crafted_comment()]


def injected(cluster: Any, node: str, markers: Sequence[str] = MARKERS) -> list[str]:
    """The markers that exist on ``node`` (a :class:`hyperpod_local.LocalCluster` node): [] when nothing ran."""
    return [m for m in markers if cluster.exec(node, ["test", "-e", m]).returncode == 0]
