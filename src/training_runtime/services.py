"""Starting and checking daemons, with systemd where the node has it and directly where it does not
(containers, the local cluster). Pid files hold the PIDs of the node's own PID namespace.

With systemd, ``systemctl enable --now`` also makes a daemon start again at every boot: a HyperPod reboot
(``Action:Reboot``) does not re-run the lifecycle script, so the enabled units are what comes back. Without
systemd, :func:`start` keeps the same promise in writing: it records each daemon it starts, in order, in
:data:`ENABLED_DAEMONS`, which whatever boots the node again reads (the local cluster's emulated boot does,
docs/local-cluster.md, "Reboot and replace"). The runtime never reads that record to start anything itself.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, read_text, write_file
from training_runtime.node import Node
from training_runtime.paths import STATE_DIR
from training_runtime.retry import NotReady

ENABLED_DAEMONS = STATE_DIR + "/enabled-daemons.json"
"""Without systemd: the daemons :func:`start` started, first enabled first (a JSON list of
:func:`daemon_record` objects), as ``systemctl enable`` would keep them."""


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
    needs_controller: bool = False
    """It starts only once the controller answers (a configless slurmd): its start waits the host's
    ``controller_wait`` rather than ``daemon_wait``."""


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


def daemon_record(daemon: Daemon) -> Dict[str, Any]:
    return {
        "name": daemon.name,
        "unit": daemon.unit,
        "argv": list(daemon.argv),
        "pid_file": daemon.pid_file,
        "run_dir": list(daemon.run_dir) if daemon.run_dir else None,
    }


def enabled_daemons(text: Optional[str]) -> List[Daemon]:
    """The daemons :data:`ENABLED_DAEMONS` holds (``text`` None: none); ValueError naming what is wrong."""
    if text is None:
        return []
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError("{}: not JSON ({})".format(ENABLED_DAEMONS, error)) from None
    if not isinstance(data, list):
        raise ValueError("{}: expected a JSON list, got {}".format(ENABLED_DAEMONS, type(data).__name__))
    daemons = []
    for index, item in enumerate(data):
        try:
            run_dir = item["run_dir"]
            daemons.append(
                Daemon(
                    name=str(item["name"]),
                    unit=str(item["unit"]),
                    argv=tuple(str(a) for a in item["argv"]),
                    pid_file=str(item["pid_file"]),
                    run_dir=(str(run_dir[0]), str(run_dir[1]), int(run_dir[2])) if run_dir else None,
                )
            )
        except (KeyError, TypeError, IndexError, ValueError) as error:
            message = "{}[{}]: not a daemon record ({!r}: {})".format(ENABLED_DAEMONS, index, item, error)
            raise ValueError(message) from None
    return daemons


def enable(node: Node, daemon: Daemon) -> None:
    """Record ``daemon`` in :data:`ENABLED_DAEMONS` (no systemd): a daemon enabled again keeps its place."""
    text = read_text(node, ENABLED_DAEMONS)
    try:
        records = [daemon_record(d) for d in enabled_daemons(text)]
    except ValueError:
        records = []  # an unreadable record is rewritten from what this run starts
    mine = daemon_record(daemon)
    units = [r["unit"] for r in records]
    if daemon.unit in units:
        records[units.index(daemon.unit)] = mine
    else:
        records.append(mine)
    write_file(node, ENABLED_DAEMONS, json.dumps(records, indent=2) + "\n", mode=0o644)


def disable(node: Node, daemon: Daemon) -> None:
    """Drop ``daemon`` from :data:`ENABLED_DAEMONS` (no systemd), as ``systemctl disable`` would."""
    try:
        daemons = enabled_daemons(read_text(node, ENABLED_DAEMONS))
    except ValueError:
        return
    kept = [d for d in daemons if d.unit != daemon.unit]
    if len(kept) != len(daemons):
        write_file(node, ENABLED_DAEMONS, json.dumps([daemon_record(d) for d in kept], indent=2) + "\n", mode=0o644)


BOOT_COMMANDS = STATE_DIR + "/boot-commands.json"
"""Without systemd: the one-shot commands the runtime enabled, as ``{"unit": ..., "argv": [...]}`` objects, first
enabled first, as ``systemctl enable`` keeps a ``Type=oneshot`` unit; whatever boots the node runs them before the
daemons of :data:`ENABLED_DAEMONS` (the local cluster's boot: ``hyperpod_local.enabled``)."""


def boot_commands(text: Optional[str]) -> List[Tuple[str, Tuple[str, ...]]]:
    """(unit, argv) of every command :data:`BOOT_COMMANDS` holds (``text`` None: none); ValueError naming what is
    wrong."""
    if text is None:
        return []
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError("{}: not JSON ({})".format(BOOT_COMMANDS, error)) from None
    if not isinstance(data, list):
        raise ValueError("{}: expected a JSON list, got {}".format(BOOT_COMMANDS, type(data).__name__))
    commands = []
    for index, item in enumerate(data):
        try:
            argv = item["argv"]
            if not isinstance(argv, list) or not argv:
                raise ValueError("argv is not a list of words")
            commands.append((str(item["unit"]), tuple(str(a) for a in argv)))
        except (KeyError, TypeError, ValueError) as error:
            message = "{}[{}]: not a boot command ({!r}: {})".format(BOOT_COMMANDS, index, item, error)
            raise ValueError(message) from None
    return commands


def _boot_records(node: Node) -> List[Tuple[str, Tuple[str, ...]]]:
    try:
        return boot_commands(read_text(node, BOOT_COMMANDS))
    except ValueError:
        return []  # an unreadable record is rewritten from what this run enables


def boot_command_enabled(node: Node, unit: str, argv: List[str]) -> bool:
    return (unit, tuple(argv)) in _boot_records(node)


def set_boot_command(node: Node, unit: str, argv: Optional[List[str]]) -> bool:
    """Record ``unit``'s command in :data:`BOOT_COMMANDS` (no systemd), or drop it (``argv`` None); an enabled unit
    keeps its place. True when the record changed."""
    records = _boot_records(node)
    units = [name for name, _ in records]
    if argv is None:
        records = [r for r in records if r[0] != unit]
    elif unit in units:
        records[units.index(unit)] = (unit, tuple(argv))
    else:
        records.append((unit, tuple(argv)))
    text = json.dumps([{"unit": name, "argv": list(words)} for name, words in records], indent=2) + "\n"
    if read_text(node, BOOT_COMMANDS) == text or (not records and read_text(node, BOOT_COMMANDS) is None):
        return False
    write_file(node, BOOT_COMMANDS, text, mode=0o644)
    return True


def start(node: Node, daemon: Daemon) -> None:
    """Start ``daemon`` and have it start again at boot (``systemctl enable --now``, or :func:`enable`)."""
    if node.has_systemd:
        node.run(["systemctl", "enable", "--now", daemon.unit], timeout=120)
        return
    enable(node, daemon)
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

    policy = node.host.controller_wait if running and daemon.needs_controller else node.host.daemon_wait
    policy.call(check, what="{} {}".format(daemon.name, "start" if running else "stop"))


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
