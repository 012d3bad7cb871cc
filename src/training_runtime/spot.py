"""The Spot interruption watcher of a Spot group's compute node: ``python3 -m training_runtime.spot``.

EC2 posts an interruption notice in the instance metadata two minutes before it stops or terminates a Spot
instance (``spot/instance-action``: ``{"action": "terminate", "time": "..."}``; 404 while there is none; AWS
recommends checking every 5 s). On a notice the watcher, once per notice and job:

1. drains the node (``hyperpod-cdk:spot-reclaim: ...``), so Slurm starts nothing new on it;
2. sends :data:`~training_runtime.checkpoint.interrupt.CHECKPOINT_SIGNAL` to the steps of every job running
   on it (``scancel --signal=USR1``): a script with a ``checkpoint.StopRequest`` saves, stops and requeues
   its job, losing no step;
3. requeues, ``grace_s`` after the signal, a job still running on the node (a script that ignores the
   signal): the job then resumes from its last periodic checkpoint, at most one interval back.

A node whose metadata has no notice but that Slurm shows drained for a Spot reclaim is a new instance under
the old name (the reclaimed one is gone): the watcher resumes it. Nothing else it drained is touched, and
the health checks leave a Spot drain alone (``health.results.SPOT_REASON``).

The metadata service's address is an argument (EC2's; the local cluster's fake, ``hyperpod_cdk.emulation``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from training_runtime.background import daemonize, name_process
from training_runtime.checkpoint.interrupt import CHECKPOINT_SIGNAL_NAME
from training_runtime.facts import FactsError, load_facts
from training_runtime.health.checks import slurm_node_name
from training_runtime.health.remedy import parse_node_state
from training_runtime.health.results import REASON_MAX, SPOT_REASON
from training_runtime.hyperpod_facts import IMDS_ENDPOINT
from training_runtime.log import log
from training_runtime.node import GENERIC, SLURM_LAYOUTS, SYSTEM_PATH
from training_runtime.paths import STATE_DIR
from training_runtime.run import CommandError, Runner

IMDS_URL = IMDS_ENDPOINT
TOKEN_PATH = "/latest/api/token"
INSTANCE_ACTION_PATH = "/latest/meta-data/spot/instance-action"
TOKEN_TTL_S = 21600
TOKEN_REFRESH_S = 3600
"""A token is asked for again this long before it would expire (it lives :data:`TOKEN_TTL_S`)."""
HTTP_TIMEOUT_S = 2.0
COMMAND_TIMEOUT_S = 30


class ImdsError(RuntimeError):
    """The metadata service did not answer as documented (not the same as "no notice")."""


@dataclass(frozen=True)
class Notice:
    """An interruption notice: ``action`` is stop, terminate or hibernate; ``time`` when (UTC, ISO 8601)."""

    action: str
    time: str


class Imds:
    """IMDSv2: a session token (PUT), then the instance-action item with it (GET)."""

    def __init__(
        self, base_url: str = IMDS_URL, timeout_s: float = HTTP_TIMEOUT_S, clock: Callable[[], float] = time.time
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.clock = clock
        self._token: Optional[str] = None
        self._token_until = 0.0

    def _request(self, method: str, path: str, headers: Dict[str, str]) -> str:
        request = urllib.request.Request(self.base_url + path, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return str(response.read().decode("utf-8"))

    def token(self) -> str:
        if self._token is None or self.clock() >= self._token_until:
            try:
                self._token = self._request(
                    "PUT", TOKEN_PATH, {"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_S)}
                )
            except (urllib.error.URLError, OSError) as error:
                raise ImdsError("no IMDSv2 token from {}: {}".format(self.base_url, error)) from None
            self._token_until = self.clock() + TOKEN_TTL_S - TOKEN_REFRESH_S
        return self._token

    def instance_action(self) -> Optional[Notice]:
        """The interruption notice, or None when the metadata has none (404)."""
        for attempt in (1, 2):
            try:
                text = self._request("GET", INSTANCE_ACTION_PATH, {"X-aws-ec2-metadata-token": self.token()})
            except urllib.error.HTTPError as error:
                if error.code == 404:
                    return None
                if error.code == 401 and attempt == 1:
                    self._token = None  # expired or from an instance that was replaced: ask for a new one
                    continue
                raise ImdsError("GET {}: HTTP {}".format(INSTANCE_ACTION_PATH, error.code)) from None
            except (urllib.error.URLError, OSError) as error:
                raise ImdsError("GET {}: {}".format(INSTANCE_ACTION_PATH, error)) from None
            try:
                data = json.loads(text)
                return Notice(action=str(data["action"]), time=str(data["time"]))
            except (ValueError, KeyError, TypeError):
                raise ImdsError("GET {}: not a notice: {!r}".format(INSTANCE_ACTION_PATH, text[:200])) from None
        raise ImdsError("GET {}: HTTP 401 with a fresh token".format(INSTANCE_ACTION_PATH))


def reason_for(notice: Notice) -> str:
    """The drain reason: ``hyperpod-cdk:spot-reclaim: terminate at <time>``."""
    return "{}: {} at {}".format(SPOT_REASON, notice.action, notice.time)[:REASON_MAX]


@dataclass
class Watcher:
    """One node's reaction to a notice; :meth:`poll` is one check, safe to repeat every few seconds."""

    node_name: str
    imds: Imds
    runner: Runner
    state_file: Path
    """Which jobs were signalled and when, and which were requeued (the watcher may restart meanwhile)."""
    grace_s: float = 60.0
    scontrol: str = "scontrol"
    squeue: str = "squeue"
    scancel: str = "scancel"
    clock: Callable[[], float] = time.time
    actions: List[List[str]] = field(default_factory=list)
    """Every Slurm command it ran, in order."""

    def _run(self, argv: List[str], check: bool = True) -> str:
        self.actions.append(argv)
        return self.runner.run(argv, timeout=COMMAND_TIMEOUT_S, check=check).stdout

    def _state(self) -> Dict[str, Dict[str, float]]:
        try:
            data = json.loads(self.state_file.read_text())
            return {"signaled": dict(data["signaled"]), "requeued": dict(data["requeued"])}
        except (OSError, ValueError, KeyError, TypeError):
            return {"signaled": {}, "requeued": {}}

    def _save(self, state: Dict[str, Dict[str, float]]) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        tmp.write_text(json.dumps(state, sort_keys=True))
        tmp.replace(self.state_file)

    def _node(self) -> str:
        return self._run([self.scontrol, "show", "node", self.node_name], check=False)

    def running_jobs(self) -> List[str]:
        out = self._run([self.squeue, "-h", "-w", self.node_name, "-t", "RUNNING,COMPLETING", "-o", "%A"])
        return sorted({line.strip() for line in out.splitlines() if line.strip()})

    def poll(self) -> Optional[Notice]:
        """Check the metadata once and act on what it says; returns the notice (None: there is none)."""
        notice = self.imds.instance_action()
        current = parse_node_state(self._node())
        spot_drained = current is not None and current.drained and current.reason.startswith(SPOT_REASON)
        if notice is None:
            if spot_drained:
                self._run([self.scontrol, "update", "nodename=" + self.node_name, "state=resume"])
            if self.state_file.exists():
                self.state_file.unlink()
            return None
        if not spot_drained:
            reason = reason_for(notice)
            self._run([self.scontrol, "update", "nodename=" + self.node_name, "state=drain", "reason=" + reason])
        state = self._state()
        now = self.clock()
        for job in self.running_jobs():
            signaled = state["signaled"].get(job)
            if signaled is None:
                self._run([self.scancel, "--signal=" + CHECKPOINT_SIGNAL_NAME, job], check=False)
                state["signaled"][job] = now
            elif now - signaled >= self.grace_s and job not in state["requeued"]:
                self._run([self.scontrol, "requeue", job], check=False)
                state["requeued"][job] = now
        self._save(state)
        return notice


