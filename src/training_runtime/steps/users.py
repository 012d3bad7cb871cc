"""Cluster users: the same name, UID and GID on every node, homes on shared storage, SSH between nodes."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import HolderLock, ensure_dir, is_mountpoint, read_text, with_block, write_file
from training_runtime.node import Node
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.steps import Step
from training_runtime.users import User

SUDOERS = "/etc/sudoers.d/hyperpod-cdk"
SSH_CLIENT_CONFIG = "/etc/ssh/ssh_config.d/hyperpod-cdk.conf"
KEY_NAME = "id_ed25519"
KEYGEN_WAIT = RetryPolicy(attempts=None, base_s=0.5, cap_s=5.0, deadline_s=300.0)
"""How long a node waits for another making the same user's key pair on shared storage (ssh-keygen takes
well under a second): then it fails naming the holder instead of hanging behind a hung mount."""


def home(node: Node, user: User) -> str:
    return "{}/{}".format(node.params.homes_dir.rstrip("/"), user.name)


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
        return [u for u in self.users if not node.path(home(node, u)).is_dir()]

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
        ensure_dir(node, node.params.homes_dir, mode=0o755)
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
            ensure_dir(node, home(node, user), mode=0o750, owner=user.name, group=user.name)
        write_file(node, SUDOERS, self._sudoers(), mode=0o440)

    def describe(self, node: Node) -> List[str]:
        actions = ["useradd {} (uid {}, gid {})".format(u.name, u.uid, u.gid) for u in self._missing(node)]
        actions += ["create home {}".format(home(node, u)) for u in self._homes_missing(node)]
        return actions


class SshBetweenNodes(Step):
    """Each user gets one key pair in their shared home, authorised on every node; the cluster's hosts
    skip host-key checks (replaced nodes come back with new host keys)."""

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

    def _authorized(self, node: Node, user: User) -> Optional[str]:
        public = read_text(node, "{}/.ssh/{}.pub".format(home(node, user), KEY_NAME))
        if public is None:
            return None
        current = read_text(node, "{}/.ssh/authorized_keys".format(home(node, user))) or ""
        return with_block(current, "cluster", "\n".join([public.strip(), *user.ssh_public_keys]))

    def needed(self, node: Node) -> bool:
        if read_text(node, SSH_CLIENT_CONFIG) != self._client_config(node):
            return True
        for user in self.users:
            wanted = self._authorized(node, user)
            if wanted is None or read_text(node, "{}/.ssh/authorized_keys".format(home(node, user))) != wanted:
                return True
        return False

    def apply(self, node: Node) -> None:
        write_file(node, SSH_CLIENT_CONFIG, self._client_config(node), mode=0o644)
        for user in self.users:
            ssh_dir = home(node, user) + "/.ssh"
            ensure_dir(node, ssh_dir, mode=0o700, owner=user.name, group=user.name)
            with HolderLock(node.path(ssh_dir + "/.keygen.lock")) as lock:
                try:
                    lock.take(self.wait, what="the ssh key lock of " + user.name)
                except NotReady:
                    raise StepFailed(
                        "gave up after {:.0f} s waiting for {}/.keygen.lock (held by {}): another node is making "
                        "{}'s key pair on the shared file system and has not finished. Fix: look at that node's "
                        "bootstrap log (is the shared file system hung?), then re-run".format(
                            self.wait.deadline_s, ssh_dir, lock.holder() or "an unknown node", user.name
                        )
                    ) from None
                lock.record(node.instance.name)
                if not node.path("{}/{}".format(ssh_dir, KEY_NAME)).exists():
                    node.run(
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
                            "{}/{}".format(ssh_dir, KEY_NAME),
                        ]
                    )
            wanted = self._authorized(node, user)
            if wanted is not None:
                write_file(node, ssh_dir + "/authorized_keys", wanted, mode=0o600, owner=user.name, group=user.name)

    def describe(self, node: Node) -> List[str]:
        return ["write " + SSH_CLIENT_CONFIG] + [
            "key pair and authorized_keys in {}/.ssh".format(home(node, u)) for u in self.users
        ]
