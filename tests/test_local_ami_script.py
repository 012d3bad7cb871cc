"""The preconfigured-AMI switch of the emulator without root: where its pieces go in HyperPod's part of a node's
bring-up, that the cluster state remembers it, and that the runtime's detection reads the files it lays down
(the local cluster runs it for real: tests/test_local_ami.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_cdk.core.config import parse_config
from hyperpod_local import ami
from hyperpod_local.hyperpod_platform import agent_script
from hyperpod_local.layout import plan_layout
from hyperpod_local.state import ClusterState
from runtime_fakes import fake_node, touch
from training_runtime.groups import COMPUTE, CONTROLLER
from training_runtime.params import API_DRIVEN, LIFECYCLE_DRIVEN
from training_runtime.steps.ami import detect

LAYOUT = "[ -L /opt/slurm ] ||"


def test_an_older_ami_gets_none_of_the_pieces() -> None:
    for role in (CONTROLLER, COMPUTE):
        script = agent_script(role, API_DRIVEN, "10.250.0.10")
        assert LAYOUT not in script and "enroot" not in script and "slurmdbd" not in script


def test_the_preconfigured_ami_lays_its_pieces_before_hyperpod_starts_slurm() -> None:
    script = agent_script(CONTROLLER, API_DRIVEN, "10.250.0.10", preconfigured_ami=True).splitlines()
    assert script[2].startswith(LAYOUT)  # first: everything after it goes through the /opt/slurm link

    def at(words: str) -> int:
        return next(i for i, line in enumerate(script) if words in line)

    assert at("/etc/enroot/enroot.conf") < at("install -m 0644 $s/slurm.conf")
    assert at("/opt/slurm/etc/accounting.conf ] || { printf") < at("echo '# Accounting settings'")  # the AMI's wins
    assert at("runuser -u munge") < at("/opt/slurm/sbin/slurmdbd") < at("/opt/slurm/sbin/slurmctld")
    assert "IDENTIFIED BY '%s'" in script[at("mariadb --socket")]  # the password goes on stdin, not a command line


@pytest.mark.parametrize("mode", [API_DRIVEN, LIFECYCLE_DRIVEN])
def test_oncreate_gets_the_image_but_not_the_amis_own_setup(mode: str) -> None:
    controller = agent_script(CONTROLLER, mode, "10.250.0.10", preconfigured_ami=True)
    worker = agent_script(COMPUTE, mode, "10.250.0.10", preconfigured_ami=True)
    assert LAYOUT in worker and "/etc/enroot/enroot.conf" in worker and "ssh-keygen -A" in worker
    own = mode == API_DRIVEN
    assert ("useradd --uid 1000" in worker) is own and ("/etc/logrotate.d/slurm" in worker) is own
    assert ("slurmdbd.conf" in controller) is own and "slurmdbd.conf" not in worker


def test_the_state_remembers_the_switch() -> None:
    data = {
        "version": 1,
        "config_path": "c.yaml",
        "mode": API_DRIVEN,
        "fsx_mount_path": "/fsx",
        "prefix": "hp",
        "layout": None,
        "bootstrap": True,
        "platform": "hyperpod",
        "host": {"run_netns_existed": True, "run_mount_existed": True},
    }
    older = ClusterState.from_json({**data, "layout": _layout_json()})
    assert older.variant.preconfigured_ami is False  # a state file written before the switch existed
    state = ClusterState.from_json({**data, "layout": _layout_json(), "preconfigured_ami": True})
    assert state.variant.preconfigured_ami and state.to_json()["variant"]["preconfigured_ami"] is True
    assert ClusterState.from_json(state.to_json()) == state


def _layout_json() -> object:
    groups = [{"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}]
    groups.append({"name": "cpu", "instance_type": "ml.c5.4xlarge", "count": 1})
    return plan_layout(parse_config({"cluster_name": "lab", "storage": None, "instance_groups": groups})).to_json()


def test_the_runtime_reads_the_files_the_emulator_lays_down(tmp_path: Path) -> None:
    node = fake_node(tmp_path, fsx=False)
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    touch(tmp_path, "/etc/enroot/enroot.conf", ami.ENROOT_CONF_TEXT)
    touch(tmp_path, "/usr/bin/enroot", ami.ENROOT_STANDIN).chmod(0o755)
    touch(tmp_path, "/opt/slurm/etc/plugstack.conf", "include /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n")
    touch(tmp_path, "/opt/slurm/etc/plugstack.conf.d/pyxis.conf", ami.PYXIS_CONF)
    touch(tmp_path, "/etc/logrotate.d/slurm", ami.LOGROTATE)
    found = {p.piece: p.evidence for p in detect(node)}
    assert (
        "ENROOT_CACHE_PATH, ENROOT_DATA_PATH, ENROOT_RUNTIME_PATH, ENROOT_TEMP_PATH on /opt/dlami/nvme"
        in found["container runtime"]
    )
    assert "spank_pyxis.so in /opt/slurm/etc/plugstack.conf.d/pyxis.conf" in found["container runtime"]
    assert "log rotation" in found
