"""A step that keeps one daemon running with its current configuration.

It records a digest of the daemon's configuration files when it (re)starts the daemon; a later run
restarts it only when that digest changed, so a re-run leaves a healthy daemon (and its PID) alone.
"""

from __future__ import annotations

import hashlib
from typing import List, Sequence, Tuple

from training_runtime import services
from training_runtime.files import file_matches, read_text, write_file
from training_runtime.node import Node
from training_runtime.paths import STATE_DIR
from training_runtime.services import Daemon
from training_runtime.steps import Step


def config_digest(node: Node, paths: Sequence[str]) -> str:
    """One digest of the files' paths and contents (a missing file counts as empty)."""
    digest = hashlib.sha256()
    for path in paths:
        try:
            content = node.path(path).read_bytes()
        except FileNotFoundError:
            content = b""
        digest.update(path.encode() + b"\0" + content + b"\0")
    return digest.hexdigest()


class RunningDaemon(Step):
    def __init__(self, daemon: Daemon, config_files: Sequence[str] = ()) -> None:
        self.daemon = daemon
        self.config_files = tuple(config_files)
        self.name = "daemon:" + daemon.unit

    @property
    def _digest_file(self) -> str:
        return "{}/daemons/{}.digest".format(STATE_DIR, self.daemon.unit)

    def _digest(self, node: Node) -> str:
        return config_digest(node, self.config_files)

    def _config_changed(self, node: Node) -> bool:
        if not self.config_files:
            return False  # nothing of ours configures it (e.g. HyperPod's daemons): only keep it running
        return (read_text(node, self._digest_file) or "").strip() != self._digest(node)

    def needed(self, node: Node) -> bool:
        return not services.is_running(node, self.daemon) or self._config_changed(node)

    def apply(self, node: Node) -> None:
        digest = self._digest(node)
        if services.is_running(node, self.daemon):
            services.restart(node, self.daemon)
        else:
            services.start(node, self.daemon)
        write_file(node, self._digest_file, digest + "\n", mode=0o600)

    def describe(self, node: Node) -> List[str]:
        if not services.is_running(node, self.daemon):
            how = "systemctl enable --now " + self.daemon.unit if node.has_systemd else " ".join(self.daemon.argv)
            return ["start {}: {}".format(self.daemon.unit, how)]
        return ["restart {}: its configuration changed".format(self.daemon.unit)]


class ServiceFiles(Step):
    """Writes a runtime service's files (its program, its configuration and, with systemd, its unit
    :attr:`unit_file`) and reloads systemd when the unit changed. Subclasses list the files."""

    unit_file = ""

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        """(path, content, mode) of every file, the unit only where the node has systemd."""
        raise NotImplementedError

    def stale(self, node: Node) -> List[str]:
        return [path for path, content, mode in self.files(node) if not file_matches(node, path, content, mode)]

    def needed(self, node: Node) -> bool:
        return bool(self.stale(node))

    def apply(self, node: Node) -> None:
        unit_changed = False
        for path, content, mode in self.files(node):
            changed = write_file(node, path, content, mode=mode)
            unit_changed = unit_changed or (changed and path == self.unit_file)
        if unit_changed:
            node.run(["systemctl", "daemon-reload"], timeout=120)

    def describe(self, node: Node) -> List[str]:
        return ["write " + path for path in self.stale(node)]
