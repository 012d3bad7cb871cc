"""Root's work in a directory a user can write (a home, its ``.ssh``): through directory descriptors that refuse
symbolic links, never by path.

A user owns every name in their home, so any of them may be a link to a place only root may change (``/etc``, the
cluster's secrets, another user's home), a FIFO that blocks whoever opens it, or a hard link to someone else's file.
So root here:

* opens each directory relative to its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY``: a link is refused;
* opens each file with ``O_NOFOLLOW | O_NONBLOCK`` and, before reading or locking it, checks with ``fstat`` that it
  is a regular file with one link, owned by the user or root, and not larger than :data:`MAX_READ`;
* writes a file as a new temporary one created ``O_EXCL | O_NOFOLLOW`` in the same directory, sets its mode and owner
  on the descriptor, and renames it over the old name (a rename replaces a link, never follows it);
* changes a directory's mode and owner with ``fchmod``/``fchown`` on its descriptor, never ``chmod``/``chown`` by path.

Anything else raises :class:`Refused`; the steps then leave that user's files as they are and say so (one user's
links never stop a node from booting).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Any, List, Optional, Tuple

from training_runtime.files import HolderLock

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_READ = 1 << 20
"""The most root reads of a user's file (an ``authorized_keys`` is a few KiB)."""


class Refused(Exception):
    """A name in a user's directory is not what root may work on (a link, a FIFO, a hard link, someone else's)."""

    def __init__(self, path: str, why: str, fix: str) -> None:
        self.path = path
        super().__init__(
            "{} {}: left as it is (root never follows a link or opens a foreign file in a user's directory). "
            "Fix: {}".format(path, why, fix)
        )


def _refusal(dir_fd: int, name: str, path: str, error: OSError, kind: str) -> Refused:
    try:
        link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        link = False
    if link or error.errno in (errno.ELOOP, errno.EMLINK):  # O_DIRECTORY on a link says ENOTDIR
        return Refused(path, "is a symbolic link", "the user replaces the link with a real " + kind)
    if error.errno == errno.ENOTDIR:
        return Refused(path, "is not a directory", "the user replaces it with a directory")
    return Refused(path, "cannot be opened ({})".format(error.strerror), "check the file system")


