"""The node runtime's steps, planned and applied against a fake root with a recording runner."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from runtime_fakes import FakeHost, RecordingRunner, fake_node, running_daemon, touch
from training_runtime.apt import apt_install_argv
from training_runtime.errors import StepFailed
from training_runtime.files import with_block
from training_runtime.node import HYPERPOD_MARKER, Node
from training_runtime.plan import DONE_MARKER, STATE_FILE, StepError, apply_plan
from training_runtime.steps import Step
from training_runtime.steps.accounting import (
    DB_PASSWORD_FILE,
    DB_SERVER_CONF,
    MARIADB,
    AccountingCluster,
    LocalDatabase,
    SlurmdbdConfig,
)
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.munge import NODE_KEY, MungeKey, shared_key
from training_runtime.steps.observability import observability_steps
from training_runtime.steps.slurm import SlurmConfig, conf_path
from training_runtime.steps.storage import LustreMount, SharedStorage, fstab_line
from training_runtime.steps.system import ClusterHosts, Packages
from training_runtime.steps.users import SSH_CLIENT_CONFIG, SUDOERS, SshBetweenNodes, Users
from training_runtime.users import User

INSTALLED = (0, "install ok installed")
ACCOUNTING = {"accounting": {"enabled": True}}


def names(steps: list[Step]) -> list[str]:
    return [s.name for s in steps]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- managed blocks -----------------------------------------------------------------------------


def test_managed_block_is_replaced_in_place_and_other_lines_are_kept() -> None:
    first = with_block("127.0.0.1 localhost\n", "cluster", "10.0.0.1 a")
    second = with_block(first + "10.9.9.9 mine\n", "cluster", "10.0.0.2 b")
    assert second.splitlines() == [
        "127.0.0.1 localhost",
        "# BEGIN hyperpod-cdk cluster",
        "10.0.0.2 b",
        "# END hyperpod-cdk cluster",
        "10.9.9.9 mine",
    ]
    assert with_block(second, "cluster", "10.0.0.2 b") == second


# --- system ------------------------------------------------------------------------------------


def test_hosts_lists_every_instance_once_and_keeps_the_rest(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    touch(tmp_path, "/etc/hosts", "127.0.0.1 localhost\n192.0.2.9 printer\n")
    step = ClusterHosts()
    assert step.needed(node)
    step.apply(node)
    hosts = (tmp_path / "etc/hosts").read_text()
    assert "10.1.0.11 workers-1" in hosts and "10.1.0.10 controller-1" in hosts and "192.0.2.9 printer" in hosts
    assert not step.needed(node)


def test_hosts_adds_no_name_the_file_already_maps_to_that_address(tmp_path: Path) -> None:
    """A name listed twice resolves twice (Debian's multi on): hostname --ip-address would print two addresses."""
    node = fake_node(tmp_path)
    touch(tmp_path, "/etc/hosts", "127.0.0.1 localhost\n10.1.0.11 workers-1 ip-10-1-0-11\n10.9.9.9 controller-1\n")
    ClusterHosts().apply(node)
    hosts = (tmp_path / "etc/hosts").read_text()
    assert hosts.count("workers-1") == 1, hosts
    assert "10.1.0.10 controller-1" in hosts, "a name mapped elsewhere still gets the cluster's address"
    ClusterHosts().apply(node)
    assert (tmp_path / "etc/hosts").read_text() == hosts, "a re-run changes nothing"


def test_packages_installs_only_what_is_missing(tmp_path: Path) -> None:
    runner = RecordingRunner({("dpkg-query", "-W", "-f=${Status}", "munge"): INSTALLED})
    node = fake_node(tmp_path, runner=runner)
    touch(tmp_path, "/usr/bin/apt-get").chmod(0o755)
    step = Packages(["munge", "slurmd"], "slurm")
    assert step.missing(node) == ["slurmd"]
    step.apply(node)
    install = [c for c in runner.ran("apt-get") if "install" in c]
    assert install == [apt_install_argv(["slurmd"])]
    assert "DPkg::Lock::Timeout=300" in install[0] and install[0][-1] == "slurmd"


def test_packages_without_apt_fail_with_a_fix(tmp_path: Path) -> None:
    node = fake_node(tmp_path, runner=RecordingRunner({("dpkg-query",): (1, "")}))
    with pytest.raises(StepFailed, match="Debian and Ubuntu"):
        Packages(["munge"], "slurm").apply(node)


def test_role_packages(tmp_path: Path) -> None:
    from training_runtime.steps.catalog import packages_for

    assert packages_for(fake_node(tmp_path / "c", instance="controller-1", options=ACCOUNTING)) == [
        "munge",
        "slurm-client",
        "slurmctld",
        "slurmdbd",
        "mariadb-server",
        "mariadb-client",
        "iptables",  # the metadata service for root only (steps/imds.py)
    ]
    assert packages_for(fake_node(tmp_path / "w")) == ["munge", "slurm-client", "slurmd", "iptables"]
    assert packages_for(fake_node(tmp_path / "l", instance="login-1")) == ["munge", "slurm-client", "iptables"]


# --- storage -----------------------------------------------------------------------------------


def mounted(root: Path, path: str) -> None:
    touch(root, "/proc/self/mountinfo", f"36 35 98:0 / {path} rw,noatime - lustre 10.1.0.99@tcp:/abcdefgh rw\n")


def test_lustre_mount_plans_client_fstab_and_mount(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = fake_node(tmp_path, runner=runner)
    touch(tmp_path, "/etc/fstab", "UUID=x / ext4 defaults 0 1\n")
    step = LustreMount()
    assert step.needed(node)
    assert step.describe(node)[0] == "apt-get install lustre-client-modules-aws"
    step.apply(node)
    assert runner.ran("mount") == [["mount", "/fsx"]]
    fstab = (tmp_path / "etc/fstab").read_text()
    line = fstab_line("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "abcdefgh", "/fsx")
    assert line in fstab and "_netdev" in line and fstab.startswith("UUID=x / ext4")
    touch(tmp_path, "/sbin/mount.lustre").chmod(0o755)
    mounted(tmp_path, "/fsx")
    assert not step.needed(node)


def test_api_driven_mode_never_mounts_fsx_itself(tmp_path: Path) -> None:
    node = fake_node(tmp_path, mode="api-driven")
    assert "fsx-mount" not in names(steps_for(node))
    assert "fsx-mount" in names(steps_for(fake_node(tmp_path / "l")))


def test_shared_storage_creates_the_runtime_directory(tmp_path: Path) -> None:
    node = fake_node(tmp_path, fsx=False)
    (tmp_path / "fsx").mkdir()
    step = SharedStorage()
    step.apply(node)
    assert mode(tmp_path / "fsx/.hyperpod-cdk") == 0o755
    assert not step.needed(node)


def test_unmounted_fsx_fails_with_the_reason(tmp_path: Path) -> None:
    node = fake_node(tmp_path, mode="api-driven")
    (tmp_path / "fsx").mkdir()
    with pytest.raises(StepFailed, match=r"/fsx is not mounted.*InstanceStorageConfigs"):
        SharedStorage().apply(node)


# --- munge -------------------------------------------------------------------------------------


def test_controller_creates_one_root_only_key_that_every_node_copies(tmp_path: Path, capsys) -> None:
    controller = fake_node(tmp_path, instance="controller-1")
    worker = fake_node(tmp_path, instance="workers-1")
    (tmp_path / "fsx").mkdir()
    step = MungeKey()
    step.apply(controller)
    key = tmp_path / shared_key(controller).lstrip("/")
    assert len(key.read_bytes()) == 1024
    assert mode(key) == 0o400 and mode(key.parent) == 0o700
    assert (tmp_path / NODE_KEY.lstrip("/")).read_bytes() == key.read_bytes()
    assert mode(tmp_path / NODE_KEY.lstrip("/")) == 0o400
    before = key.read_bytes()
    step.apply(worker)  # same root: the worker reuses the key, never makes another
    assert key.read_bytes() == before and not step.needed(worker)
    assert before.hex() not in capsys.readouterr().out


def test_worker_without_published_key_fails_clearly(tmp_path: Path) -> None:
    worker = fake_node(tmp_path)
    (tmp_path / "fsx").mkdir()
    with pytest.raises(StepFailed, match="controller creates it"):
        MungeKey().apply(worker)
    assert not (tmp_path / NODE_KEY.lstrip("/")).exists()


# --- users -------------------------------------------------------------------------------------

ALICE = User("alice", 2001, 2001, sudo=True, ssh_public_keys=("ssh-ed25519 AAAAC3Nza alice@laptop",))


def test_users_get_fixed_ids_and_shared_homes(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = fake_node(tmp_path, runner=runner)
    touch(tmp_path, "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
    touch(tmp_path, "/etc/group", "root:x:0:\n")
    step = Users([ALICE])
    step.apply(node)
    assert runner.ran("groupadd") == [["groupadd", "--gid", "2001", "alice"]]
    assert runner.ran("useradd") == [
        [
            "useradd",
            "--uid",
            "2001",
            "--gid",
            "2001",
            "--home-dir",
            "/fsx/home/alice",
            "--no-create-home",
            "--shell",
            "/bin/bash",
            "alice",
        ]
    ]
    assert (tmp_path / "fsx/home/alice").is_dir()
    assert "alice ALL=(ALL) NOPASSWD:ALL" in (tmp_path / SUDOERS.lstrip("/")).read_text()
    touch(tmp_path, "/etc/passwd", "alice:x:2001:2001::/fsx/home/alice:/bin/bash\n")
    assert not step.needed(node)


def test_users_never_renumber_an_existing_account(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    touch(tmp_path, "/etc/passwd", "alice:x:1500:1500::/home/alice:/bin/bash\nbob:x:2001:2001::/x:/bin/sh\n")
    touch(tmp_path, "/etc/group", "")
    with pytest.raises(StepFailed, match=r"uid 2001 of alice is taken by bob.*never renumbers"):
        Users([ALICE]).apply(node)


def _homes_on_openzfs(root: Path, runner: RecordingRunner) -> Node:
    """An API-driven HyperPod node with Lustre at /fsx and OpenZFS at /home (the parameters the stack writes)."""
    node = fake_node(root, mode="api-driven", runner=runner)
    return fake_node(
        root,
        runner=runner,
        params=dataclasses.replace(node.params, openzfs_mount_path="/home"),
    )


def test_homes_live_on_the_openzfs_mount_when_there_is_one(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = _homes_on_openzfs(tmp_path, runner)
    touch(tmp_path, "/proc/self/mountinfo", "40 35 0:52 / /home rw,relatime - nfs4 fs-0a.fsx.aws:/fsx rw\n")
    touch(tmp_path, "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
    touch(tmp_path, "/etc/group", "root:x:0:\n")
    Users([ALICE]).apply(node)
    (useradd,) = runner.ran("useradd")
    assert useradd[useradd.index("--home-dir") + 1] == "/home/alice"
    assert (tmp_path / "home/alice").is_dir() and not (tmp_path / "fsx/home/alice").exists()
    SshBetweenNodes([ALICE]).apply(node)
    assert runner.ran("runuser", "-u", "alice", "--", "ssh-keygen")[0][-1] == "/home/alice/.ssh/id_ed25519"


def test_homes_are_never_made_under_a_missing_openzfs_mount(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = _homes_on_openzfs(tmp_path, runner)
    touch(tmp_path, "/proc/self/mountinfo", "36 35 98:0 / /fsx rw - lustre 10.1.0.99@tcp:/abcdefgh rw\n")
    touch(tmp_path, "/etc/passwd", "")
    touch(tmp_path, "/etc/group", "")
    with pytest.raises(StepFailed, match=r"homes live on FSx for OpenZFS, but /home is not mounted"):
        Users([ALICE]).apply(node)
    assert runner.ran("useradd") == [] and not (tmp_path / "home/alice").exists()


def test_ssh_keys_are_made_once_and_authorised(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = fake_node(tmp_path, runner=runner)
    step = SshBetweenNodes([ALICE])
    step.apply(node)
    keygen = runner.ran("runuser", "-u", "alice", "--", "ssh-keygen")
    assert len(keygen) == 1 and keygen[0][-1] == "/fsx/home/alice/.ssh/id_ed25519"
    assert "workers-2" in (tmp_path / SSH_CLIENT_CONFIG.lstrip("/")).read_text()
    # The recording runner made no key; pretend ssh-keygen did, then authorised_keys follows.
    touch(tmp_path, "/fsx/home/alice/.ssh/id_ed25519", "private")
    touch(tmp_path, "/fsx/home/alice/.ssh/id_ed25519.pub", "ssh-ed25519 AAAAgenerated alice@test\n")
    step.apply(node)
    assert len(runner.ran("runuser", "-u", "alice", "--", "ssh-keygen")) == 1
    authorized = (tmp_path / "fsx/home/alice/.ssh/authorized_keys").read_text()
    assert "AAAAgenerated" in authorized and "alice@laptop" in authorized
    assert not step.needed(node)


def test_a_held_key_lock_on_shared_storage_fails_at_its_deadline_naming_the_holder(tmp_path: Path) -> None:
    """Another node making alice's key pair (or hung on the mount while holding the lock) never hangs this one."""
    import fcntl

    from training_runtime.retry import RetryPolicy

    runner = RecordingRunner()
    node = fake_node(tmp_path, runner=runner)
    touch(tmp_path, "/fsx/home/alice/.ssh/.keygen.lock", "workers-2")
    with open(tmp_path / "fsx/home/alice/.ssh/.keygen.lock") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held the way another node's flock holds it
        quick = RetryPolicy(attempts=None, base_s=0.01, cap_s=0.02, deadline_s=0.2)
        with pytest.raises(StepFailed, match=r"gave up after 0 s waiting for .*/\.keygen\.lock \(held by workers-2\)"):
            SshBetweenNodes([ALICE], wait=quick).apply(node)
    assert runner.ran("runuser", "-u", "alice", "--", "ssh-keygen") == []
    SshBetweenNodes([ALICE], wait=quick).apply(node)  # released: the next run takes it and makes the key
    assert len(runner.ran("runuser", "-u", "alice", "--", "ssh-keygen")) == 1
    assert (tmp_path / "fsx/home/alice/.ssh/.keygen.lock").read_text() == node.instance.name


# --- slurm -------------------------------------------------------------------------------------


def test_every_node_renders_the_same_slurm_conf(tmp_path: Path) -> None:
    confs = []
    for instance in ("controller-1", "workers-2", "login-1"):
        node = fake_node(tmp_path / instance, instance=instance)
        SlurmConfig().apply(node)
        assert not SlurmConfig().needed(node)
        confs.append((tmp_path / instance / "etc/slurm/slurm.conf").read_text())
    assert confs[0] == confs[1] == confs[2]
    text = confs[0]
    assert "SlurmctldHost=controller-1(10.1.0.10)" in text
    assert "NodeName=workers-1 NodeAddr=10.1.0.11" in text and "PartitionName=trn" in text
    assert "login-1" not in text.split("SlurmctldHost")[1]


def test_slurm_conf_follows_the_resource_config(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    SlurmConfig().apply(node)
    grown = fake_node(
        tmp_path,
        instances={
            "controller": [("controller-1", "10.1.0.10")],
            "login": [],
            "workers": [("workers-1", "10.1.0.11"), ("workers-2", "10.1.0.12"), ("workers-3", "10.1.0.13")],
        },
    )
    assert SlurmConfig().needed(grown)
    SlurmConfig().apply(grown)
    assert "NodeName=workers-3 NodeAddr=10.1.0.13" in (tmp_path / "etc/slurm/slurm.conf").read_text()


def test_a_group_with_smt_on_declares_its_hardware_threads(tmp_path: Path) -> None:
    from training_runtime.groups import GroupSpec
    from training_runtime.steps.installed import node_facts

    groups = (
        GroupSpec("controller", "controller", "ml.m5.xlarge"),
        GroupSpec("smt", "compute", "ml.c5.4xlarge", threads_per_core=2),
        GroupSpec("workers", "compute", "ml.c5.4xlarge"),
    )
    instances = {
        "controller": [("controller-1", "10.1.0.10")],
        "smt": [("smt-1", "10.1.0.20")],
        "workers": [("workers-1", "10.1.0.11")],
    }
    node = fake_node(tmp_path, instance="smt-1", groups=groups, instances=instances)
    SlurmConfig().apply(node)
    text = (tmp_path / "etc/slurm/slurm.conf").read_text()
    # ml.c5.4xlarge: 8 cores, 16 vCPUs with SMT on.
    assert "NodeName=smt-1 NodeAddr=10.1.0.20 CPUs=16 Sockets=1 CoresPerSocket=8 ThreadsPerCore=2 " in text
    assert "NodeName=workers-1 NodeAddr=10.1.0.11 CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 " in text
    assert node_facts(node).cpus == 16


def test_no_compute_instances_is_a_clear_failure(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1", instances={"controller": [("controller-1", "10.1.0.10")]})
    with pytest.raises(StepFailed, match="no compute group has instances"):
        SlurmConfig().needed(node)


def test_local_accounting_database_password_never_on_a_command_line(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = fake_node(tmp_path, instance="controller-1", options=ACCOUNTING, runner=runner)
    running_daemon(node, MARIADB)
    LocalDatabase().apply(node)
    password = (tmp_path / DB_PASSWORD_FILE.lstrip("/")).read_text().strip()
    assert len(password) >= 24 and mode(tmp_path / DB_PASSWORD_FILE.lstrip("/")) == 0o600
    assert runner.ran("mariadb-install-db")
    assert all(password not in " ".join(c) for c in runner.commands)
    SlurmdbdConfig().apply(node)
    dbd = tmp_path / conf_path(node, "slurmdbd.conf").lstrip("/")
    assert f"StoragePass={password}" in dbd.read_text() and mode(dbd) == 0o600
    assert not SlurmdbdConfig().needed(node)


def test_local_database_turns_snapshot_isolation_off_for_slurmdbd(tmp_path: Path) -> None:
    """slurmdbd 26.05 refuses MariaDB 11.6.2+'s default snapshot isolation (docs/node-runtime.md): the setting
    is in the server's configuration before the runtime starts it, and a server already running (the package
    started it under systemd, or the file went missing) is restarted to read it."""
    runner = RecordingRunner()
    node = fake_node(tmp_path / "plain", instance="controller-1", options=ACCOUNTING, runner=runner)
    running_daemon(node, MARIADB)
    LocalDatabase().apply(node)
    lines = (node.root / DB_SERVER_CONF.lstrip("/")).read_text().splitlines()
    assert lines[lines.index("[mysqld]") :].count("loose-innodb_snapshot_isolation = OFF") == 1
    assert len(runner.ran(MARIADB.argv[0])) == 1  # started once, with the setting in place

    for directory in ("run/systemd/system", "var/lib/mysql/mysql"):  # Debian's package set it up and started it
        (tmp_path / "systemd" / directory).mkdir(parents=True)
    runner = RecordingRunner()  # every systemctl call succeeds: mariadb is active
    node = fake_node(tmp_path / "systemd", instance="controller-1", options=ACCOUNTING, runner=runner)
    LocalDatabase().apply(node)
    assert runner.ran("systemctl", "restart", "mariadb") == [["systemctl", "restart", "mariadb"]]
    assert not LocalDatabase().needed(node)
    (node.root / DB_SERVER_CONF.lstrip("/")).unlink()
    assert LocalDatabase().needed(node)
    LocalDatabase().apply(node)
    assert len(runner.ran("systemctl", "restart", "mariadb")) == 2 and not LocalDatabase().needed(node)


def test_external_database_password_comes_from_secrets_manager(tmp_path: Path) -> None:
    arn = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:slurmdb-AbCdEf"
    runner = RecordingRunner({("aws", "secretsmanager"): (0, json.dumps({"password": "s3cr3t-value"}))})
    bundle = b"a CA bundle\n"
    runner.hooks.append(lambda argv: argv[0] == "curl" and Path(argv[argv.index("--output") + 1]).write_bytes(bundle))
    options = {
        "accounting": {
            "enabled": True,
            "database": "external",
            "host": "db.example",
            "password_secret_arn": arn,
            "ca_bundle_sha256": hashlib.sha256(bundle).hexdigest(),  # TLS: tests/test_runtime_accounting_tls.py
        }
    }
    node = fake_node(tmp_path, instance="controller-1", options=options, runner=runner)
    assert "accounting-database" not in names(steps_for(node))
    SlurmdbdConfig().apply(node)
    [call] = runner.ran("aws", "secretsmanager")
    assert call[call.index("--secret-id") + 1] == arn and call[call.index("--region") + 1] == "eu-west-1"
    text = (tmp_path / "etc/slurm/slurmdbd.conf").read_text()
    assert "StorageHost=db.example" in text and "StoragePass=s3cr3t-value" in text


def test_cluster_is_registered_in_accounting_once(tmp_path: Path) -> None:
    runner = RecordingRunner({("sacctmgr", "-n", "-P", "list"): (0, "othercluster\n")})
    node = fake_node(tmp_path, instance="controller-1", options=ACCOUNTING, runner=runner)
    AccountingCluster().apply(node)
    assert runner.ran("sacctmgr", "-i", "add", "cluster") == [["sacctmgr", "-i", "add", "cluster", "test"]]
    registered = fake_node(
        tmp_path,
        instance="controller-1",
        options=ACCOUNTING,
        runner=RecordingRunner({("sacctmgr", "-n", "-P", "list"): (0, "test\n")}),
    )
    assert not AccountingCluster().needed(registered)


@pytest.mark.parametrize("hyperpod", [True, False])
def test_registering_the_cluster_on_hyperpod_drops_the_cluster_id_slurmctld_saved(
    tmp_path: Path, hyperpod: bool
) -> None:
    """HyperPod started slurmctld before accounting existed: its saved ClusterID would not match the one the
    database just gave the cluster (slurmctld: "CLUSTER ID MISMATCH"), so it goes; the generic platform's
    slurmctld starts only after the registration and keeps its file."""
    runner = RecordingRunner({("sacctmgr", "-n", "-P", "list"): (0, "othercluster\n")})
    node = fake_node(tmp_path, instance="controller-1", mode="api-driven", options=ACCOUNTING, runner=runner)
    if hyperpod:
        (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    touch(tmp_path, conf_path(node, "slurm.conf"), "SlurmctldHost=ip-10-1-0-10\nStateSaveLocation=/var/spool/ctld\n")
    saved = touch(tmp_path, "/var/spool/ctld/clustername", "234\n")
    AccountingCluster().apply(node)
    assert saved.exists() is not hyperpod


# --- plans per role and platform -------------------------------------------------------------


def test_generic_plans_by_role(tmp_path: Path) -> None:
    controller = names(steps_for(fake_node(tmp_path / "c", instance="controller-1", options=ACCOUNTING)))
    assert (
        controller.index("daemon:slurmdbd")
        < controller.index("accounting-cluster")
        < controller.index("daemon:slurmctld")
    )
    assert controller.index("munge-key") < controller.index("daemon:munge") < controller.index("daemon:slurmdbd")
    assert "daemon:slurmd" not in controller
    worker_node = fake_node(tmp_path / "w")
    worker = names(steps_for(worker_node))
    # slurmd is the last Slurm step; only the metrics steps follow it
    assert worker[worker.index("daemon:slurmd") + 1 :] == names(observability_steps(worker_node))
    assert "daemon:slurmctld" not in worker
    login = names(steps_for(fake_node(tmp_path / "l", instance="login-1")))
    assert not any(n.startswith("daemon:slurm") for n in login) and "daemon:munge" in login


def test_hyperpod_platform_leaves_slurm_conf_and_munge_to_hyperpod(tmp_path: Path) -> None:
    node = fake_node(tmp_path, mode="api-driven")
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    plan = names(steps_for(node))
    assert plan[:5] == ["installed-runtime", "health-checks", "shared-storage", "imds-guard", "slurm-config"]
    assert not any(n.startswith(("packages", "munge", "hosts")) for n in plan)
    assert conf_path(node, "slurm.conf") == "/opt/slurm/etc/slurm.conf"
    assert not any(isinstance(s, SlurmConfig) for s in steps_for(node))


def test_hyperpod_accounting_include_is_written_before_the_cluster_is_registered(tmp_path: Path) -> None:
    """sacctmgr finds slurmdbd through HyperPod's slurm.conf, which includes accounting.conf: the include
    must be in place before ``sacctmgr add cluster`` and before slurmctld restarts with it."""
    node = fake_node(tmp_path, instance="controller-1", mode="api-driven", options=ACCOUNTING)
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    plan = names(steps_for(node))
    assert (
        plan.index("daemon:slurmdbd")
        < plan.index("slurm-accounting-include")
        < plan.index("accounting-cluster")
        < plan.index("daemon:slurmctld")
    )


# --- applying a plan -------------------------------------------------------------------------


class Flag(Step):
    def __init__(self, name: str, fail: bool = False) -> None:
        self.name, self.fail, self.applied = name, fail, 0

    def needed(self, node) -> bool:  # type: ignore[no-untyped-def]
        return self.applied == 0

    def apply(self, node) -> None:  # type: ignore[no-untyped-def]
        if self.fail:
            raise StepFailed("broken on purpose")
        self.applied += 1


def test_done_marker_is_written_last_and_only_on_success(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    with pytest.raises(StepError, match="broken on purpose") as failure:
        apply_plan(node, [Flag("a"), Flag("b", fail=True), Flag("c")])
    assert failure.value.step == "b"
    assert not (tmp_path / DONE_MARKER.lstrip("/")).exists()
    state = json.loads((tmp_path / STATE_FILE.lstrip("/")).read_text())["steps"]
    assert state["a"]["result"] == "changed" and state["b"]["result"] == "failed" and "c" not in state
    steps = [Flag("a"), Flag("b"), Flag("c")]
    assert apply_plan(node, steps) == 3
    marker = tmp_path / DONE_MARKER.lstrip("/")
    assert json.loads(marker.read_text())["steps"] == ["a", "b", "c"]
    before = marker.read_text()
    assert apply_plan(node, steps) == 0 and marker.read_text() == before


def test_a_rerun_that_fails_leaves_no_stale_done_marker(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    marker = tmp_path / DONE_MARKER.lstrip("/")
    apply_plan(node, [Flag("a"), Flag("b")])
    assert marker.exists()
    # A re-run (new inputs, say) changes "a" and then fails at "b": the node is half-configured again.
    with pytest.raises(StepError, match="broken on purpose"):
        apply_plan(node, [Flag("a"), Flag("b", fail=True)])
    assert not marker.exists(), "the marker of the earlier run must not claim this node"


def test_a_step_that_does_not_converge_fails(tmp_path: Path) -> None:
    class Stubborn(Step):
        name = "stubborn"

        def needed(self, node) -> bool:  # type: ignore[no-untyped-def]
            return True

        def apply(self, node) -> None:  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(StepError, match="still needs changes"):
        apply_plan(fake_node(tmp_path), [Stubborn()])


def test_hyperpod_slurm_conf_is_awaited_never_written(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1", mode="api-driven")
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    [step] = [s for s in steps_for(node) if s.name == "slurm-config"]
    assert step.needed(node)
    conf = touch(tmp_path, "/opt/slurm/etc/slurm.conf", "SlurmctldHost=ip-10-1-0-10\nNodeName=ip-10-1-0-11\n")
    assert not step.needed(node)
    step.apply(node)
    assert conf.read_text() == "SlurmctldHost=ip-10-1-0-10\nNodeName=ip-10-1-0-11\n"


def test_daemons_go_through_systemd_where_the_node_has_it(tmp_path: Path) -> None:
    from training_runtime.steps.daemon import RunningDaemon
    from training_runtime.steps.slurm import slurm_config_files, slurmd

    inactive = RecordingRunner({("systemctl", "is-active"): (3, "")})
    node = fake_node(tmp_path, runner=inactive)
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    assert "slurmd-options" in names(steps_for(node))
    SlurmConfig().apply(node)
    step = RunningDaemon(slurmd(node), slurm_config_files(node))
    assert step.needed(node)
    step.apply(node)
    assert inactive.ran("systemctl", "enable") == [["systemctl", "enable", "--now", "slurmd"]]
    active = RecordingRunner({("systemctl", "is-active"): (0, "")})
    running = fake_node(tmp_path, runner=active)
    assert not step.needed(running)
    touch(tmp_path, "/etc/slurm/gres.conf", "# changed by hand\n")
    assert step.needed(running)
    step.apply(running)
    assert active.ran("systemctl", "restart") == [["systemctl", "restart", "slurmd"]]


def test_taking_sudo_away_rewrites_the_sudoers_file(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    touch(tmp_path, "/etc/passwd", "alice:x:2001:2001::/fsx/home/alice:/bin/bash\n")
    touch(tmp_path, "/etc/group", "alice:x:2001:\n")
    Users([ALICE]).apply(node)
    demoted = Users([User("alice", 2001, 2001)])
    assert demoted.needed(node)
    demoted.apply(node)
    assert "alice" not in (tmp_path / SUDOERS.lstrip("/")).read_text().split("\n", 1)[1]


def test_a_renumbered_account_is_noticed_even_when_nothing_else_changed(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    touch(tmp_path, "/etc/passwd", "alice:x:1500:1500::/fsx/home/alice:/bin/bash\n")
    (tmp_path / "fsx/home/alice").mkdir(parents=True)
    touch(tmp_path, SUDOERS, Users([ALICE])._sudoers())
    assert Users([ALICE]).needed(node)
    with pytest.raises(StepFailed, match="exists with uid 1500"):
        Users([ALICE]).apply(node)


def test_hyperpod_without_fsx_has_no_shared_storage_step(tmp_path: Path) -> None:
    node = fake_node(tmp_path, mode="api-driven", fsx=False)
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    assert "shared-storage" not in names(steps_for(node))


def test_hyperpod_with_the_fsx_flag_and_no_dns_name_waits_for_the_mount(tmp_path: Path) -> None:
    """A published API-driven template says ``fsx: true`` with null names: HyperPod mounts FSx, the runtime
    uses it (shared-storage step, no mount of its own) and waits until it is a mount point."""
    base = fake_node(tmp_path, mode="api-driven", fsx=False).params
    params = dataclasses.replace(base, fsx=True)
    node = fake_node(tmp_path, mode="api-driven", params=params)
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    assert node.has_shared_storage
    steps = names(steps_for(node))
    assert "shared-storage" in steps and "fsx-mount" not in steps
    (tmp_path / "fsx").mkdir()
    with pytest.raises(StepFailed, match="/fsx is not mounted"):
        SharedStorage().apply(node)


def test_a_daemon_we_do_not_configure_is_only_kept_running(tmp_path: Path) -> None:
    from training_runtime.steps.daemon import RunningDaemon
    from training_runtime.steps.slurm import slurmctld

    runner = RecordingRunner({("systemctl", "is-active"): (0, "")})
    node = fake_node(tmp_path, instance="controller-1", mode="api-driven", runner=runner)
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    [step] = [s for s in steps_for(node) if s.name == "daemon:slurmctld"]
    assert isinstance(step, RunningDaemon) and step.daemon == slurmctld(node)
    assert not step.needed(node)


# --- the host seam: accounts, host name and daemon start-up come from Node.host, also on a fake root ----


def test_owners_are_looked_up_and_applied(tmp_path: Path) -> None:
    from training_runtime.files import ensure_dir, file_matches, write_file

    accounts = {"slurm": (os.getuid(), os.getgid()), "alice": (os.getuid(), os.getgid())}
    host = FakeHost("controller-1", accounts)
    node = fake_node(tmp_path, instance="controller-1", host=host)
    assert write_file(node, "/etc/x.conf", "a\n", 0o600, owner="slurm")
    assert host.looked_up == ["slurm"]  # applied to the new file
    assert ensure_dir(node, "/home/alice", 0o700, owner="alice")
    info = (tmp_path / "etc/x.conf").stat()
    assert (info.st_uid, info.st_gid) == accounts["slurm"]
    # An owner that differs from the file's makes the file not match, so a re-run fixes it.
    host.accounts["slurm"] = (os.getuid() + 1, os.getgid())
    assert not file_matches(node, "/etc/x.conf", "a\n", 0o600, owner="slurm")


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_ownership_is_changed_to_the_looked_up_ids(tmp_path: Path) -> None:
    from training_runtime.files import write_file

    node = fake_node(tmp_path, instance="controller-1", host=FakeHost("controller-1", {"slurm": (64030, 64031)}))
    write_file(node, "/etc/slurm/slurmdbd.conf", "x\n", 0o600, owner="slurm")
    info = (tmp_path / "etc/slurm/slurmdbd.conf").stat()
    assert (info.st_uid, info.st_gid) == (64030, 64031)


def test_a_daemon_started_without_systemd_is_waited_for(tmp_path: Path) -> None:
    from training_runtime import services
    from training_runtime.retry import NotReady

    node = fake_node(tmp_path, instance="controller-1")
    with pytest.raises(NotReady, match="mariadbd is not running yet"):
        services.start(node, MARIADB)  # its pid file never appears
    running_daemon(node, MARIADB)
    services.start(node, MARIADB)
    assert services.is_running(node, MARIADB)


def test_the_host_name_comes_from_the_host(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1", host=FakeHost("ip-10-1-0-7"))
    assert node.hostname == "ip-10-1-0-7"


def test_our_parameters_file_wins_whatever_the_names_sort_as(tmp_path: Path) -> None:
    from training_runtime.__main__ import PARAMETERS_FILES, find_parameters

    for name in PARAMETERS_FILES:
        touch(tmp_path, name, "{}")
    assert find_parameters(tmp_path).name == "hyperpod_cdk_parameters.json"
    (tmp_path / "hyperpod_cdk_parameters.json").unlink()
    assert find_parameters(tmp_path).name == "provisioning_parameters.json"


def test_the_wait_for_hyperpods_slurm_conf_lasts_its_whole_deadline() -> None:
    from training_runtime.retry import NotReady
    from training_runtime.steps.slurm import HYPERPOD_CONF_WAIT

    now = [0.0]

    def never() -> None:
        raise NotReady("no slurm.conf yet")

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(NotReady):
        HYPERPOD_CONF_WAIT.call(never, what="slurm.conf", sleep=sleep, clock=lambda: now[0])
    assert now[0] == HYPERPOD_CONF_WAIT.deadline_s  # the message says "within 600 s": that is how long it waited


def test_a_written_file_is_durable_with_its_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from training_runtime.files import write_file

    node = fake_node(tmp_path, instance="controller-1")
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_file(node, "/var/lib/hyperpod-cdk/bootstrap.done", "{}")
    directory = tmp_path / "var/lib/hyperpod-cdk"
    # The file's data (under its temporary name) and then, after the rename, the directory that holds it.
    assert synced[0].startswith(str(directory / ".bootstrap.done."))
    assert synced[-1] == str(directory)


def test_a_second_bootstrap_waits_for_the_lock_then_fails_naming_the_holder(tmp_path: Path) -> None:
    import fcntl

    from training_runtime.__main__ import BootstrapLock
    from training_runtime.retry import RetryPolicy

    node = fake_node(tmp_path, instance="controller-1")
    with BootstrapLock(node):  # the first run holds it and records its pid
        held = (tmp_path / "var/lib/hyperpod-cdk/bootstrap.lock").read_text()
        assert held == str(os.getpid())
        # A separate open file description: flock conflicts with it even in the same process.
        with open(tmp_path / "var/lib/hyperpod-cdk/bootstrap.lock") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        quick = RetryPolicy(attempts=3, base_s=0.0, cap_s=0.0, deadline_s=0.5)
        pattern = rf"another bootstrap \(pid {os.getpid()}\) has held"
        with pytest.raises(StepFailed, match=pattern), BootstrapLock(node, wait=quick):
            pass
    with BootstrapLock(node, wait=RetryPolicy(attempts=1, base_s=0.0, cap_s=0.0, deadline_s=0.0)):
        pass  # released: the next run takes it at once


def test_the_shared_storage_probe_runs_in_a_child_with_a_deadline(tmp_path: Path) -> None:
    """A write to a hung Lustre mount blocks in the kernel: bootstrap probes in a child it can abandon."""
    from training_runtime.probe import PROBE, PROBE_TIMEOUT_S, python_executable
    from training_runtime.run import CommandError

    class HungWrite(RecordingRunner):
        def run(self, argv, **kwargs):  # type: ignore[no-untyped-def, override]
            if PROBE in argv:
                self.commands.append(list(argv))
                assert kwargs["timeout"] == PROBE_TIMEOUT_S
                raise CommandError(argv, None, "")
            return super().run(argv, **kwargs)

    node = fake_node(tmp_path, fsx=False, runner=HungWrite())
    (tmp_path / "fsx").mkdir()
    with pytest.raises(StepFailed, match=r"a write to /fsx did not finish within 10 s"):
        SharedStorage().apply(node)
    responses = {(python_executable(), "-c", PROBE): (1, "OSError: [Errno 30] Read-only file system")}
    refused = fake_node(tmp_path / "b", fsx=False, runner=RecordingRunner(responses))
    (tmp_path / "b" / "fsx").mkdir()
    with pytest.raises(StepFailed, match=r"/fsx is not writable: OSError: \[Errno 30\] Read-only file system"):
        SharedStorage().apply(refused)


class _RecordedWait:
    """A wait that records which daemon's start it served, and looks once."""

    def __init__(self, served: list, label: str) -> None:  # type: ignore[type-arg]
        self.served, self.label = served, label

    def call(self, action, *, what, **kwargs):  # type: ignore[no-untyped-def]
        self.served.append(f"{self.label}: {what}")
        return action()


def test_a_configless_slurmd_waits_for_the_controller_and_other_daemons_do_not(tmp_path: Path) -> None:
    """On HyperPod a compute node's slurmd (``--conf-server``) writes its pid file only once the controller
    answers, and in the lifecycle-driven mode the controller may still be starting Slurm: its start waits the
    host's ``controller_wait`` (minutes), every other start the short ``daemon_wait``."""
    from training_runtime.node import CONTROLLER_WAIT, DAEMON_WAIT
    from training_runtime.services import start
    from training_runtime.steps.slurm import slurmd

    served: list[str] = []
    host = FakeHost("workers-1")
    host.daemon_wait = _RecordedWait(served, "daemon_wait")  # type: ignore[misc]
    host.controller_wait = _RecordedWait(served, "controller_wait")  # type: ignore[misc]
    generic = fake_node(tmp_path / "generic", host=host)
    touch(tmp_path / "hyperpod", HYPERPOD_MARKER + "/marker")
    hyperpod = fake_node(tmp_path / "hyperpod", host=host)
    for node in (generic, hyperpod):
        running_daemon(node, slurmd(node))
        start(node, slurmd(node))
    assert served == ["daemon_wait: slurmd start", "controller_wait: slurmd start"]
    assert CONTROLLER_WAIT.deadline_s >= 10 * DAEMON_WAIT.deadline_s and CONTROLLER_WAIT.attempts is None
