"""The controller's directory group sync as a service (issue #41): its configuration, its program and (with systemd)
its unit, kept running by :class:`~training_runtime.steps.daemon.RunningDaemon` (restarted when they change).

The service (:mod:`training_runtime.directory_sync`) adds a team's ``directory_group`` members to its Slurm account
and blocks leavers' new jobs every ``directory.group_sync_interval_s``, with no restart of any Slurm daemon.
"""

from __future__ import annotations

from typing import List, Tuple

from training_runtime.directory import Directory
from training_runtime.directory_sync import CONFIG_PATH, PID_FILE, PROCESS_NAME, SyncConfig
from training_runtime.node import Node
from training_runtime.paths import BIN_DIR
from training_runtime.services import Daemon
from training_runtime.steps import Step
from training_runtime.steps.daemon import RunningDaemon, ServiceFiles
from training_runtime.steps.installed import PACKAGE_NAME, program
from training_runtime.steps.slurm import slurm_cluster_name
from training_runtime.team_model import Teams

SYNC_PROGRAM = BIN_DIR + "/directory-sync"
UNIT = "hyperpod-cdk-directory-sync.service"
UNIT_FILE = "/etc/systemd/system/" + UNIT
SYNC = Daemon(name=PROCESS_NAME, unit=UNIT, argv=(SYNC_PROGRAM, "--daemon"), pid_file=PID_FILE)


def sync_config(node: Node, teams: Teams, directory: Directory) -> SyncConfig:
    return SyncConfig(
        cluster=slurm_cluster_name(node),
        teams=teams.directory_teams,
        slurm_bin=node.slurm.bin_dir or "",
        interval_s=float(directory.group_sync_interval_s),
    )


def service_unit() -> str:
    return (
        "# Installed by hyperpod-cdk: keeps Slurm accounts in step with directory groups.\n"
        "[Unit]\nDescription=hyperpod-cdk directory group sync\nAfter=slurmctld.service sssd.service\n\n"
        "[Service]\nExecStart={}\nRestart=always\nRestartSec=10\n\n"
        "[Install]\nWantedBy=multi-user.target\n".format(SYNC_PROGRAM)
    )


class DirectorySyncFiles(ServiceFiles):
    name = "directory-sync"
    unit_file = UNIT_FILE

    def __init__(self, teams: Teams, directory: Directory) -> None:
        self.teams = teams
        self.directory = directory

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        files = [
            (CONFIG_PATH, sync_config(node, self.teams, self.directory).dumps(), 0o600),
            (SYNC_PROGRAM, program("directory-sync run", module=PACKAGE_NAME), 0o755),
        ]
        if node.has_systemd:
            files.append((UNIT_FILE, service_unit(), 0o644))
        return files

    def describe(self, node: Node) -> List[str]:
        groups = ", ".join("{} -> {}".format(t.directory_group, t.name) for t in self.teams.directory_teams)
        return [
            "write {} (groups: {}; every {} s)".format(p, groups, self.directory.group_sync_interval_s)
            for p in self.stale(node)
        ]


def directory_sync_steps(node: Node) -> List[Step]:
    """On the controller, when a team names a directory group (after the teams' accounts exist)."""
    teams, directory = node.params.teams, node.params.directory
    if not node.is_controller or teams is None or directory is None or not teams.directory_teams:
        return []
    config = [CONFIG_PATH, SYNC_PROGRAM] + ([UNIT_FILE] if node.has_systemd else [])
    return [DirectorySyncFiles(teams, directory), RunningDaemon(SYNC, config)]
