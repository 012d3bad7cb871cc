"""The Spot interruption watcher on the compute nodes of a group with ``capacity: spot``.

A program (the watcher with this node's ``runtime.spot`` options) and, where the node has systemd, a service
that keeps it running; without systemd (containers, the local cluster) it runs as a daemon with a pid file.
A change of options rewrites the program and restarts the watcher (:class:`RunningDaemon`'s digest).
"""

from __future__ import annotations

from typing import List, Tuple

from training_runtime.node import Node
from training_runtime.paths import BIN_DIR
from training_runtime.services import Daemon
from training_runtime.spot import IMDS_URL, PID_FILE, PROCESS_NAME
from training_runtime.steps import Step
from training_runtime.steps.daemon import RunningDaemon, ServiceFiles
from training_runtime.steps.installed import PACKAGE_NAME, program

WATCHER = BIN_DIR + "/spot-watcher"
UNIT = "hyperpod-cdk-spot.service"
UNIT_FILE = "/etc/systemd/system/" + UNIT
SPOT_WATCHER = Daemon(name=PROCESS_NAME, unit=UNIT, argv=(WATCHER, "--daemon"), pid_file=PID_FILE)


def watcher_program(node: Node) -> str:
    """The watcher with this node's ``runtime.spot`` options, reading EC2's metadata service (the local cluster's
    fake where ``hyperpod_cdk.emulation`` names one)."""
    spot = node.options.spot
    emulation = node.params.emulation
    imds_url = emulation.imds_url if emulation is not None and emulation.imds_url is not None else IMDS_URL
    arguments = "--interval {} --grace {} --imds-url {}".format(spot.poll_interval, spot.checkpoint_grace, imds_url)
    return program(arguments, module=PACKAGE_NAME + ".spot")


def service_unit() -> str:
    return (
        "# Installed by hyperpod-cdk: EC2 Spot interruption notices drain this node and checkpoint its jobs.\n"
        "[Unit]\nDescription=hyperpod-cdk Spot interruption watcher\nAfter=slurmd.service\n\n"
        "[Service]\nExecStart={}\nRestart=always\nRestartSec=5\n\n"
        "[Install]\nWantedBy=multi-user.target\n".format(WATCHER)
    )


class SpotWatcherFiles(ServiceFiles):
    """Writes the watcher program (and its systemd unit where there is systemd)."""

    name = "spot-watcher"
    unit_file = UNIT_FILE

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        files = [(WATCHER, watcher_program(node), 0o755)]
        if node.has_systemd:
            files.append((UNIT_FILE, service_unit(), 0o644))
        return files


def spot_steps(node: Node) -> List[Step]:
    """The watcher's steps: compute nodes of a Spot group, unless ``runtime.spot.enabled`` is false."""
    if not (node.is_compute and node.group.is_spot and node.options.spot.enabled):
        return []
    config = [WATCHER] + ([UNIT_FILE] if node.has_systemd else [])
    return [SpotWatcherFiles(), RunningDaemon(SPOT_WATCHER, config)]
