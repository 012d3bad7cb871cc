"""What HyperPod's 2026 AMI set up before the lifecycle script: found on a fake root, left alone, reported in the plan.

Every test builds the AMI's files under a temporary root (the node's root is injected); nothing in the runtime
knows it runs under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime_fakes import RecordingRunner, fake_node, running_daemon, touch
from training_runtime.__main__ import show
from training_runtime.node import Node
from training_runtime.plan import apply_plan, describe_plan
from training_runtime.steps.ami import AmiSetup, accounting_by_ami, detect
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.slurm import slurmctld

ETC = "/opt/slurm/etc"
ACCOUNTING_STEPS = {"accounting-database", "slurmdbd-config", "daemon:slurmdbd", "accounting-cluster"}
AMI_ACCOUNTING = "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=ip-10-1-0-10\n"
AMI_SLURMDBD = "DbdHost=ip-10-1-0-10\nStorageType=accounting_storage/mysql\nStoragePass=the-amis-own\n"
NVME_ENROOT = (
    "ENROOT_RUNTIME_PATH /opt/dlami/nvme/tmp/enroot/user-$(id -u)\n"
    "ENROOT_CACHE_PATH /opt/dlami/nvme/enroot\n"
    "ENROOT_DATA_PATH /opt/dlami/nvme/tmp/enroot/data/user-$(id -u)\n"
    "ENROOT_SQUASH_OPTIONS -comp lzo\n"
)


def hyperpod(root: Path, *, instance: str = "controller-1", **kwargs: object) -> Node:
    """A node on HyperPod's AMI (its marker) with HyperPod's slurm.conf on the controller."""
    node = fake_node(root, instance=instance, fsx=False, **kwargs)  # type: ignore[arg-type]
    (root / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
    if instance.startswith("controller"):
        touch(root, ETC + "/slurm.conf", "SlurmctldHost=ip-10-1-0-10\ninclude accounting.conf\n")
    return node


def ami_accounting(root: Path) -> None:
    touch(root, ETC + "/accounting.conf", AMI_ACCOUNTING)
    touch(root, ETC + "/slurmdbd.conf", AMI_SLURMDBD)


def containers(root: Path, *, pyxis_line: str = "required /usr/local/lib/slurm/spank_pyxis.so\n") -> None:
    touch(root, "/etc/enroot/enroot.conf", NVME_ENROOT)
    touch(root, "/usr/bin/enroot", "#!/bin/sh\n").chmod(0o755)
    touch(root, ETC + "/plugstack.conf", "include /opt/slurm/etc/plugstack.conf.d/*\n")
    touch(root, ETC + "/plugstack.conf.d/pyxis.conf", pyxis_line)


ACCOUNTING_ON = {"accounting": {"enabled": True}}


def test_accounting_the_ami_configured_replaces_the_runtimes_accounting_steps(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, options=ACCOUNTING_ON, mode="api-driven")
    ami_accounting(tmp_path)
    plan = {s.name for s in steps_for(node)}
    assert plan & (ACCOUNTING_STEPS | {"slurm-accounting-include", "slurm-configless-push"}) == set()
    found = accounting_by_ami(node)
    assert found is not None and "accounting.conf" in found.evidence and "slurmdbd.conf present" in found.evidence


def test_accounting_in_slurm_conf_itself_counts_too(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, options=ACCOUNTING_ON, mode="api-driven")
    touch(
        tmp_path, ETC + "/slurm.conf", "SlurmctldHost=ip-10-1-0-10\nAccountingStorageType=accounting_storage/slurmdbd\n"
    )
    assert accounting_by_ami(node) is not None


@pytest.mark.parametrize(
    "accounting_conf",
    [
        "# Accounting settings\n",  # an AMI that configured none (the emulator's older AMI)
        "AccountingStorageType=accounting_storage/none\n",
        "# Managed by hyperpod-cdk (runtime option accounting); edits are overwritten.\n" + AMI_ACCOUNTING,  # ours
    ],
)
def test_no_accounting_of_the_amis_means_the_runtime_sets_it_up(tmp_path: Path, accounting_conf: str) -> None:
    node = hyperpod(tmp_path, options=ACCOUNTING_ON, mode="api-driven")
    touch(tmp_path, ETC + "/accounting.conf", accounting_conf)
    assert accounting_by_ami(node) is None
    assert {s.name for s in steps_for(node)} >= ACCOUNTING_STEPS


def test_the_plan_leaves_the_amis_accounting_files_byte_for_byte(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, options=ACCOUNTING_ON, mode="api-driven")
    ami_accounting(tmp_path)
    running_daemon(node, slurmctld(node))
    steps = steps_for(node)
    names = [s.name for s in steps]
    apply_plan(node, steps[names.index("slurm-config") : names.index("daemon:slurmctld") + 1])
    assert (tmp_path / "opt/slurm/etc/accounting.conf").read_text() == AMI_ACCOUNTING
    assert (tmp_path / "opt/slurm/etc/slurmdbd.conf").read_text() == AMI_SLURMDBD
    runner = node.runner
    assert isinstance(runner, RecordingRunner)
    assert runner.ran("/opt/slurm/bin/sacctmgr") == [] and runner.ran("mariadb-install-db") == []


def test_containers_enroot_on_nvme_and_pyxis_in_plugstack_are_found(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    containers(tmp_path)
    [found] = [p for p in detect(node) if p.piece == "container runtime"]
    assert "/usr/bin/enroot" in found.evidence
    assert "ENROOT_CACHE_PATH, ENROOT_DATA_PATH, ENROOT_RUNTIME_PATH on /opt/dlami/nvme" in found.evidence
    assert "spank_pyxis.so in /opt/slurm/etc/plugstack.conf.d/pyxis.conf" in found.evidence
    assert "installs nothing over it" in found.effect and "edits only the keys it owns" in found.effect
    off = hyperpod(tmp_path, options={"containers": {"enabled": False}})
    [found_off] = [p for p in detect(off) if p.piece == "container runtime"]
    assert "runtime.containers.enabled is false" in found_off.effect


def test_a_commented_out_pyxis_line_is_not_pyxis(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    containers(tmp_path, pyxis_line="# required /usr/local/lib/slurm/spank_pyxis.so\n")
    [found] = [p for p in detect(node) if p.piece == "container runtime"]
    assert "spank_pyxis" not in found.evidence


def test_a_configless_node_finds_pyxis_in_the_configuration_slurmd_fetched(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, instance="workers-1")
    touch(tmp_path, "/var/spool/slurmd/conf-cache/plugstack.conf", "optional spank_pyxis.so\n")
    [found] = [p for p in detect(node) if p.piece == "container runtime"]
    assert "/var/spool/slurmd/conf-cache/plugstack.conf" in found.evidence


def test_ssh_host_keys_log_rotation_and_the_amis_user_are_found_listed_users_are_not(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, instance="workers-1")
    touch(tmp_path, "/etc/ssh/ssh_host_ed25519_key", "k")
    touch(tmp_path, "/etc/ssh/ssh_host_ed25519_key.pub", "k")
    touch(tmp_path, "/etc/logrotate.d/slurm", "/var/log/slurm/*.log {\n  weekly\n}\n")
    touch(tmp_path, "/etc/logrotate.d/apt", "/var/log/apt/term.log {\n}\n")
    touch(
        tmp_path,
        "/etc/passwd",
        "root:x:0:0::/root:/bin/bash\nubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n"
        "alice:x:2001:2001::/fsx/home/alice:/bin/bash\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n",
    )
    touch(tmp_path, "/home/ubuntu/.ssh/id_ed25519.pub", "k")
    (tmp_path / "fsx/home/alice").mkdir(parents=True)
    found = {p.piece: p for p in detect(node, listed_users=("alice",))}
    assert set(found) == {"SSH host keys", "log rotation", "user homes"}
    assert found["SSH host keys"].evidence == "/etc/ssh/ssh_host_ed25519_key"
    assert found["log rotation"].evidence.endswith("(slurm)")
    assert found["user homes"].evidence == "ubuntu (/home/ubuntu, keys id_ed25519.pub)"


def test_a_linked_ssh_directory_of_the_amis_user_is_not_listed_through(tmp_path: Path) -> None:
    """The AMI user's ~/.ssh linked to /root/.ssh: root's key names never reach the plan's log (issue 39, H2)."""
    node = hyperpod(tmp_path, instance="workers-1")
    touch(tmp_path, "/etc/passwd", "ubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n")
    touch(tmp_path, "/root/.ssh/id_rootonly.pub", "k")
    (tmp_path / "home/ubuntu").mkdir(parents=True)
    (tmp_path / "home/ubuntu/.ssh").symlink_to(tmp_path / "root/.ssh")
    found = {p.piece: p for p in detect(node)}
    assert found["user homes"].evidence == "ubuntu (/home/ubuntu)"


