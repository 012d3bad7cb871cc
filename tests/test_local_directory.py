"""Users from a real directory on a local cluster (issue #41; HyperPod platform, root only).

Debian's slapd runs on the controller node with LDAPS from a CA this test makes (:mod:`directory_server`); the
config's ``directory:`` points every node at it, with the CA inline and the bind password in the emulated control
plane's Secrets Manager (each node reads it with the role's keys from the metadata service at boot). The team
``vision`` follows the directory group ``vision`` (sync every 5 s). Checked: a directory user resolves on the login
node with the directory's UID beside the declared ``researcher``; one outside the access filter resolves but cannot
log in; the first login (``su -l``: PAM's session, with
pam_mkhomedir) makes the home on the shared file system with the user's owner; the user submits under ``vision``
within the sync interval, and once removed from the group the next job is refused while the running one goes on and
the association stays; a replaced login node resolves the same UID; the bind password is in no file a node wrote but
sssd.conf and SSSD's own configuration database (0600, root), in no log and in no process's command line; with sshd
running on the login node (the login pool's step starts it, as HyperPod's AMI runs it), a key kept in the
directory (``sshPublicKey``) logs the user in. pam_slurm_adopt is
unit-tested (tests/test_runtime_directory.py): the emulated HyperPod slurm.conf does not meet its conditions.
The cluster (tests/directory_cluster.py) also has a login pool: tests/test_local_login_pool.py shares it.
Alone: ``python -m pytest tests/test_local_directory.py``.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from directory_cluster import (
    ALICE_UID,
    CAROL_UID,
    CONTROLLER,
    LOGIN,
    PASSWORD,
    SYNC_S,
    VISION_GID,
    WORKER,
    DirectoryCluster,
)
from hyperpod_local import LocalCluster
from local_support import requires_hyperpod_platform

pytestmark = requires_hyperpod_platform


@pytest.fixture(scope="module")
def cluster(directory_cluster: DirectoryCluster) -> tuple[LocalCluster, object, set[str]]:
    """The shared cluster (conftest's ``directory_cluster``, also tests/test_local_login_pool.py's)."""
    return directory_cluster.local, directory_cluster.server, directory_cluster.lines


def run(cluster: LocalCluster, node: str, *argv: str, input: str | None = None) -> str:
    done = cluster.exec(node, list(argv), timeout=60, input=input)
    assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
    return done.stdout


def as_user(cluster: LocalCluster, node: str, user: str, command: str) -> tuple[int, str]:
    """``command`` in ``user``'s login shell through PAM (su -l: auth, account and session stacks)."""
    done = cluster.exec(node, ["su", "-l", user, "-c", command], timeout=60)
    return done.returncode, done.stdout + done.stderr


def wait_for(what: str, check: object, limit_s: float) -> float:
    started = time.monotonic()
    while True:
        if check():  # type: ignore[operator]
            return time.monotonic() - started
        if time.monotonic() - started > limit_s:
            raise AssertionError(f"{what}: not within {limit_s} s")
        time.sleep(0.5)


def test_a_directory_user_resolves_with_the_directorys_ids_beside_a_declared_user(cluster: tuple) -> None:
    local, _, _ = cluster
    entry = run(local, LOGIN, "getent", "passwd", "alice").strip().split(":")
    assert entry[2:4] == [str(ALICE_UID), str(VISION_GID)] and entry[5] == "/fsx/home/alice", entry
    assert f"gid={VISION_GID}(vision)" in run(local, LOGIN, "id", "alice")
    assert run(local, LOGIN, "getent", "passwd", "researcher").split(":")[2] == "2001"
    sssd_conf = run(local, LOGIN, "stat", "-c", "%a %U", "/etc/sssd/sssd.conf").split()
    assert sssd_conf == ["600", "root"]


def test_the_first_login_makes_the_home_on_the_shared_file_system_with_the_users_owner(cluster: tuple) -> None:
    local, _, _ = cluster
    home = local.workdir / "shared" / "home" / "alice"
    assert not home.exists()
    code, output = as_user(local, LOGIN, "alice", "id -u; pwd")
    assert code == 0 and output.split()[:2] == [str(ALICE_UID), "/fsx/home/alice"], output
    info = home.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (ALICE_UID, VISION_GID, 0o750)


