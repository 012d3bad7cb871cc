"""``python3 -m training_runtime directory-sync {run,once}``: the controller's directory group sync (issue #41).

Every ``interval_s`` it reads each team's ``directory_group`` through SSSD and applies
:func:`training_runtime.directory_accounts.plan` with ``sacctmgr -i``, logging each change on its own line. It reads
groups with ``getent group`` after ``sss_cache -g`` (the entry is fetched from the directory again, not SSSD's cache
of up to 90 minutes): SSSD already holds the bind password, the TLS settings and the schema (rfc2307's ``memberUid``,
rfc2307bis's and AD's nested ``member`` DNs), so the sync needs no LDAP client and no second copy of the secret.

Its configuration (:data:`CONFIG_PATH`, root-only) is written by the controller's bootstrap
(:class:`training_runtime.steps.directory_teams.DirectorySyncFiles`). Stdlib only (Python 3.8+).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from training_runtime.background import daemonize, name_process
from training_runtime.directory import group_members
from training_runtime.directory_accounts import ASSOC_FORMAT, USER_FORMAT, plan, read_associations
from training_runtime.log import log
from training_runtime.run import CommandError, Runner
from training_runtime.slurm_accounts import Change
from training_runtime.team_model import Team

CONFIG_PATH = "/etc/hyperpod-cdk/directory-sync.json"
PID_FILE = "/run/hyperpod-cdk-directory-sync.pid"
LOG_FILE = "/var/log/hyperpod-cdk/directory-sync.log"
STATUS_FILE = "/var/lib/hyperpod-cdk/directory-sync.json"
PROCESS_NAME = "hpcdk-dirsync"
STEP = "directory-sync"


@dataclass(frozen=True)
class SyncConfig:
    cluster: str
    """The Slurm cluster name the associations belong to."""
    teams: Tuple[Team, ...]
    slurm_bin: str
    interval_s: float

    def dumps(self) -> str:
        data = {
            "cluster": self.cluster,
            "slurm_bin": self.slurm_bin,
            "interval_s": self.interval_s,
            "teams": [
                {"name": t.name, "users": list(t.users), "directory_group": t.directory_group} for t in self.teams
            ],
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def loads(cls, text: str) -> "SyncConfig":
        data = json.loads(text)
        teams = [
            Team(str(t["name"]), tuple(str(u) for u in t["users"]), directory_group=str(t["directory_group"]))
            for t in data["teams"]
        ]
        return cls(str(data["cluster"]), tuple(teams), str(data["slurm_bin"]), float(data["interval_s"]))


class GroupSync:
    """One cycle reads the groups and Slurm and applies the plan; :meth:`run` loops."""

    def __init__(
        self,
        config: SyncConfig,
        runner: Runner,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        status_file: Optional[Path] = None,
    ) -> None:
        self.config = config
        self.runner = runner
        self.clock = clock
        self.sleep = sleep
        self.status_file = status_file

    def _sacctmgr(self, *args: str) -> Optional[str]:
        command = [self.config.slurm_bin.rstrip("/") + "/sacctmgr" if self.config.slurm_bin else "sacctmgr"]
        result = self.runner.run([*command, "-n", "-P", *args], timeout=60, check=False)
        return result.stdout if result.ok else None

    def members(self, group: str) -> Optional[Tuple[str, ...]]:
        """The group's members as the directory has them now; None when they cannot be read."""
        self.runner.run(["sss_cache", "-g", group], timeout=30, check=False)
        result = self.runner.run(["getent", "group", group], timeout=30, check=False)
        if not result.ok:
            log(
                "warning",
                step=STEP,
                what="directory group {!r} not found or not readable; left as it was".format(group),
            )
            return None
        return group_members(result.stdout)

    def cycle(self) -> List[Change]:
        """Read, plan, apply; returns the changes applied."""
        groups = sorted({t.directory_group for t in self.config.teams if t.directory_group})
        members: Dict[str, Optional[Sequence[str]]] = {g: self.members(g) for g in groups}
        where = "cluster=" + self.config.cluster
        assocs = self._sacctmgr("show", "assoc", "where", where, "format=" + ASSOC_FORMAT)
        users = self._sacctmgr("show", "user", "format=" + USER_FORMAT)
        if assocs is None or users is None:
            log("warning", step=STEP, what="slurmdbd is not answering; nothing changed this cycle")
            return []
        changes = plan(self.config.teams, members, read_associations(assocs, users), self.config.cluster)
        done = []
        for change in changes:
            command = self.config.slurm_bin.rstrip("/") + "/sacctmgr" if self.config.slurm_bin else "sacctmgr"
            try:
                self.runner.run([command, "-i", *change.args], timeout=60)
            except CommandError as error:
                log("warning", step=STEP, what="{}: failed: {}".format(change.line, error))
                continue
            log("change", step=STEP, what=change.line)
            done.append(change)
        self._status(members, done)
        return done

    def _status(self, members: Dict[str, Optional[Sequence[str]]], done: List[Change]) -> None:
        if self.status_file is None:
            return
        data: Dict[str, Any] = {
            "time": self.clock(),
            "groups": {g: (list(m) if m is not None else None) for g, m in members.items()},
            "changes": [c.line for c in done],
        }
        self.status_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.status_file.with_name(self.status_file.name + ".tmp")
        temporary.write_text(json.dumps(data, sort_keys=True) + "\n")
        temporary.replace(self.status_file)

    def run(self, cycles: Optional[int] = None) -> None:
        count = 0
        while cycles is None or count < cycles:
            started = self.clock()
            try:
                self.cycle()
            except Exception as error:  # the service logs and goes on: the next cycle may find the directory back
                log("warning", step=STEP, what="cycle failed: {}: {}".format(type(error).__name__, error))
            count += 1
            self.sleep(max(0.0, self.config.interval_s - (self.clock() - started)))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m training_runtime directory-sync", description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["run", "once"])
    p.add_argument("--config", type=Path, default=Path(CONFIG_PATH), help="default %(default)s")
    p.add_argument("--daemon", action="store_true", help="run: in the background (nodes without systemd)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config = SyncConfig.loads(args.config.read_text())
    except (OSError, ValueError, KeyError) as error:
        sys.stderr.write("directory-sync: {}: {}\n".format(args.config, error))
        return 2
    sync = GroupSync(config, Runner(), status_file=Path(STATUS_FILE))
    if args.command == "once":
        for change in sync.cycle():
            print(change.line)
        return 0
    if args.daemon:
        daemonize(Path(PID_FILE), Path(LOG_FILE), PROCESS_NAME)
    else:
        name_process(PROCESS_NAME)
    log("directory_sync_start", cluster=config.cluster, interval_s=config.interval_s)
    sync.run()
    return 0