class UserDir:
    """An open directory in a user's area; ``uid``/``gid`` are the user's, ``shown`` its path on the node."""

    def __init__(self, fd: int, shown: str, uid: int, gid: int) -> None:
        self.fd, self.shown, self.uid, self.gid = fd, shown, uid, gid

    # --- opening -------------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls, parent: str, name: str, shown: str, uid: int, gid: int, create_mode: Optional[int] = None
    ) -> Optional["UserDir"]:
        """``name`` in ``parent`` (a directory only root writes, opened by its host path). ``create_mode``: make it
        when missing, owned by the user; None: return None when missing."""
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return cls._child(parent_fd, name, shown, uid, gid, create_mode)
        finally:
            os.close(parent_fd)

    def subdir(self, name: str, create_mode: Optional[int] = None) -> Optional["UserDir"]:
        """``name`` in this directory, the same way as :meth:`open`."""
        return self._child(self.fd, name, "{}/{}".format(self.shown, name), self.uid, self.gid, create_mode)

    @classmethod
    def _child(
        cls, dir_fd: int, name: str, shown: str, uid: int, gid: int, create_mode: Optional[int]
    ) -> Optional["UserDir"]:
        made = False
        if create_mode is not None:
            try:
                os.mkdir(name, create_mode, dir_fd=dir_fd)  # mkdir never follows a link: EEXIST
                made = True
            except FileExistsError:
                pass
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise _refusal(dir_fd, name, shown, error, "directory") from None
        directory = cls(fd, shown, uid, gid)
        try:
            info = os.fstat(fd)
            if info.st_uid not in (uid, 0):
                raise Refused(
                    shown, "is owned by uid {}, not {}".format(info.st_uid, uid), "its owner or an admin moves it away"
                )
            if made and create_mode is not None:
                directory.ensure(create_mode)
        except BaseException:
            directory.close()
            raise
        return directory

    # --- this directory ------------------------------------------------------------------------------------------
    def matches(self, mode: int) -> bool:
        info = os.fstat(self.fd)
        return (info.st_mode & 0o7777, info.st_uid, info.st_gid) == (mode, self.uid, self.gid)

    def ensure(self, mode: int) -> bool:
        """Give this directory ``mode`` and the user as owner, on its descriptor; True when anything changed."""
        if self.matches(mode):
            return False
        os.fchown(self.fd, self.uid, self.gid)
        os.fchmod(self.fd, mode)
        return True

    # --- names in it ---------------------------------------------------------------------------------------------
    def exists(self, name: str) -> bool:
        """Whether anything (a link too) has ``name`` here; never follows it."""
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def _checked(self, fd: int, shown: str) -> os.stat_result:
        info = os.fstat(fd)
        why = ""
        if not stat.S_ISREG(info.st_mode):
            why = "is not a regular file"
        elif info.st_nlink != 1:
            why = "has {} hard links".format(info.st_nlink)
        elif info.st_uid not in (self.uid, 0):
            why = "is owned by uid {}, not {}".format(info.st_uid, self.uid)
        elif info.st_size > MAX_READ:
            why = "is larger than {} bytes".format(MAX_READ)
        if why:
            os.close(fd)
            raise Refused(shown, why, "the user replaces it with a regular file of their own")
        return info

    def _open_file(self, name: str) -> Optional[Tuple[int, os.stat_result]]:
        shown = "{}/{}".format(self.shown, name)
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise _refusal(self.fd, name, shown, error, "file") from None
        return fd, self._checked(fd, shown)

    def stat(self, name: str) -> Optional[os.stat_result]:
        """``fstat`` of the regular file ``name`` (None when there is none), checked as :meth:`read` checks it."""
        opened = self._open_file(name)
        if opened is None:
            return None
        os.close(opened[0])
        return opened[1]

    def read(self, name: str) -> Optional[bytes]:
        """The content of the regular file ``name``; None when there is none. Refuses a link and a foreign file."""
        opened = self._open_file(name)
        if opened is None:
            return None
        fd = opened[0]
        try:
            chunks: List[bytes] = []
            size = 0
            while size <= MAX_READ:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
        raise Refused(
            "{}/{}".format(self.shown, name), "is larger than {} bytes".format(MAX_READ), "the user shortens it"
        )

    def read_text(self, name: str) -> Optional[str]:
        data = self.read(name)
        return None if data is None else data.decode("utf-8", errors="replace")

    def write(self, name: str, content: str, mode: int) -> bool:
        """Make ``name`` hold ``content`` with ``mode``, owned by the user; True when anything changed."""
        data = content.encode()
        current = self.read(name)  # refuses a link: the user's own lines in it cannot be kept through one
        info = self.stat(name)
        if (
            current == data
            and info is not None
            and (info.st_mode & 0o7777, info.st_uid, info.st_gid)
            == (
                mode,
                self.uid,
                self.gid,
            )
        ):
            return False
        temporary = ".{}.hyperpod-cdk-{}".format(name, os.urandom(8).hex())
        fd = os.open(temporary, NEW_FILE_FLAGS, 0o600, dir_fd=self.fd)  # O_EXCL: never an existing name or link
        try:
            try:
                os.fchown(fd, self.uid, self.gid)
                os.fchmod(fd, mode)
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=self.fd)
            raise
        os.fsync(self.fd)
        return True

    def lock(self, name: str) -> "UserLock":
        return UserLock(self, name)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "UserDir":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class UserLock(HolderLock):
    """:class:`~training_runtime.files.HolderLock` on a file in a user's directory: created and opened without
    following a link, refused unless it is a regular file with one link owned by the user or root."""

    def __init__(self, directory: UserDir, name: str) -> None:
        super().__init__(Path(directory.shown, name))  # for messages only: never opened by this path
        self.directory, self.name = directory, name

    def open_file(self) -> int:
        try:
            fd = os.open(self.name, LOCK_FLAGS, 0o600, dir_fd=self.directory.fd)
        except OSError as error:
            raise _refusal(self.directory.fd, self.name, str(self.path), error, "file") from None
        self.directory._checked(fd, str(self.path))
        return fd

    def holder(self) -> str:
        try:
            return (self.directory.read_text(self.name) or "").strip()
        except Refused:
            return ""


def make_dirs(root: str, absolute: str, mode: int) -> None:
    """Make the directory ``absolute`` (on the node whose root is the host path ``root``) and its missing parents
    (0755, root's), then give it ``mode`` on its descriptor. Walks down from ``root`` one ``openat`` at a time: below
    a directory someone other than root may write (``/opt/dlami/nvme/tmp`` is 1777), a link is refused, never
    followed, so a user's link cannot make root create or chmod a directory elsewhere."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    shown = ""
    try:
        for part in [p for p in absolute.split("/") if p]:
            info = os.fstat(fd)
            open_to_others = info.st_uid != 0 or bool(info.st_mode & 0o022)
            shown += "/" + part
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            flags = DIR_FLAGS if open_to_others else os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as error:
                raise _refusal(fd, part, shown, error, "directory") from None
            os.close(fd)
            fd = child
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
