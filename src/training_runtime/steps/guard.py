"""The Slurm guard on every HyperPod node (``runtime.slurm.guard``, on by default): installed and kept running.

A program (``python3 -m training_runtime.guard`` with this node's role and HyperPod's Slurm paths) and, where the
node has systemd, a service that keeps it running (``Restart=always``); without systemd (the local cluster) it runs
as a daemon with a pid file. A change of the program restarts it (:class:`RunningDaemon`'s digest). With the option
false, a guard an earlier bootstrap started is stopped and its files removed, so the switch converges both ways.

Why a resident process on inotify rather than a systemd ``.path`` unit: a path unit watches a fixed list of paths
set when it is written, while the files worth watching move (slurmd creates its conf-cache only when it first
starts; an include names a directory of its own); each trigger would start a new Python (~50 ms of CPU) where the
resident one wakes for a few milliseconds; systemd stops a path unit that triggers too often
(``TriggerLimitBurst``), which is when it is needed; and the local cluster, which has no systemd, can then run the
very same code in its drills (docs/node-runtime.md, "The Slurm guard").
"""

from __future__ import annotations

import os
from typing import List, Tuple

from training_runtime import services
from training_runtime.guard.service import PID_FILE, PROCESS_NAME
from training_runtime.hyperpod_facts import SLURMD_CONF_CACHE
from training_runtime.metrics.layout import TEXTFILE_DIR
from training_runtime.node import GENERIC, Node
from training_runtime.paths import BIN_DIR
from training_runtime.services import Daemon
from training_runtime.steps import Step
from training_runtime.steps.daemon import RunningDaemon, ServiceFiles
from training_runtime.steps.installed import PACKAGE_NAME, program

GUARD_PROGRAM = BIN_DIR + "/slurm-guard"
UNIT = "hyperpod-cdk-slurm-guard.service"
UNIT_FILE = "/etc/systemd/system/" + UNIT
SLURM_GUARD = Daemon(name=PROCESS_NAME, unit=UNIT, argv=(GUARD_PROGRAM, "--daemon"), pid_file=PID_FILE)


def guard_program(node: Node) -> str:
    """The guard with this node's role and Slurm paths."""
    arguments = "--role {} --conf-dir {} --cache-dir {} --scontrol {} --metrics-dir {}".format(
        node.role, node.slurm.conf_dir, SLURMD_CONF_CACHE, node.slurm.command("scontrol"), TEXTFILE_DIR
    )
    return program(arguments, module=PACKAGE_NAME + ".guard")


def service_unit() -> str:
    return (
        "# Installed by hyperpod-cdk: repairs the known ways HyperPod leaves Slurm's files broken.\n"
        "[Unit]\nDescription=hyperpod-cdk Slurm guard\nAfter=slurmctld.service slurmd.service\n\n"
        "[Service]\nExecStart={}\nRestart=always\nRestartSec=5\n\n"
        "[Install]\nWantedBy=multi-user.target\n".format(GUARD_PROGRAM)
    )


class GuardFiles(ServiceFiles):
    """Writes the guard's program (and its systemd unit where there is systemd)."""

    name = "slurm-guard"
    unit_file = UNIT_FILE

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        files = [(GUARD_PROGRAM, guard_program(node), 0o755)]
        if node.has_systemd:
            files.append((UNIT_FILE, service_unit(), 0o644))
        return files


class GuardRemoved(Step):
    """``runtime.slurm.guard: false`` where an earlier bootstrap installed the guard: stopped, files removed."""

    name = "slurm-guard"

    def needed(self, node: Node) -> bool:
        return node.path(GUARD_PROGRAM).exists() or services.is_running(node, SLURM_GUARD)

    def apply(self, node: Node) -> None:
        if node.has_systemd:
            node.run(["systemctl", "disable", "--now", UNIT], check=False, timeout=120)
        else:
            services.stop(node, SLURM_GUARD)
            services.disable(node, SLURM_GUARD)
        for path in (GUARD_PROGRAM, UNIT_FILE):
            node.path(path).unlink(missing_ok=True)
        if node.has_systemd:
            node.run(["systemctl", "daemon-reload"], timeout=120)

    def describe(self, node: Node) -> List[str]:
        return ["stop {} and remove {} (runtime.slurm.guard is false)".format(UNIT, GUARD_PROGRAM)]


def guard_steps(node: Node) -> List[Step]:
    """The guard's steps: every HyperPod node, unless ``runtime.slurm.guard`` is false (then removed if there)."""
    if node.platform == GENERIC:
        return []  # the runtime writes every Slurm file there itself; nothing rewrites them behind its back
    if node.options.slurm.guard:
        config = [GUARD_PROGRAM] + ([UNIT_FILE] if node.has_systemd else [])
        return [GuardFiles(), RunningDaemon(SLURM_GUARD, config)]
    if os.path.exists(str(node.path(GUARD_PROGRAM))) or services.is_running(node, SLURM_GUARD):
        return [GuardRemoved()]
    return []
