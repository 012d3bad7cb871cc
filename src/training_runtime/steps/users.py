"""Cluster users: the same name, UID and GID on every node, homes on shared storage, SSH between nodes."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, is_mountpoint, read_text, with_block, write_file
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.steps import Step
from training_runtime.user_files import Refused, UserDir
from training_runtime.users import User

SUDOERS = "/etc/sudoers.d/hyperpod-cdk"
SSH_CLIENT_CONFIG = "/etc/ssh/ssh_config.d/hyperpod-cdk.conf"
KEY_NAME = "id_ed25519"
LOCK_NAME = ".keygen.lock"
HOME_MODE = 0o750
SSH_DIR_MODE = 0o700
KEYGEN_WAIT = RetryPolicy(attempts=None, base_s=0.5, cap_s=5.0, deadline_s=300.0)
"""How long a node waits for another making the same user's key pair on shared storage (ssh-keygen takes
well under a second): then it fails naming the holder instead of hanging behind a hung mount."""


def home(node: Node, user: User) -> str:
    return "{}/{}".format(node.homes_dir.rstrip("/"), user.name)


def _ids(node: Node, user: User) -> Tuple[int, int]:
    """The account's uid and gid on this node; users.json's before the ``users`` step made it (``plan``)."""
    try:
        return node.host.ids(user.name, user.name)
    except KeyError:
        return user.uid, user.gid


def open_home(node: Node, user: User, create: bool = False) -> Optional[UserDir]:
    """The user's home, opened without following a link (:mod:`training_runtime.user_files`); ``create``: made
    (0750, the user's) when missing, else None when missing."""
    homes = node.path(node.homes_dir)
    if create:
        homes.mkdir(parents=True, exist_ok=True)  # the homes directory itself is root's (0755)
    elif not homes.is_dir():
        return None
    uid, gid = _ids(node, user)
    return UserDir.open(str(homes), user.name, home(node, user), uid, gid, HOME_MODE if create else None)


def open_ssh_dir(node: Node, user: User, create: bool = False) -> Optional[UserDir]:
    """The user's ``~/.ssh``, the same way (made 0700 when ``create``)."""
    home_dir = open_home(node, user, create)
    if home_dir is None:
        return None
    with home_dir:
        return home_dir.subdir(".ssh", SSH_DIR_MODE if create else None)


def _table(node: Node, path: str) -> Dict[str, Tuple[str, ...]]:
    """``/etc/passwd`` or ``/etc/group`` of the node as name -> fields."""
    rows: Dict[str, Tuple[str, ...]] = {}
    for line in (read_text(node, path) or "").splitlines():
        fields = tuple(line.split(":"))
        if len(fields) >= 3:
            rows[fields[0]] = fields
    return rows


def _by_id(table: Dict[str, Tuple[str, ...]], number: int) -> Optional[str]:
    return next((name for name, fields in table.items() if fields[2] == str(number)), None)


class Users(Step):
    name = "users"

    def __init__(self, users: List[User]) -> None:
        self.users = users

    def _sudoers(self) -> str:
        names = [u.name for u in self.users if u.sudo]
        lines = ["# Managed by hyperpod-cdk from users.json; edits are overwritten."]
        lines += ["{} ALL=(ALL) NOPASSWD:ALL".format(n) for n in names]
        return "\n".join(lines) + "\n"

    def _conflicts(self, node: Node) -> List[str]:
        passwd, groups = _table(node, "/etc/passwd"), _table(node, "/etc/group")
        problems = []
        for user in self.users:
            existing = passwd.get(user.name)
            if existing and (existing[2], existing[3]) != (str(user.uid), str(user.gid)):
                problems.append(
                    "user {} exists with uid {} gid {} but users.json says {} {}".format(
                        user.name, existing[2], existing[3], user.uid, user.gid
                    )
                )
            holder = _by_id(passwd, user.uid)
            if holder not in (None, user.name):
                problems.append("uid {} of {} is taken by {}".format(user.uid, user.name, holder))
            group_holder = _by_id(groups, user.gid)
            if group_holder not in (None, user.name) and user.name not in groups:
                problems.append("gid {} of {} is taken by group {}".format(user.gid, user.name, group_holder))
        return problems

    def _missing(self, node: Node) -> List[User]:
        passwd = _table(node, "/etc/passwd")
        return [u for u in self.users if u.name not in passwd]

    def _homes_missing(self, node: Node) -> List[User]:
        return [u for u in self.users if not os.path.lexists(str(node.path(home(node, u))))]

    def _home(self, node: Node, user: User) -> None:
        home_dir = open_home(node, user, create=True)
        assert home_dir is not None  # made when missing
        with home_dir:
            home_dir.ensure(HOME_MODE)

    def left_alone(self, node: Node) -> List[str]:
        refused = []
        for user in self.users:
            try:
                home_dir = open_home(node, user)
            except Refused as refusal:
                refused.append(str(refusal))
                continue
            if home_dir is not None:
                home_dir.close()
        return refused

    def _wait_for_homes_mount(self, node: Node) -> None:
        """Homes on FSx for OpenZFS are created on the mounted file system, never on the node's own disk under it
        (HyperPod mounts it before OnInitComplete; a node where it is missing fails instead)."""
        path = node.params.openzfs_mount_path
        if path is None:
            return

        def mounted() -> None:
            if not is_mountpoint(node, path):
                raise NotReady("{} is not mounted".format(path))

        try:
            node.retry.call(mounted, what="FSx for OpenZFS at " + path)
        except NotReady as error:
            raise StepFailed(
                "the users' homes live on FSx for OpenZFS, but {}. HyperPod mounts it before OnInitComplete; check "
                "the cluster's InstanceStorageConfigs (FsxOpenZfsConfig) and the file system's security group "
                "(NFS from the nodes)".format(error)
            ) from None

    def needed(self, node: Node) -> bool:
        return bool(
            self._conflicts(node)
            or self._missing(node)
            or self._homes_missing(node)
            or read_text(node, SUDOERS) != self._sudoers()
        )

    def apply(self, node: Node) -> None:
        conflicts = self._conflicts(node)
        if conflicts:
            raise StepFailed(
                "users.json disagrees with this node's accounts: {}. The runtime never renumbers an existing "
                "account (files on shared storage would change owner). Fix: pick free IDs in users.json".format(
                    "; ".join(conflicts)
                )
            )
        groups = _table(node, "/etc/group")
        self._wait_for_homes_mount(node)
        ensure_dir(node, node.homes_dir, mode=0o755)
        for user in self._missing(node):
            if user.name not in groups:
                node.run(["groupadd", "--gid", str(user.gid), user.name])
            node.run(
                [
                    "useradd",
                    "--uid",
                    str(user.uid),
                    "--gid",
                    str(user.gid),
                    "--home-dir",
                    home(node, user),
                    "--no-create-home",
                    "--shell",
                    user.shell,
                    user.name,
                ]
            )
        for user in self.users:
            try:
                self._home(node, user)
            except Refused as refusal:  # one user's link never stops the node from booting
                log("left-alone", step=self.name, what=str(refusal))
        write_file(node, SUDOERS, self._sudoers(), mode=0o440)

    def describe(self, node: Node) -> List[str]:
        actions = ["useradd {} (uid {}, gid {})".format(u.name, u.uid, u.gid) for u in self._missing(node)]
        actions += ["create home {}".format(home(node, u)) for u in self._homes_missing(node)]
        return actions


class SshBetweenNodes(Step):
    """Each user gets one key pair in their shared home, authorised on every node; the cluster's hosts
    skip host-key checks (replaced nodes come back with new host keys).

    Root works in the user's home only through descriptors that refuse links (:mod:`training_runtime.user_files`)
    and makes the key pair as the user; a user whose ``.ssh`` holds a link is left alone and named in the log."""

    name = "ssh"

    def __init__(self, users: List[User], wait: RetryPolicy = KEYGEN_WAIT) -> None:
        self.users = users
        self.wait = wait

    def _client_config(self, node: Node) -> str:
        instances = node.resources.all_instances()  # a stale worker copy's extra names only widen the pattern
        hosts = sorted({n for i in instances for n in (i.name, i.address, node.slurm_name_of(i))})
        return (
            "# Managed by hyperpod-cdk: hosts of this cluster.\nHost {}\n    StrictHostKeyChecking no\n"
            "    UserKnownHostsFile /dev/null\n    LogLevel ERROR\n".format(" ".join(hosts))
        )

    def _authorized(self, ssh: UserDir, user: User) -> Optional[str]:
        public = ssh.read_text(KEY_NAME + ".pub")
        if public is None:
            return None
        current = ssh.read_text("authorized_keys") or ""
        return with_block(current, "cluster", "\n".join([public.strip(), *user.ssh_public_keys]))

    def _user_needed(self, node: Node, user: User) -> bool:
        ssh = open_ssh_dir(node, user)
        if ssh is None:
            return True
        with ssh:
            ssh.stat(LOCK_NAME)  # refuses a link or a foreign file, as taking the lock would
            wanted = self._authorized(ssh, user)
            return wanted is None or ssh.read_text("authorized_keys") != wanted

    def needed(self, node: Node) -> bool:
        if read_text(node, SSH_CLIENT_CONFIG) != self._client_config(node):
            return True
        for user in self.users:
            try:
                if self._user_needed(node, user):
                    return True
            except Refused:
                continue  # left alone, and said so (left_alone)
        return False

    def left_alone(self, node: Node) -> List[str]:
        refused = []
        for user in self.users:
            try:
                self._user_needed(node, user)
            except Refused as refusal:
                refused.append(str(refusal))
        return refused

    def apply(self, node: Node) -> None:
        write_file(node, SSH_CLIENT_CONFIG, self._client_config(node), mode=0o644)
        for user in self.users:
            try:
                self._apply_user(node, user)
            except Refused as refusal:  # one user's link never stops the node from booting
                log("left-alone", step=self.name, what=str(refusal))

    def _apply_user(self, node: Node, user: User) -> None:
        ssh = open_ssh_dir(node, user, create=True)
        assert ssh is not None  # made when missing
        with ssh:
            ssh.ensure(SSH_DIR_MODE)
            with ssh.lock(LOCK_NAME) as lock:
                try:
                    lock.take(self.wait, what="the ssh key lock of " + user.name)
                except NotReady:
                    raise StepFailed(
                        "gave up after {:.0f} s waiting for {}/.keygen.lock (held by {}): another node is making "
                        "{}'s key pair on the shared file system and has not finished. Fix: look at that node's "
                        "bootstrap log (is the shared file system hung?), then re-run".format(
                            self.wait.deadline_s, ssh.shown, lock.holder() or "an unknown node", user.name
                        )
                    ) from None
                lock.record(node.instance.name)
                if not ssh.exists(KEY_NAME):
                    node.run(  # as the user: ssh-keygen follows links only where the user may write anyway
                        [
                            "runuser",
                            "-u",
                            user.name,
                            "--",
                            "ssh-keygen",
                            "-q",
                            "-t",
                            "ed25519",
                            "-N",
                            "",
                            "-C",
                            "{}@{}".format(user.name, node.params.cluster_name),
                            "-f",
                            "{}/{}".format(ssh.shown, KEY_NAME),
                        ]
                    )
            wanted = self._authorized(ssh, user)
            if wanted is not None:
                ssh.write("authorized_keys", wanted, mode=0o600)

    def describe(self, node: Node) -> List[str]:
        return ["write " + SSH_CLIENT_CONFIG] + [
            "key pair and authorized_keys in {}/.ssh".format(home(node, u)) for u in self.users
        ]