def test_an_older_ami_has_nothing_to_leave_alone(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, options=ACCOUNTING_ON, mode="api-driven")
    touch(tmp_path, ETC + "/accounting.conf", "# Accounting settings\n")
    assert detect(node) == []
    assert [r for r in describe_plan(node, [AmiSetup()]) if "left_alone" in r] == []


def test_the_plan_says_what_it_left_alone_and_why_and_bootstrap_logs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = hyperpod(tmp_path, options=ACCOUNTING_ON, mode="api-driven")
    ami_accounting(tmp_path)
    containers(tmp_path)
    steps = steps_for(node)
    assert steps[-1].name == "ami-setup"  # on the HyperPod platform only
    [row] = [r for r in describe_plan(node, steps) if r["step"] == "ami-setup"]
    assert row["needed"] is False
    assert [line.split(":")[0] for line in row["left_alone"]] == ["Slurm accounting", "container runtime"]
    assert "writes no slurmdbd.conf" in row["left_alone"][0]
    show([row], as_json=False)
    printed = capsys.readouterr().out
    assert "    = left alone: Slurm accounting: AccountingStorageType=accounting_storage/slurmdbd" in printed
    apply_plan(node, [AmiSetup()])
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [e["what"].split(":")[0] for e in logged if e.get("event") == "left-alone"] == [
        "Slurm accounting",
        "container runtime",
    ]
    generic = fake_node(tmp_path / "generic", options=ACCOUNTING_ON)
    assert "ami-setup" not in [s.name for s in steps_for(generic)]


def test_the_ami_setup_step_changes_nothing(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    containers(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert apply_plan(node, [AmiSetup()]) == 0
    assert {p: p.read_bytes() for p in before} == before
