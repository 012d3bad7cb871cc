"""The local cluster that tests/test_local_directory.py and tests/test_local_login_pool.py share (one bring-up for
both: conftest's session fixture ``directory_cluster``; under pytest-xdist both modules go to one worker,
conftest.SHARED_SCOPES). HyperPod platform: the controller runs Debian's slapd with LDAPS from a CA the test makes
(:mod:`directory_server`), the config's ``directory:`` points every node at it (bind password in the emulated
Secrets Manager), and its ``login_pool:`` puts two login nodes behind one name (their host keys in the control plane's
Secrets Manager). Every process's command line is watched during the bootstrap (:class:`CommandLines`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from directory_server import DirectoryServer, group_ldif, make_tls, user_ldif
from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.plan import UpOptions
from local_support import CPU_CLUSTER, variant
from training_runtime.node import HYPERPOD

CONTROLLER, LOGIN, LOGIN_2, WORKER = "controller-machine-1", "login-group-1", "login-group-2", "worker-group-1-1"
ARN = "arn:aws:secretsmanager:local:000000000000:secret:hpcdk-ldap-bind-AbCdEf"
PASSWORD = f"bind-{os.getpid()}-Zq7w"
SYNC_S = 5
ALICE_UID, CAROL_UID, VISION_GID = 3001, 3003, 5001


def directory_config(workdir: Path, ca: str) -> Path:
    data = yaml.safe_load(CPU_CLUSTER.read_text())
    data["instance_groups"][1]["count"] = 2  # the login pool's two nodes
    data["instance_groups"][2]["count"] = 1
    data["enforce_accounts"] = True
    data["teams"] = [
        {"name": "staff", "users": ["researcher"]},
        {"name": "vision", "directory_group": "vision"},
    ]
    data["directory"] = {
        "uris": [f"ldaps://{CONTROLLER}"],
        "search_base": "dc=hpc,dc=test",
        "bind_dn": "cn=reader,dc=hpc,dc=test",
        "bind_password_secret_arn": ARN,
        "ca_certificate": ca,
        "group_sync_interval_s": SYNC_S,
        "access_filter": "(description=hpc)",
    }
    data["login_pool"] = {}
    path = workdir / "directory-cluster.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class CommandLines:
    """Every process's command line on the host (the nodes' processes included), read every 100 ms while it runs."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            for entry in Path("/proc").iterdir():
                try:
                    self.seen.add((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
                except OSError:
                    continue

    def __enter__(self) -> CommandLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class DirectoryCluster:
    local: LocalCluster
    server: DirectoryServer
    lines: set[str]
    """Every command line seen during the bootstrap of every node."""
    replaced: set[str] = field(default_factory=set)
    """The nodes a test replaced (the next module need not replace one again)."""


def bring_up(workdir: Path) -> Iterator[DirectoryCluster]:
    tls = make_tls(CONTROLLER)
    options = UpOptions(prefix=f"hpdi{os.getpid() % 10000}", subnet="10.228.0.0/24", bootstrap=False)
    cluster = LocalCluster.up(directory_config(workdir, tls.ca), workdir, variant(platform=HYPERPOD), options)
    try:
        control_plane.start(cluster)  # the role's keys (metadata service) and Secrets Manager
        control_plane.put_secret(cluster, ARN, PASSWORD)
        server = DirectoryServer(cluster, CONTROLLER)
        server.start(tls, PASSWORD)
        server.modify(
            "add",
            "\n".join(
                [
                    user_ldif("alice", ALICE_UID, VISION_GID),
                    user_ldif("carol", CAROL_UID, VISION_GID, description="contractor"),
                    group_ldif("vision", VISION_GID, ()),
                ]
            ),
        )
        with CommandLines() as lines:
            cluster.bootstrap_all()  # both login nodes at once: they race for the pool's host keys
            cluster.wait_idle()
        yield DirectoryCluster(cluster, server, lines.seen)
    finally:
        cluster.down()
