"""The node's files as the guard reads and writes them, under a root (``/`` on a node, a fake root in tests)."""

from __future__ import annotations

import glob
import os
import tempfile
from typing import List, Optional


class Tree:
    """Files of one node, addressed by their path on the node."""

    def __init__(self, root: str = "/") -> None:
        self.root = root

    def host(self, path: str) -> str:
        """``path`` (the node's) under this tree's root."""
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path: str) -> Optional[str]:
        """The file's text, or None when it is missing or not a file."""
        try:
            with open(self.host(path), encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def exists(self, path: str) -> bool:
        return os.path.exists(self.host(path))

    def glob(self, pattern: str) -> List[str]:
        """The files (not directories) that match ``pattern``, as node paths, sorted."""
        found = [p for p in glob.glob(self.host(pattern)) if os.path.isfile(p)]
        return sorted("/" + os.path.relpath(p, self.root) for p in found)

    def write(self, path: str, text: str) -> None:
        """Replace the file atomically (a temporary file in its directory, then a rename): an existing file keeps
        its mode and owner, a new one is root's, 0644 (Slurm's daemons read it as the slurm user)."""
        target = self.host(path)
        directory = os.path.dirname(target)
        try:
            info: Optional[os.stat_result] = os.stat(target)
        except FileNotFoundError:
            info = None
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".hyperpod-cdk-guard.")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temporary, info.st_mode & 0o7777 if info else 0o644)
            if info is not None and os.geteuid() == 0:
                os.chown(temporary, info.st_uid, info.st_gid)
            os.replace(temporary, target)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