# --- the program ------------------------------------------------------------------------------------------

STATE_FILE = STATE_DIR + "/spot-watcher.json"
PID_FILE = "/run/hyperpod-cdk-spot.pid"
LOG_FILE = "/var/log/hyperpod-cdk/spot.log"
PROCESS_NAME = "hpcdk-spot"
"""The watcher's ``/proc/<pid>/comm`` (what :mod:`training_runtime.services` checks its pid file against)."""


def serve(
    watcher: Watcher, interval_s: float, polls: Optional[int] = None, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Poll every ``interval_s`` (``polls`` times; forever when None), logging each change of what it sees."""
    last = ""
    count = 0
    while polls is None or count < polls:
        count += 1
        try:
            notice = watcher.poll()
            seen = "notice {} {}".format(notice.action, notice.time) if notice else "none"
            fields: Dict[str, object] = {"notice": notice.__dict__ if notice else None}
        except (ImdsError, CommandError) as error:
            seen, fields = "error " + str(error), {"error": str(error)}
        if seen != last:
            log("spot_watch", node=watcher.node_name, actions=watcher.actions, **fields)
            last = seen
        watcher.actions = []
        sleep(interval_s)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m training_runtime.spot", description=__doc__.split("\n")[0])
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between checks (AWS: every 5 s)")
    parser.add_argument("--grace", type=float, default=60.0, help="seconds from the signal to a forced requeue")
    parser.add_argument("--imds-url", default=IMDS_URL, help="the instance metadata service")
    parser.add_argument("--node", help="the node's Slurm name (default: from the node facts)")
    parser.add_argument("--daemon", action="store_true", help="run in the background (nodes without systemd)")
    parser.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv))
    os.environ.setdefault("PATH", SYSTEM_PATH)
    try:
        facts = load_facts(args.root)
    except FactsError as error:
        sys.stderr.write("hyperpod-cdk spot watcher: {}\n".format(error))
        return 2
    slurm = SLURM_LAYOUTS.get(facts.platform, SLURM_LAYOUTS[GENERIC])
    watcher = Watcher(
        node_name=args.node or slurm_node_name(facts),
        imds=Imds(args.imds_url),
        runner=Runner(),
        state_file=args.root / STATE_FILE.lstrip("/"),
        grace_s=args.grace,
        scontrol=slurm.command("scontrol"),
        squeue=slurm.command("squeue"),
        scancel=slurm.command("scancel"),
    )
    if args.daemon:
        daemonize(args.root / PID_FILE.lstrip("/"), args.root / LOG_FILE.lstrip("/"), PROCESS_NAME)
    else:
        name_process(PROCESS_NAME)
    serve(watcher, args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
