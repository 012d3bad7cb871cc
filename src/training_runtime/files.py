"""Writing files the converging way: compare first, write atomically, set mode and owner, report change."""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
from pathlib import Path
from typing import Any, List, Optional, Tuple, Union

from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.retry import NotReady, RetryPolicy

Content = Union[str, bytes]
BEGIN = "# BEGIN hyperpod-cdk {}"
END = "# END hyperpod-cdk {}"


def read_text(node: Node, path: str) -> Optional[str]:
    try:
        return node.path(path).read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _ids(node: Node, owner: str, group: Optional[str]) -> Tuple[int, int]:
    """uid/gid to apply (the node's host looks the names up)."""
    return node.host.ids(owner, group)


def file_matches(
    node: Node, path: str, content: Content, mode: int = 0o644, owner: str = "root", group: Optional[str] = None
) -> bool:
    target = node.path(path)
    try:
        current = target.read_bytes()
        info = target.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    data = content.encode() if isinstance(content, str) else content
    if current != data or (info.st_mode & 0o7777) != mode:
        return False
    return (info.st_uid, info.st_gid) == _ids(node, owner, group)


def write_file(
    node: Node, path: str, content: Content, mode: int = 0o644, owner: str = "root", group: Optional[str] = None
) -> bool:
    """Make ``path`` hold ``content`` with ``mode`` and owner; True when anything changed.

    The new content is written to a temporary file in the same directory with its final mode and owner
    and renamed over the old one, so readers never see a partial file or a secret with loose permissions.
    """
    if file_matches(node, path, content, mode, owner, group):
        return False
    target = node.path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    fd, temporary = tempfile.mkstemp(dir=str(target.parent), prefix="." + target.name + ".")
    try:
        os.fchmod(fd, mode)
        os.fchown(fd, *_ids(node, owner, group))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, str(target))
        _fsync_dir(target.parent)  # the rename itself survives a power loss (the done marker relies on it)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def dir_matches(node: Node, path: str, mode: int = 0o755, owner: str = "root", group: Optional[str] = None) -> bool:
    target = node.path(path)
    if not target.is_dir():
        return False
    info = target.stat()
    return (info.st_mode & 0o7777) == mode and (info.st_uid, info.st_gid) == _ids(node, owner, group)


def ensure_dir(node: Node, path: str, mode: int = 0o755, owner: str = "root", group: Optional[str] = None) -> bool:
    if dir_matches(node, path, mode, owner, group):
        return False
    target = node.path(path)
    target.mkdir(parents=True, exist_ok=True)
    os.chmod(str(target), mode)
    os.chown(str(target), *_ids(node, owner, group))
    return True


def with_block(text: str, name: str, body: str) -> str:
    """``text`` with the managed block ``name`` holding ``body``: replaced in place, or appended once.

    Lines outside the block (other tools', HyperPod's, the user's) are never touched.
    """
    begin, end = BEGIN.format(name), END.format(name)
    block = "{}\n{}{}\n".format(begin, body if body.endswith("\n") or not body else body + "\n", end)
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip("\n") == begin]
    if starts:
        start = starts[0]
        stop = next((i for i in range(start, len(lines)) if lines[i].rstrip("\n") == end), len(lines) - 1)
        return "".join(lines[:start]) + block + "".join(lines[stop + 1 :])
    prefix = text if not text or text.endswith("\n") else text + "\n"
    return prefix + block


def mount_points(root: Path) -> List[str]:
    """The mount points in the mount table under ``root`` (``/proc/self/mountinfo``); [] when unreadable."""
    try:
        text = (root / "proc/self/mountinfo").read_text()
    except OSError:
        return []
    rows = (line.split() for line in text.splitlines())
    return [fields[4].replace("\\040", " ") for fields in rows if len(fields) > 4]


def is_mountpoint(node: Node, path: str) -> bool:
    """Whether ``path`` is a mount point, read from the node's mount table."""
    return (path.rstrip("/") or "/") in mount_points(node.root)


class HolderLock:
    """An exclusive, non-blocking ``flock`` on ``path`` whose holder records who it is, so that whoever gives
    up waiting can name it. Never blocks: :meth:`take` retries under a :class:`RetryPolicy` whose deadline
    always ends the wait (a lock on shared storage held by a hung node must not hang this one too).

    A process that dies loses its lock with it; on FSx for Lustre (mounted with ``flock``) the lock is
    cluster-wide."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: Optional[int] = None

    def open_file(self) -> int:
        """The lock file's descriptor, created when missing (a lock in a user's directory opens it otherwise:
        :class:`training_runtime.user_files.UserLock`)."""
        return os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o644)

    def acquire(self) -> bool:
        """Take the lock if it is free; False if another open file description holds it."""
        fd = self.open_file()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK, errno.EINVAL):
                raise StepFailed(
                    "cannot lock {} ({}): the file system does not support flock. Fix: mount FSx for "
                    "Lustre with the flock option".format(self.path, error)
                ) from None
            raise
        self.fd = fd
        return True

    def take(self, wait: RetryPolicy, what: str) -> None:
        """Acquire within ``wait``'s attempts and deadline; raises :class:`NotReady` when they run out."""

        def attempt() -> None:
            if not self.acquire():
                raise NotReady("{} is held ({})".format(self.path, self.holder() or "holder unknown"))

        wait.call(attempt, what=what)

    def record(self, text: str) -> None:
        """Say who holds the lock, for the error message of a process that gives up waiting."""
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, text.encode(), 0)

    def holder(self) -> str:
        """What the holder recorded ("" if nothing, or no file)."""
        try:
            return self.path.read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            return ""

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "HolderLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
