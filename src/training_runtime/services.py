"""Starting and checking daemons, with systemd where the node has it and directly where it does not
(containers, the local cluster). Pid files hold the PIDs of the node's own PID namespace."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, read_text
from training_runtime.node import Node
from training_runtime.retry import NotReady


@dataclass(frozen=True)
class Daemon:
    name: str
    """Process name as in ``/proc/<pid>/comm``."""
    unit: str
    argv: Tuple[str, ...]
    """How to start it without systemd (the daemon forks into the background itself)."""
    pid_file: str
    run_dir: Optional[Tuple[str, str, int]] = None
    """(path, owner, mode) of a runtime directory to create first (systemd's RuntimeDirectory)."""


def pid(node: Node, daemon: Daemon) -> Optional[int]:
    """PID of the running daemon, or None."""
    text = read_text(node, daemon.pid_file)
    if not text or not text.strip().isdigit():
        return None
    number = int(text.strip())
    comm = read_text(node, "/proc/{}/comm".format(number))
    return number if comm is not None and comm.strip() == daemon.name[:15] else None


def is_running(node: Node, daemon: Daemon) -> bool:
    if node.has_systemd:
        return unit_active(node, daemon.unit)
    return pid(node, daemon) is not None


def start(node: Node, daemon: Daemon) -> None:
    if node.has_systemd:
        node.run(["systemctl", "enable", "--now", daemon.unit], timeout=120)
        return
    if daemon.run_dir:
        path, owner, mode = daemon.run_dir
        ensure_dir(node, path, mode=mode, owner=owner, group=owner)
    node.run(list(daemon.argv), timeout=120)
    _wait(node, daemon, running=True)


def stop(node: Node, daemon: Daemon) -> None:
    if node.has_systemd:
        node.run(["systemctl", "stop", daemon.unit], timeout=120)
        return
    number = pid(node, daemon)
    if number is None:
        return
    try:
        os.kill(number, 15)
    except ProcessLookupError:
        return
    _wait(node, daemon, running=False)


def restart(node: Node, daemon: Daemon) -> None:
    if node.has_systemd:
        node.run(["systemctl", "restart", daemon.unit], timeout=120)
        return
    stop(node, daemon)
    start(node, daemon)


def _wait(node: Node, daemon: Daemon, running: bool) -> None:
    def check() -> None:
        if (pid(node, daemon) is not None) != running:
            raise NotReady("{} is {}".format(daemon.name, "not running yet" if running else "still running"))

    node.host.daemon_wait.call(check, what="{} {}".format(daemon.name, "start" if running else "stop"))


# --- systemd units ------------------------------------------------------------------------------------


def unit_active(node: Node, unit: str) -> bool:
    """Whether systemd reports ``unit`` active (``systemctl is-active``); the node must have systemd."""
    return node.run(["systemctl", "is-active", "--quiet", unit], check=False, timeout=60).ok


def unit_enabled(node: Node, unit: str) -> bool:
    return node.run(["systemctl", "is-enabled", "--quiet", unit], check=False, timeout=60).ok


def start_unit(node: Node, unit: str) -> None:
    """Enable and start ``unit``; StepFailed with systemd's status when it does not stay active."""
    node.run(["systemctl", "enable", "--now", unit], timeout=300)
    if not unit_active(node, unit):
        status = node.run(["systemctl", "status", "--no-pager", unit], check=False, timeout=60)
        raise StepFailed(
            "{} did not stay active after systemctl enable --now: {}".format(unit, status.stdout.strip()[-1500:])
        )
