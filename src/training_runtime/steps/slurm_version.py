"""``runtime.slurm.version``: which of the Slurm majors HyperPod's AMI carries ``/opt/slurm`` points at.

HyperPod's AMIs ship Slurm 24.11 and 25.11 side by side, ``/opt/slurm-24.11/`` and ``/opt/slurm-25.11/``, with
``/opt/slurm`` a link to the active one; AWS's runbook switches between them "by switching the ``/opt/slurm``
symlink ... before the Slurm daemons start", from the lifecycle script: it first copies the active version's
``etc/`` ("where ClusterAgent writes slurm.conf, gres.conf, etc.") into the new version's, then runs ``ln -sfn``.
Its notes: "All nodes in a cluster must run the same Slurm major version", and switching under running daemons
needs every daemon restarted on every node and loses running jobs (awslabs/awsome-distributed-ai PR #1107,
``LifecycleScripts/base-config/hotfix/fallback-to-slurm-24.md``, https://github.com/awslabs/awsome-distributed-ai/
pull/1107).

So the runtime switches only where it runs before any Slurm daemon: the lifecycle-driven mode, whose script
starts Slurm itself. In the api-driven mode HyperPod starts Slurm before ``OnInitComplete`` runs
(``ClusterLifeCycleConfig``), so the config is refused at validation (CL-SLURM-VERSION-MODE) and, on a node, the
step refuses to switch while slurmctld, slurmd or slurmdbd runs. It also refuses when the AMI has no directory
for the version asked for, or when ``/opt/slurm`` is not a link (an AMI with one Slurm). It never restarts
daemons and never switches back: a later run finds the link where it should be and does nothing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import List, Optional

from training_runtime import services
from training_runtime.errors import StepFailed
from training_runtime.node import HYPERPOD_SLURM, Node
from training_runtime.steps import Step
from training_runtime.steps.slurm import slurmctld, slurmd, slurmdbd

SLURM_LINK = os.path.dirname(HYPERPOD_SLURM.conf_dir)
"""``/opt/slurm``: the directory HyperPod's Slurm layout lives under."""


def version_dir(version: str) -> str:
    """The AMI's directory of one Slurm major, e.g. ``/opt/slurm-25.11``."""
    return "{}-{}".format(SLURM_LINK, version)


def link_target(node: Node) -> Optional[str]:
    """Where ``/opt/slurm`` points (an absolute path on the node), or None when it is no link."""
    link = node.path(SLURM_LINK)
    if not link.is_symlink():
        return None
    target = os.readlink(str(link))
    return os.path.normpath(target if target.startswith("/") else os.path.join(os.path.dirname(SLURM_LINK), target))


def available(node: Node) -> List[str]:
    """The Slurm directories the AMI carries (``/opt/slurm-<version>``)."""
    return sorted("/opt/" + p.name for p in node.path("/opt").glob("slurm-*") if p.is_dir() and not p.is_symlink())


def _copy_tree(source: Path, target: Path) -> None:
    """``cp -rf source/. target/`` keeping links as links and each file's mode and owner (slurmdbd.conf must
    stay slurm's and 0600)."""
    for directory, dirs, files in os.walk(str(source)):
        relative = os.path.relpath(directory, str(source))
        into = target / relative if relative != "." else target
        into.mkdir(parents=True, exist_ok=True)
        for name in [*files, *[d for d in dirs if os.path.islink(os.path.join(directory, d))]]:
            src, dst = os.path.join(directory, name), into / name
            if dst.is_symlink() or dst.is_file():
                dst.unlink()
            if os.path.islink(src):
                os.symlink(os.readlink(src), str(dst))
            else:
                shutil.copy2(src, str(dst))
            info = os.lstat(src)
            os.lchown(str(dst), info.st_uid, info.st_gid)


class SlurmVersion(Step):
    """Points ``/opt/slurm`` at ``/opt/slurm-<version>`` before any Slurm daemon runs, the active version's
    configuration copied along (AWS's runbook, above)."""

    name = "slurm-version"

    def __init__(self, version: str) -> None:
        self.version = version

    def needed(self, node: Node) -> bool:
        return link_target(node) != version_dir(self.version)

    def _refusal(self, node: Node) -> Optional[str]:
        wanted = version_dir(self.version)
        if not node.path(wanted).is_dir():
            found = available(node)
            return (
                "this AMI has no {} (it carries {}). Fix: set runtime.slurm.version to one of {}, or leave it "
                "unset to keep the AMI's default".format(
                    wanted,
                    ", ".join(found) or "no versioned Slurm directory",
                    ", ".join(repr(f.rsplit("-", 1)[1]) for f in found) or "none (this AMI has a single Slurm)",
                )
            )
        if link_target(node) is None:
            return (
                "{} is not a link on this AMI, so there is no Slurm major to switch to. Fix: leave "
                "runtime.slurm.version unset".format(SLURM_LINK)
            )
        running = [d.name for d in (slurmctld(node), slurmd(node), slurmdbd(node)) if services.is_running(node, d)]
        if running:
            return (
                "{} already run from {}: switching now would leave them on the old major until restarted on every "
                "node, and lose running jobs (AWS's runbook, awslabs/awsome-distributed-ai PR #1107). The runtime "
                "switches only before Slurm starts: the lifecycle-driven mode (in api-driven mode HyperPod starts "
                "Slurm before OnInitComplete runs). Fix: leave runtime.slurm.version unset, or follow AWS's "
                "runbook by hand".format(" and ".join(running), link_target(node))
            )
        return None

    def apply(self, node: Node) -> None:
        refusal = self._refusal(node)
        if refusal:
            raise StepFailed("runtime.slurm.version {}: {}".format(self.version, refusal))
        current = link_target(node)
        assert current is not None  # _refusal checked it
        wanted = version_dir(self.version)
        source = node.path(current + "/etc")
        if source.is_dir():
            _copy_tree(source, node.path(wanted + "/etc"))
        temporary = node.path("/opt/.slurm-link.{}".format(os.getpid()))
        if temporary.is_symlink():
            temporary.unlink()
        os.symlink(wanted, str(temporary))
        os.replace(str(temporary), str(node.path(SLURM_LINK)))  # one rename: /opt/slurm is never missing

    def describe(self, node: Node) -> List[str]:
        refusal = self._refusal(node)
        if refusal:
            return ["REFUSE: " + refusal]
        return [
            "copy {}/etc into {}/etc, then point {} at {} (was {})".format(
                SLURM_LINK, version_dir(self.version), SLURM_LINK, version_dir(self.version), link_target(node)
            )
        ]