def test_a_key_kept_in_the_directory_logs_the_user_in_over_ssh(cluster: tuple, tmp_path: Path) -> None:
    local, server, _ = cluster
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "key")], check=True)
    server.add_key("alice", (tmp_path / "key.pub").read_text())
    effective = run(local, LOGIN, "sshd", "-T")  # sshd's effective settings, keywords in lower case
    assert "authorizedkeyscommand /usr/bin/sss_ssh_authorizedkeys" in effective
    # sshd runs: the login pool's step started it where the node has no systemd, as HyperPod's AMI runs it.
    run(local, LOGIN, "sh", "-c", "umask 077 && cat > /root/alice-key", input=(tmp_path / "key").read_text())
    options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    run(local, LOGIN, "sss_cache", "-u", "alice")  # SSSD's cached entry predates the key (docs/directory.md)
    served = local.exec(LOGIN, ["sss_ssh_authorizedkeys", "alice"])
    assert served.stdout.strip() == (tmp_path / "key.pub").read_text().strip(), served.stdout + served.stderr
    answer = run(local, LOGIN, "ssh", "-i", "/root/alice-key", *options, "alice@127.0.0.1", "id -u; pwd")
    assert answer.split()[:2] == [str(ALICE_UID), "/fsx/home/alice"], answer


def test_a_user_outside_the_access_filter_resolves_but_cannot_log_in(cluster: tuple) -> None:
    local, _, _ = cluster
    assert run(local, LOGIN, "id", "-u", "carol").strip() == str(CAROL_UID)
    code, output = as_user(local, LOGIN, "carol", "true")
    assert code != 0 and "denied" in output.lower(), output
    assert not (local.workdir / "shared" / "home" / "carol").exists()


def test_a_group_member_submits_under_the_team_and_a_leaver_is_refused_new_jobs_only(cluster: tuple) -> None:
    local, server, _ = cluster
    server.set_members("vision", ("alice",))

    def submits() -> bool:
        return as_user(local, LOGIN, "alice", "sbatch --parsable -A vision --wrap 'sleep 120'")[0] == 0

    joined_s = wait_for("alice may submit under vision", submits, 3 * SYNC_S + 10)
    running = run(local, LOGIN, "squeue", "-h", "-u", "alice", "-o", "%i %a").split()
    assert running[1] == "vision", running
    server.set_members("vision", ())

    def refused() -> bool:
        code, output = as_user(local, LOGIN, "alice", "sbatch -A vision --wrap true")
        return code != 0 and "Job violates accounting/QOS policy" in output

    left_s = wait_for("alice is refused new jobs", refused, 3 * SYNC_S + 10)
    assert running[0] in run(local, LOGIN, "squeue", "-h", "-u", "alice", "-o", "%i"), "the running job goes on"
    kept = run(
        local, CONTROLLER, "sacctmgr", "-n", "-P", "show", "assoc", "where", "user=alice", "format=account,maxsubmit"
    )
    assert kept.split() == ["vision|0"], kept
    log = run(local, CONTROLLER, "cat", "/var/log/hyperpod-cdk/directory-sync.log")
    assert "+ user alice in account vision" in log and "- user alice in account vision: new jobs refused" in log
    run(local, LOGIN, "scancel", "-u", "alice")
    print(f"directory change -> sbatch accepted {joined_s:.1f} s, -> refused {left_s:.1f} s (sync every {SYNC_S} s)")


def test_the_bind_password_is_only_in_sssds_files_never_in_a_log_or_a_command_line(cluster: tuple) -> None:
    local, _, lines = cluster
    secret = PASSWORD.encode()
    assert lines and not [line for line in lines if PASSWORD in line]
    holding: dict[str, list[str]] = {}
    for node in (CONTROLLER, LOGIN, WORKER):
        upper = local.namespaces.node_dir(node) / "upper"
        found = [p for p in upper.rglob("*") if p.is_file() and not p.is_symlink() and secret in p.read_bytes()]
        holding[node] = sorted("/" + str(p.relative_to(upper)) for p in found)
        for path in found:
            info = path.stat()
            assert (info.st_mode & 0o777, info.st_uid) == (0o600, 0), path
    for node, paths in holding.items():
        expected = {"/etc/sssd/sssd.conf", "/var/lib/sss/db/config.ldb"}
        if node == CONTROLLER:
            expected |= {p for p in paths if p.startswith("/var/lib/ldap-hpcdk-test/")}  # the server's own database
        assert "/etc/sssd/sssd.conf" in paths and set(paths) <= expected, (node, paths)
    others = [
        p
        for p in local.workdir.rglob("*")
        if p.is_file() and "nodes" not in p.relative_to(local.workdir).parts[:1] and p.name != "secrets.json"
    ]
    assert not [p for p in others if secret in p.read_bytes()]


def test_a_replaced_node_resolves_the_same_uid(directory_cluster: DirectoryCluster) -> None:
    local = directory_cluster.local
    code, output = local.replace(LOGIN)
    assert code == 0, output[-2000:]
    directory_cluster.replaced.add(LOGIN)  # tests/test_local_login_pool.py checks its host keys
    assert run(local, LOGIN, "id", "-u", "alice").strip() == str(ALICE_UID)
