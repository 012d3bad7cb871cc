"""A login pool with one name on a local cluster (issue #41, part 4; HyperPod platform, root only).

The cluster is the directory test's (tests/directory_cluster.py: conftest's ``directory_cluster``, one bring-up for
both modules), whose config has ``login_pool:``: two login nodes, bootstrapped at the same time, race to replace the
control plane's placeholder with a host-key bundle. The load balancer is :class:`hyperpod_local.login_relay.LoginRelay`
on the host (health checks of each node's ``GET /health`` over the bridge, every 0.5 s, 2 in a row to change state).
Checked: both nodes, directly and through the relay, show one host key, the bundle's; a replaced login node shows it
too and ``ssh -o StrictHostKeyChecking=yes`` with a known_hosts holding only the pool's alias (``HostKeyAlias``)
reaches every node; 20 sessions through the relay spread over both nodes; ``login drain`` on one: new sessions all go
to the other while a session already open on the drained one goes on, ``undrain`` brings it back; the private keys
are in no log, no file but sshd's own and no process's command line.
Alone: ``python -m pytest tests/test_local_login_pool.py``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from directory_cluster import LOGIN, LOGIN_2, DirectoryCluster
from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.login_relay import LoginRelay, for_cluster
from local_support import requires_hyperpod_platform
from training_runtime.login_pool.host_keys import KEY_TYPES, parse_bundle
from training_runtime.login_pool.params import DEFAULT_HEALTH_PORT
from training_runtime.steps.login_pool import POOL_PROGRAM

pytestmark = requires_hyperpod_platform

ALIAS = "login-pool.hpcdk.test"
NODES = (LOGIN, LOGIN_2)


@pytest.fixture(scope="module")
def pool(directory_cluster: DirectoryCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    options = {"interval_s": 0.5, "healthy_threshold": 2, "unhealthy_threshold": 2}
    with for_cluster(directory_cluster.local, NODES, DEFAULT_HEALTH_PORT, **options) as relay:
        yield Pool(directory_cluster, relay, tmp_path_factory.mktemp("ssh"))


class Pool:
    """The shared cluster, the relay in front of its login nodes, and an SSH client of root's on the host."""

    def __init__(self, shared: DirectoryCluster, relay: LoginRelay, home: Path) -> None:
        self.shared = shared
        self.local: LocalCluster = shared.local
        self.relay = relay
        self.key = home / "id"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)], check=True)
        bundle = parse_bundle(
            control_plane.secret_store(self.local).op_GetSecretValue(
                {"SecretId": control_plane.login_host_keys_arn(self.local)}
            )["SecretString"]
        )
        assert bundle is not None, "the first login node replaced the placeholder with a bundle"
        self.bundle = bundle
        self.known_hosts = home / "known_hosts"
        self.known_hosts.write_text(f"{ALIAS} {' '.join(bundle['ed25519'][1].split()[:2])}\n")
        for node in NODES:
            self.authorize(node)

    def authorize(self, node: str) -> None:
        """Root's authorized key on ``node`` (a replaced node's disk is new)."""
        script = "umask 077 && mkdir -p /root/.ssh && cat > /root/.ssh/authorized_keys"
        done = self.local.exec(node, ["sh", "-c", script], input=(self.key.parent / "id.pub").read_text())
        assert done.returncode == 0, done.stderr

    def ssh_argv(self, address: str, port: int, command: str) -> list[str]:
        options = {
            "BatchMode": "yes",
            "StrictHostKeyChecking": "yes",
            "UserKnownHostsFile": str(self.known_hosts),
            "GlobalKnownHostsFile": "/dev/null",
            "HostKeyAlias": ALIAS,
            "ConnectTimeout": "10",
        }
        words = [w for key, value in options.items() for w in ("-o", f"{key}={value}")]
        return ["ssh", "-F", "/dev/null", "-i", str(self.key), "-p", str(port), *words, f"root@{address}", command]

    def on_bridge(self, address: str) -> list[str]:
        """The words that run a host command in the switch namespace when ``address`` is a node's (the host has no
        route to the nodes); none for the relay's own address."""
        if address.startswith("127."):
            return []
        return ["ip", "netns", "exec", self.local.namespaces.switch]

    def ssh(self, address: str, port: int, command: str) -> str:
        argv = self.on_bridge(address) + self.ssh_argv(address, port, command)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def through_pool(self, command: str = "hostname") -> str:
        host, port = self.relay.address
        return self.ssh(host, port, command).strip()

    def keyscan(self, address: str, port: int = 22) -> set[str]:
        done = subprocess.run(
            [*self.on_bridge(address), "ssh-keyscan", "-T", "10", "-p", str(port), "-t", ",".join(KEY_TYPES), address],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return {" ".join(line.split()[1:3]) for line in done.stdout.splitlines() if line and not line.startswith("#")}

    def wait_health(self, node: str, healthy: bool, limit_s: float = 20.0) -> float:
        address = self.local.node(node).ip
        started = time.monotonic()
        while self.relay.healthy()[address] != healthy:
            assert time.monotonic() - started < limit_s, f"{node} not {'healthy' if healthy else 'unhealthy'}"
            time.sleep(0.05)
        return time.monotonic() - started


def sessions(pool: Pool, count: int) -> Counter[str]:
    with ThreadPoolExecutor(max_workers=5) as workers:
        return Counter(workers.map(lambda _: pool.through_pool(), range(count)))


def test_both_login_nodes_and_the_pools_name_show_one_host_key_the_bundles(pool: Pool) -> None:
    expected = {" ".join(public.split()[:2]) for _, public in pool.bundle.values()}
    host, port = pool.relay.address
    seen = [pool.keyscan(pool.local.node(n).ip) for n in NODES] + [pool.keyscan(host, port)]
    assert all(keys == expected for keys in seen), seen
    for node in NODES:
        private = pool.local.exec(node, ["stat", "-c", "%a %U", "/etc/ssh/ssh_host_ed25519_key"]).stdout.split()
        assert private == ["600", "root"], (node, private)


def test_every_node_passes_strict_host_key_checking_with_only_the_pools_alias_known(pool: Pool) -> None:
    names = {pool.ssh(pool.local.node(n).ip, 22, "hostname").strip() for n in NODES}
    assert len(names) == 2, names
    assert pool.through_pool() in names


def test_sessions_through_the_pool_spread_over_both_nodes(pool: Pool) -> None:
    split = sessions(pool, 20)
    assert len(split) == 2 and min(split.values()) >= 5, split
    print(f"20 sessions through the pool: {dict(split)}")


def test_a_drained_node_takes_no_new_session_and_keeps_its_open_one_until_undrained(pool: Pool) -> None:
    host, port = pool.relay.address
    held = subprocess.Popen(
        pool.ssh_argv(host, port, "hostname; cat"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert held.stdin is not None and held.stdout is not None
    try:
        where = held.stdout.readline().strip()
        node = next(n for n in NODES if pool.local.exec(n, ["hostname"]).stdout.strip() == where)
        other = next(n for n in NODES if n != node)
        drained = pool.local.exec(node, [POOL_PROGRAM, "drain"])
        assert drained.returncode == 0 and json.loads(drained.stdout) == {"changed": True, "drained": True}
        reaction_s = pool.wait_health(node, healthy=False)
        others = sessions(pool, 10)
        assert set(others) == {pool.local.exec(other, ["hostname"]).stdout.strip()}, others
        held.stdin.write("still here\n")
        held.stdin.flush()
        assert held.stdout.readline() == "still here\n", "the open session on the drained node goes on"
        status = pool.local.exec(node, [POOL_PROGRAM, "status"])
        assert status.returncode == 1 and json.loads(status.stdout)["drained"] is True
        assert pool.local.exec(node, [POOL_PROGRAM, "undrain"]).returncode == 0
        back_s = pool.wait_health(node, healthy=True)
        assert len(sessions(pool, 4)) == 2
        print(f"drain -> no new sessions in {reaction_s:.2f} s, undrain -> back in {back_s:.2f} s (checks every 0.5 s)")
    finally:
        held.kill()
        held.wait()


def test_a_replaced_login_node_serves_the_same_host_key(pool: Pool) -> None:
    if LOGIN not in pool.shared.replaced:  # the directory test replaces it when both modules run
        started = time.monotonic()
        code, output = pool.local.replace(LOGIN)
        assert code == 0, output[-2000:]
        pool.shared.replaced.add(LOGIN)
        print(f"login node replaced in {time.monotonic() - started:.1f} s")
    pool.authorize(LOGIN)
    address = pool.local.node(LOGIN).ip
    assert pool.keyscan(address) == {" ".join(public.split()[:2]) for _, public in pool.bundle.values()}
    assert pool.ssh(address, 22, "hostname").strip()
    pool.wait_health(LOGIN, healthy=True, limit_s=30)


def test_the_private_keys_are_in_no_log_no_other_file_and_no_command_line(pool: Pool) -> None:
    body = {kind: private.splitlines()[2] for kind, (private, _) in pool.bundle.items()}  # key material, no header
    assert pool.shared.lines and not [line for line in pool.shared.lines if any(b in line for b in body.values())]
    for node in NODES:
        upper = pool.local.namespaces.node_dir(node) / "upper"
        found = {
            "/" + str(p.relative_to(upper))
            for p in upper.rglob("*")
            if p.is_file() and not p.is_symlink() and any(b.encode() in p.read_bytes() for b in body.values())
        }
        assert found == {f"/etc/ssh/ssh_host_{kind}_key" for kind in KEY_TYPES}, (node, found)
    others = [
        p
        for p in pool.local.workdir.rglob("*")
        if p.is_file() and "nodes" not in p.relative_to(pool.local.workdir).parts[:1] and p.name != "secrets.json"
    ]
    assert not [p for p in others if any(b.encode() in p.read_bytes() for b in body.values())]
