"""The cluster's users file (``users.json`` in the lifecycle prefix): POSIX users with stable IDs.

The same rules check a config at synth time (``users_problems``) and the file on the node.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

from training_runtime.errors import InputError
from training_runtime.problems import Problem, RuleBook

USERS_FILE = "users.json"
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
MIN_ID = 2000
"""IDs below this are left to the distro and HyperPod's own users."""
MAX_ID = 60000
SSH_KEY = re.compile(
    r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh.com) [A-Za-z0-9+/=]+( .*)?$"
)


class UsersError(InputError):
    subject = "users file"


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    shell: str = "/bin/bash"
    sudo: bool = False
    ssh_public_keys: Tuple[str, ...] = ()


def users_problems(raw: Any, path: str = "users") -> List[Problem]:
    problems: List[Problem] = []
    _parse(raw, path, problems)
    return problems


def parse_users(raw: Any, path: str = "users") -> List[User]:
    problems: List[Problem] = []
    users = _parse(raw, path, problems)
    if problems:
        raise UsersError(problems)
    return users


def load_users(assets_dir: Path) -> List[User]:
    """Users from the lifecycle prefix; none when the file is absent."""
    target = assets_dir / USERS_FILE
    if not target.is_file():
        return []
    try:
        data = json.loads(target.read_text())
    except ValueError as error:
        raise UsersError(["{}: not valid JSON: {}".format(target, error)]) from None
    return parse_users(data.get("users") if isinstance(data, Mapping) else data, USERS_FILE + ".users")


def dumps(users: List[User]) -> str:
    return json.dumps(
        {"users": [dict(u.__dict__, ssh_public_keys=list(u.ssh_public_keys)) for u in users]}, indent=2, sort_keys=True
    )


def _parse(raw: Any, path: str, problems: List[Problem]) -> List[User]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(_p("{}: got {!r}; expected a list of users".format(path, raw), "USR-SHAPE"))
        return []
    users: List[User] = []
    names: Dict[Any, str] = {}
    uids: Dict[Any, str] = {}
    gids: Dict[Any, str] = {}
    for index, item in enumerate(raw):
        where = "{}[{}]".format(path, index)
        if not isinstance(item, Mapping):
            problems.append(_p("{}: got {!r}; expected a mapping with name and uid".format(where, item), "USR-SHAPE"))
            continue
        unknown = sorted(set(item) - {"name", "uid", "gid", "shell", "sudo", "ssh_public_keys"})
        for key in unknown:
            problems.append(
                _p(
                    "{}.{}: unknown field; allowed: name, uid, gid, shell, sudo, ssh_public_keys".format(where, key),
                    "USR-SHAPE",
                )
            )
        before = len(problems)
        name = item.get("name")
        if not isinstance(name, str) or not USER_NAME.fullmatch(name):
            problems.append(
                _p(
                    "{}.name: got {!r}; use a lowercase POSIX name (letters, digits, _ and -, at most 32)".format(
                        where, name
                    ),
                    "USR-NAME",
                )
            )
        uid = item.get("uid")
        gid = item.get("gid", uid)
        for key, value in (("uid", uid), ("gid", gid)):
            if not isinstance(value, int) or isinstance(value, bool) or not MIN_ID <= value <= MAX_ID:
                problems.append(
                    _p(
                        "{}.{}: got {!r}; give a fixed number from {} to {} so files on shared storage keep "
                        "their owner on every node".format(where, key, value, MIN_ID, MAX_ID),
                        "USR-ID",
                    )
                )
        shell = item.get("shell", "/bin/bash")
        if not isinstance(shell, str) or not shell.startswith("/"):
            problems.append(_p("{}.shell: got {!r}; expected an absolute path".format(where, shell), "USR-SHELL"))
        sudo = item.get("sudo", False)
        if not isinstance(sudo, bool):
            problems.append(_p("{}.sudo: got {!r}; expected true or false".format(where, sudo), "USR-SHAPE"))
        keys = item.get("ssh_public_keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) and SSH_KEY.fullmatch(k) for k in keys):
            problems.append(
                _p(
                    "{}.ssh_public_keys: got {!r}; expected a list of OpenSSH public keys "
                    "('ssh-ed25519 AAAA...')".format(where, keys),
                    "USR-SSH-KEY",
                )
            )
        if len(problems) > before:
            continue
        for index_map, key, value in ((names, "name", name), (uids, "uid", uid), (gids, "gid", gid)):
            if value in index_map:
                problems.append(
                    _p("{}.{}: {!r} is already used by {}".format(where, key, value, index_map[value]), "USR-UNIQUE")
                )
            index_map.setdefault(value, where)
        users.append(User(str(name), int(str(uid)), int(str(gid)), str(shell), bool(sudo), tuple(keys)))
    return users


def _p(text: str, rule: str) -> Problem:
    return Problem.from_text(text, rule=rule)


USER_RULES = RuleBook("users")
"""The users rules; one parsing pass checks them all (:func:`users_problems`)."""
for _id, _field, _doc in (
    ("USR-SHAPE", "users[*]", "users is a list of mappings with the known fields and value types."),
    ("USR-NAME", "users[*].name", "A user name is a lowercase POSIX name of at most 32 characters."),
    ("USR-ID", "users[*].{uid,gid}", "uid and gid are fixed numbers from 2000 to 60000, the same on every node."),
    ("USR-SHELL", "users[*].shell", "The login shell is an absolute path."),
    ("USR-SSH-KEY", "users[*].ssh_public_keys", "Each SSH key is an OpenSSH public key line."),
    ("USR-UNIQUE", "users[*].{name,uid,gid}", "Names, uids and gids are unique across the users."),
):
    USER_RULES.declare(_id, "users", _field, _doc, users_problems, source="hyperpod-cdk; useradd(8)")
