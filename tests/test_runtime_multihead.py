"""Multi-head controllers on the node: a controller group of two instances (HyperPod's multi-head model).

The resource config's order decides: its first controller is the primary slurmctld, the next its backup.
Both controllers run slurmctld on a state directory on the shared file system; only the primary makes the
cluster's munge key.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from runtime_fakes import DEFAULT_INSTANCES, fake_node
from training_runtime.errors import StepFailed
from training_runtime.render.slurm_conf import RenderError, render_slurm_conf
from training_runtime.render.slurm_types import Partition, SlurmSettings
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.daemon import RunningDaemon
from training_runtime.steps.munge import MungeKey, shared_key
from training_runtime.steps.slurm import LOCAL_STATE_DIR, SlurmConfig, settings, state_save_location

TWO_CONTROLLERS = {**DEFAULT_INSTANCES, "controller": [("controller-1", "10.1.0.10"), ("controller-2", "10.1.0.9")]}
"""The backup's address sorts first: the order of the resource config, not of addresses or names, decides."""
NODES = ("controller-1", "controller-2", "workers-1", "login-1")


def lines(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(key + "=")]


def test_every_node_renders_primary_then_backup_and_state_on_shared_storage(tmp_path: Path) -> None:
    confs = set()
    for instance in NODES:
        node = fake_node(tmp_path / instance, instance=instance, instances=TWO_CONTROLLERS)
        SlurmConfig().apply(node)
        assert not SlurmConfig().needed(node)  # a re-run changes nothing
        confs.add((tmp_path / instance / "etc/slurm/slurm.conf").read_text())
    assert len(confs) == 1
    text = confs.pop()
    assert lines(text, "SlurmctldHost") == ["controller-1(10.1.0.10)", "controller-2(10.1.0.9)"]
    assert lines(text, "StateSaveLocation") == ["/fsx/.hyperpod-cdk/slurmctld"]
    assert "controller-2" not in "".join(lines(text, "NodeName"))  # a controller is not a compute node


def test_backup_controller_makes_the_shared_state_directory_too(tmp_path: Path) -> None:
    backup = fake_node(tmp_path, instance="controller-2", instances=TWO_CONTROLLERS)
    SlurmConfig().apply(backup)
    state = tmp_path / state_save_location(backup).lstrip("/")
    assert state.is_dir() and stat.S_IMODE(state.stat().st_mode) == 0o755
    assert not (tmp_path / LOCAL_STATE_DIR.lstrip("/")).exists()


def test_one_controller_keeps_state_on_its_own_disk_and_one_slurmctld_host(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1")
    assert state_save_location(node) == LOCAL_STATE_DIR and not node.multi_head
    assert settings(node).backup_controllers == ()


def test_slurmctld_timeout_option_reaches_slurm_conf(tmp_path: Path) -> None:
    node = fake_node(
        tmp_path, instance="workers-1", instances=TWO_CONTROLLERS, options={"slurm": {"slurmctld_timeout": 7}}
    )
    SlurmConfig().apply(node)
    assert lines((tmp_path / "etc/slurm/slurm.conf").read_text(), "SlurmctldTimeout") == ["7"]


def test_accounting_falls_back_to_the_backups_slurmdbd(tmp_path: Path) -> None:
    options = {
        "accounting": {
            "enabled": True,
            "database": "external",
            "host": "db.example.internal",
            "password_secret_arn": "arn:aws:secretsmanager:us-east-1:111122223333:secret:slurm-db-AbCdEf",
        }
    }
    node = fake_node(tmp_path, instance="workers-1", instances=TWO_CONTROLLERS, options=options)
    found = settings(node)
    assert (found.accounting_host, found.accounting_backup_host) == ("10.1.0.10", "10.1.0.9")
    backup_steps = [
        s.name
        for s in steps_for(fake_node(tmp_path, instance="controller-2", instances=TWO_CONTROLLERS, options=options))
    ]
    assert "slurmdbd-config" in backup_steps and "accounting-database" not in backup_steps


def test_both_controllers_run_slurmctld(tmp_path: Path) -> None:
    for instance in ("controller-1", "controller-2"):
        node = fake_node(tmp_path / instance, instance=instance, instances=TWO_CONTROLLERS)
        daemons = [s.daemon.name for s in steps_for(node) if isinstance(s, RunningDaemon)]
        assert "slurmctld" in daemons and "slurmd" not in daemons


def test_only_the_primary_makes_the_munge_key(tmp_path: Path) -> None:
    (tmp_path / "fsx").mkdir()
    backup = fake_node(tmp_path, instance="controller-2", instances=TWO_CONTROLLERS)
    with pytest.raises(StepFailed, match="controller creates it"):
        MungeKey().apply(backup)  # a backup that made its own key would split the cluster in two
    primary = fake_node(tmp_path, instance="controller-1", instances=TWO_CONTROLLERS)
    MungeKey().apply(primary)
    key = (tmp_path / shared_key(primary).lstrip("/")).read_bytes()
    MungeKey().apply(backup)
    assert (tmp_path / "etc/munge/munge.key").read_bytes() == key and not MungeKey().needed(backup)


def test_renderer_rejects_a_backup_that_is_the_primary() -> None:
    base = SlurmSettings(cluster_name="c", controller_name="ctl", controller_address="10.0.0.1")
    nodes: list = []
    ok = render_slurm_conf(
        SlurmSettings(
            cluster_name="c",
            controller_name="ctl",
            controller_address="10.0.0.1",
            backup_controllers=(("ctl2", "10.0.0.2"),),
            accounting_host="10.0.0.1",
            accounting_backup_host="10.0.0.2",
        ),
        nodes,
        [Partition("p", ())],
    )
    assert lines(ok, "AccountingStorageBackupHost") == ["10.0.0.2"]
    bad = SlurmSettings(**{**base.__dict__, "backup_controllers": (("ctl", "10.0.0.2"), ("x y", "10.0.0.3"))})
    with pytest.raises(RenderError) as error:
        render_slurm_conf(bad, nodes, [Partition("p", ())])
    assert "backup_controllers[0]" in str(error.value) and "backup_controllers[1]" in str(error.value)
