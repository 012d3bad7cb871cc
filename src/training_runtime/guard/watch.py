"""Noticing that a watched file changed: Linux inotify on its directory (through ctypes), else a stat poll.

Directories, not files, are watched: HyperPod's agent and lifecycle scripts replace files (write a temporary,
rename it over the old one), which ends a watch on the old file; a watch on the directory sees the rename
(``IN_MOVED_TO``), a new file (``IN_CREATE``), a write (``IN_CLOSE_WRITE``, ``IN_MODIFY``) and a deletion. A
directory that does not exist yet (slurmd's conf-cache before slurmd first starts) is watched through its nearest
existing parent, for the one name that leads to it. Without inotify (a kernel or a sandbox that refuses it, or the
per-user watch limit reached) :class:`StatPoll` compares the directories' entries every :data:`POLL_S` seconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import time
from typing import Callable, Dict, FrozenSet, List, Optional, Protocol, Tuple

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
IN_ONLYDIR = 0x1000000
CHANGES = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
MASK = CHANGES | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
LOST = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_Q_OVERFLOW
"""A watch that ended or an event queue that overflowed: something may have changed unseen."""
EVENT = struct.Struct("iIII")
POLL_S = 5.0
"""The stat poll's period where inotify is not available."""

Target = Tuple[str, Optional[FrozenSet[str]]]
"""(directory to watch, the entry names that matter in it, or None for every entry)."""


class Watcher(Protocol):
    """What the guard's loop needs of a way to notice changes."""

    kind: str

    def watch(self, directories: List[str]) -> None: ...

    def wait(self, timeout: float) -> bool: ...

    def close(self) -> None: ...


def targets(directories: List[str]) -> List[Target]:
    """Each directory, or for one that does not exist its nearest existing parent and the name leading down; one
    target per directory watched (inotify gives one watch per inode, whoever asks)."""
    names: Dict[str, Optional[FrozenSet[str]]] = {}
    for directory in directories:
        path, name = os.path.normpath(directory), None
        while not os.path.isdir(path) and path != os.path.dirname(path):
            path, name = os.path.dirname(path), os.path.basename(path)
        if name is None or (path in names and names[path] is None):
            names[path] = None
        else:
            names[path] = (names.get(path) or frozenset()) | {name}
    return list(names.items())


class Inotify:
    """Watches directories with inotify; :meth:`wait` returns True when an entry that matters changed."""

    kind = "inotify"

    def __init__(self, libc: Optional[ctypes.CDLL] = None) -> None:
        self.libc = libc or ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            error = ctypes.get_errno()
            raise OSError(error, "inotify_init1: {}".format(os.strerror(error)))
        self.watches: Dict[int, Target] = {}

    def watch(self, directories: List[str]) -> None:
        """Watch exactly ``directories`` (see :func:`targets`); watches no longer wanted are removed."""
        wanted = targets(directories)
        for descriptor, target in list(self.watches.items()):
            if target not in wanted:
                self.libc.inotify_rm_watch(self.fd, descriptor)
                del self.watches[descriptor]
        for target in wanted:
            if target in self.watches.values():
                continue
            descriptor = self.libc.inotify_add_watch(self.fd, target[0].encode(), MASK)
            if descriptor < 0:
                error = ctypes.get_errno()
                raise OSError(error, "inotify_add_watch {}: {}".format(target[0], os.strerror(error)))
            self.watches[descriptor] = target

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True when something that matters changed (events are drained)."""
        ready, _, _ = select.select([self.fd], [], [], max(timeout, 0.0))
        if not ready:
            return False
        changed = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return changed
            offset = 0
            while offset + EVENT.size <= len(data):
                descriptor, mask, _, length = EVENT.unpack_from(data, offset)
                name = data[offset + EVENT.size : offset + EVENT.size + length].split(b"\0", 1)[0].decode()
                offset += EVENT.size + length
                target = self.watches.get(descriptor)
                if mask & LOST:
                    if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                        self.watches.pop(descriptor, None)
                    changed = True
                elif target is not None and (target[1] is None or name in target[1]):
                    changed = True

    def close(self) -> None:
        os.close(self.fd)


class StatPoll:
    """Compares the watched directories' entries (name, inode, size, mtime) every :data:`POLL_S` seconds."""

    kind = "poll"

    def __init__(self, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.sleep, self.clock = sleep, clock
        self.directories: List[Target] = []
        self.seen: Dict[str, object] = {}

    def _signature(self) -> Dict[str, object]:
        found: Dict[str, object] = {}
        for directory, name in self.directories:  # name: the entries that matter (None: all)
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:
                found[directory] = None
                continue
            signature = []
            for entry in entries:
                if name is None or entry.name in name:
                    try:
                        info = entry.stat(follow_symlinks=True)
                    except OSError:
                        continue
                    signature.append((entry.name, info.st_ino, info.st_size, info.st_mtime_ns))
            found[directory] = signature
        return found

    def watch(self, directories: List[str]) -> None:
        self.directories = targets(directories)
        self.seen = self._signature()

    def wait(self, timeout: float) -> bool:
        deadline = self.clock() + max(timeout, 0.0)
        while True:
            self.sleep(min(POLL_S, max(deadline - self.clock(), 0.0)))
            now = self._signature()
            if now != self.seen:
                self.seen = now
                return True
            if self.clock() >= deadline:
                return False

    def close(self) -> None:
        """Nothing to release."""


def watcher() -> Watcher:
    """inotify where the kernel gives it, else the stat poll."""
    try:
        return Inotify()
    except (OSError, AttributeError):
        return StatPoll()
