"""Root never follows a link a user plants in their home (issue 39 item 2, review finding H2).

Every kind of link in ``tests/hostile_home.py`` is planted in alice's shared home before the ``users`` and ``ssh``
steps run as root: nothing outside the home changes, no root file's text lands in the home, the node still
converges (one user's links never stop it booting) and the step names what it left alone.
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hostile_home import KINDS, plant
from runtime_fakes import FakeHost, RecordingRunner, fake_node, touch
from training_runtime.node import Node
from training_runtime.steps.users import SshBetweenNodes, Users
from training_runtime.user_files import Refused, UserDir
from training_runtime.users import User

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's files needs root")

ALICE = User("alice", 12345, 12345, ssh_public_keys=("ssh-ed25519 AAAAC3Nza alice@laptop",))
BOB = User("bob", 12346, 12346, ssh_public_keys=())


class Blocked(BaseException):
    """Raised by :func:`deadline`; not an OSError, so no ``except OSError`` in the code under test swallows it."""


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (a FIFO opened without O_NONBLOCK blocks forever)."""

    def expired(*_: Any) -> None:
        raise Blocked(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _keygen(root: Path, ids: dict[str, int]) -> RecordingRunner:
    """A runner whose ``runuser -u <user> -- ssh-keygen ... -f <path>`` makes the user's key pair."""
    runner = RecordingRunner()

    def make(argv: list[str]) -> None:
        if argv[:1] == ["runuser"] and "ssh-keygen" in argv:
            for path in (argv[-1], argv[-1] + ".pub"):
                made = touch(root, path, f"ssh-ed25519 AAAAmade{argv[2]} {argv[2]}\n")
                os.chown(str(made), ids[argv[2]], ids[argv[2]])

    runner.hooks.append(make)
    return runner


def _node(root: Path) -> Node:
    host = FakeHost("workers-1", accounts={"alice": (12345, 12345), "bob": (12346, 12346)})
    node = fake_node(root, host=host, runner=_keygen(root, {"alice": 12345, "bob": 12346}))
    passwd = "alice:x:12345:12345::/fsx/home/alice:/bin/bash\nbob:x:12346:12346::/fsx/home/bob:/bin/sh\n"
    touch(root, "/etc/passwd", passwd)
    touch(root, "/etc/group", "alice:x:12345:\nbob:x:12346:\n")
    node.path("/fsx/home").mkdir(parents=True)
    return node


@pytest.mark.parametrize("kind", KINDS)
def test_root_follows_no_link_a_user_plants_in_their_home(tmp_path: Path, kind: str) -> None:
    node = _node(tmp_path / "node")
    planted = plant(node.path("/fsx/home/alice"), kind, tmp_path / "outside", 12345, 12345)
    with deadline(10):
        for step in (Users([ALICE, BOB]), SshBetweenNodes([ALICE, BOB])):
            step.apply(node)
            assert not step.needed(node), f"{step.name} does not converge: the node would fail to boot"
        (refusal,) = SshBetweenNodes([ALICE, BOB]).left_alone(node)
    assert planted.changed() == []
    assert refusal.startswith("/fsx/home/alice/.ssh") and "left as it is" in refusal and "Fix:" in refusal
    # bob, whose home holds no link, gets his key pair made and authorised as before
    assert isinstance(node.runner, RecordingRunner)
    assert node.runner.ran("runuser", "-u", "bob", "--", "ssh-keygen")[0][-1] == "/fsx/home/bob/.ssh/id_ed25519"
    assert "AAAAmadebob" in node.path("/fsx/home/bob/.ssh/authorized_keys").read_text()


def test_a_planted_ssh_directory_link_keeps_its_target_root_s(tmp_path: Path) -> None:
    """The reproduction in the review: a root-owned 0755 directory became uid 12345, 0700."""
    node = _node(tmp_path / "node")
    planted = plant(node.path("/fsx/home/alice"), "directory", tmp_path / "outside", 12345, 12345)
    SshBetweenNodes([ALICE]).apply(node)
    info = (tmp_path / "outside/root-dir").stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o755)
    assert planted.changed() == []
    assert isinstance(node.runner, RecordingRunner)
    assert node.runner.ran("runuser") == []  # no key pair made through the link either


def test_a_clean_home_gets_its_ssh_directory_and_keys_owned_by_the_user(tmp_path: Path) -> None:
    node = _node(tmp_path / "node")
    Users([ALICE]).apply(node)
    step = SshBetweenNodes([ALICE])
    step.apply(node)
    ssh = node.path("/fsx/home/alice/.ssh")
    assert (ssh.stat().st_uid, stat.S_IMODE(ssh.stat().st_mode)) == (12345, 0o700)
    assert stat.S_IMODE(node.path("/fsx/home/alice").stat().st_mode) == 0o750
    touch(node.root, "/fsx/home/alice/.ssh/id_ed25519.pub", "ssh-ed25519 AAAAgenerated alice@test\n")
    os.chown(str(ssh / "id_ed25519.pub"), 12345, 12345)
    step.apply(node)
    keys = ssh / "authorized_keys"
    assert (keys.stat().st_uid, stat.S_IMODE(keys.stat().st_mode)) == (12345, 0o600)
    assert "AAAAgenerated" in keys.read_text() and "alice@laptop" in keys.read_text()
    assert not step.needed(node) and step.left_alone(node) == []
    assert [p.name for p in ssh.iterdir() if p.name.startswith(".authorized_keys")] == []  # no temporary left


def test_a_file_owned_by_another_user_is_not_read(tmp_path: Path) -> None:
    """A file in the user's directory that someone else owns (bob's, moved in by a careless admin) is refused."""
    node = _node(tmp_path / "node")
    planted = plant(node.path("/fsx/home/alice"), "lock", tmp_path / "outside", 12345, 12345)
    (planted.home / ".ssh/.keygen.lock").unlink()
    foreign = planted.home / ".ssh/authorized_keys"
    foreign.write_text("bob's private notes\n")
    os.chown(str(foreign), 12346, 12346)
    directory = UserDir.open(str(planted.home.parent), "alice", "/fsx/home/alice", 12345, 12345)
    assert directory is not None
    with directory:
        ssh = directory.subdir(".ssh")
        assert ssh is not None
        with ssh, pytest.raises(Refused, match=r"authorized_keys is owned by uid 12346, not 12345"):
            ssh.read("authorized_keys")
    assert SshBetweenNodes([ALICE]).left_alone(node) != []


def test_a_lock_link_is_refused_not_created_through(tmp_path: Path) -> None:
    node = _node(tmp_path / "node")
    home = node.path("/fsx/home/alice")
    home.mkdir()
    (home / ".ssh").mkdir()
    (home / ".ssh/.keygen.lock").symlink_to(tmp_path / "would-be-created")  # a dangling link: O_CREAT follows it
    SshBetweenNodes([ALICE]).apply(node)
    assert not (tmp_path / "would-be-created").exists()


def test_users_step_refuses_a_home_that_is_a_link(tmp_path: Path) -> None:
    """Only root writes the homes directory; should a home there be a link anyway, root neither chowns nor
    chmods its target."""
    node = _node(tmp_path / "node")
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    node.path("/fsx/home/alice").symlink_to(target)
    step = Users([ALICE])
    step.apply(node)
    assert (target.stat().st_uid, stat.S_IMODE(target.stat().st_mode)) == (0, 0o755)
    assert not step.needed(node)
    (refusal,) = step.left_alone(node)
    assert refusal.startswith("/fsx/home/alice is a symbolic link")
