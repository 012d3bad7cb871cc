"""Links a hostile user plants in their home before a node bootstraps, and the check that root followed none
(issue 39 item 2, review finding H2).

Reusable: the unit tests plant them in a fake node's home (``tests/test_runtime_user_links.py``); a drill on the
local cluster plants the same kinds in a real shared home and checks the same way. Everything works on host paths.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Tuple

SECRET = "ROOT-ONLY-SECRET-6f1c0e"
"""In the file ``key`` links ``id_ed25519.pub`` to: root must never copy it (or any target's text) into the home."""

KINDS = ("directory", "file", "lock", "key", "hardlink", "fifo")
"""``directory``: ``~/.ssh`` links to a root-owned directory; ``file``: ``~/.ssh/authorized_keys`` links to a
shadow-like file; ``lock``: ``~/.ssh/.keygen.lock`` links to a root file root would truncate; ``key``:
``~/.ssh/id_ed25519.pub`` links to a root-only secret; ``hardlink``: ``authorized_keys`` is a second name of the
shadow-like file (possible where ``fs.protected_hardlinks`` is off and both sit on one file system); ``fifo``:
``id_ed25519.pub`` is a FIFO, which would block root's open forever."""

Snapshot = Tuple[int, int, int, object]  # evaluated at import: the runtime tests run on Python 3.8 too


def snapshot(path: Path) -> Snapshot:
    """Owner, group, mode and content (a directory: its names and their contents) of ``path``, without following
    a link."""
    info = path.lstat()
    if stat.S_ISDIR(info.st_mode):
        content: object = sorted((p.name, snapshot(p)) for p in path.iterdir())
    elif stat.S_ISREG(info.st_mode):
        content = path.read_bytes()
    else:
        content = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
    return info.st_uid, info.st_gid, info.st_mode & 0o7777, content


@dataclass
class Planted:
    """The targets outside the home with their state before bootstrap, and the home the user planted links in."""

    home: Path
    kind: str
    before: dict[Path, Snapshot] = field(default_factory=dict)
    texts: dict[Path, bytes] = field(default_factory=dict)
    """What each target file holds: no file in the home may hold it afterwards (root copied nothing out)."""

    def changed(self) -> list[str]:
        """What changed outside the home, and which file in the home holds a target's text (empty: nothing)."""
        problems = []
        for path, was in self.before.items():
            now = snapshot(path)
            if now != was:
                problems.append(f"{path} changed: {was} -> {now}")
        for directory, _, names in os.walk(str(self.home)):  # never follows a link
            for name in names:
                path = Path(directory, name)
                if path.is_symlink() or not path.is_file() or self._is_target(path):
                    continue  # a link, or a second name of the target itself (the planted hard link)
                data = path.read_bytes()
                problems += [f"{path} holds {t}'s text" for t, text in self.texts.items() if text in data]
        return problems

    def _is_target(self, path: Path) -> bool:
        return any(path.samefile(target) for target in self.texts)


def make_targets(outside: Path) -> dict[str, Path]:
    """Root-owned files and a directory outside the home, standing for ``/etc``, ``/etc/shadow`` and a secret."""
    outside.mkdir(parents=True, exist_ok=True)
    directory = outside / "root-dir"
    directory.mkdir(mode=0o755, exist_ok=True)
    (directory / "config").write_text("root's file\n")
    targets = {"directory": directory}
    for name, text, mode in (
        ("shadow", "root:$6$abcdefgh$hash:19000:0:99999:7:::\n", 0o640),
        ("lock-target", "root's data, not to be truncated\n", 0o644),
        ("secret", SECRET + "\n", 0o600),
    ):
        path = outside / name
        path.write_text(text)
        os.chmod(str(path), mode)
        targets[name] = path
    for path in [directory, *directory.iterdir(), *targets.values()]:
        os.lchown(str(path), 0, 0)
    return targets


def plant(home: Path, kind: str, outside: Path, uid: int, gid: int, seen_as: Callable[[Path], str] = str) -> Planted:
    """As the user ``uid`` would: make ``home`` (theirs) and plant ``kind`` (one of :data:`KINDS`) in it, linking
    to root's files made in ``outside``. ``seen_as`` turns a host path into the path the node sees (a link's text:
    a local cluster's node sees its shared directory at ``/fsx``)."""
    targets = make_targets(outside)
    home.mkdir(parents=True, exist_ok=True)
    ssh = home / ".ssh"
    mine = [home]
    if kind == "directory":
        ssh.symlink_to(seen_as(targets["directory"]))
    else:
        ssh.mkdir(exist_ok=True)
        mine.append(ssh)
        key = ssh / "id_ed25519"  # a key pair exists, so root goes on to read the public key
        key.write_text("private\n")
        mine.append(key)
        if kind not in ("key", "fifo"):
            (ssh / "id_ed25519.pub").write_text("ssh-ed25519 AAAAplanted user@cluster\n")
            mine.append(ssh / "id_ed25519.pub")
        if kind == "file":
            (ssh / "authorized_keys").symlink_to(seen_as(targets["shadow"]))
        elif kind == "hardlink":
            os.link(str(targets["shadow"]), str(ssh / "authorized_keys"))
        elif kind == "lock":
            (ssh / ".keygen.lock").symlink_to(seen_as(targets["lock-target"]))
        elif kind == "key":
            (ssh / "id_ed25519.pub").symlink_to(seen_as(targets["secret"]))
        elif kind == "fifo":
            os.mkfifo(str(ssh / "id_ed25519.pub"))
            mine.append(ssh / "id_ed25519.pub")
        else:
            raise ValueError("unknown kind {!r}; known: {}".format(kind, ", ".join(KINDS)))
        mine += [p for p in ssh.iterdir() if p.is_symlink()]
    for path in mine:
        os.lchown(str(path), uid, gid)
    planted = Planted(home=home, kind=kind)
    planted.before = {p: snapshot(p) for p in [targets["directory"], *targets["directory"].iterdir()]}
    planted.before.update({p: snapshot(p) for k, p in targets.items() if k != "directory"})
    planted.texts = {p: p.read_bytes().strip() for p in planted.before if p.is_file()}
    return planted
