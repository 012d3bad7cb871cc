"""What HyperPod writes, as the emulator writes it (``hyperpod_local.hyperpod_files``): slurm.conf, topology.conf and
the munge key, checked without root (applying them on a node: tests/test_local_hyperpod.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hyperpod_cdk.core.config import load_config, parse_config
from hyperpod_local.hyperpod_files import (
    DEV_PARTITION,
    HYPERPOD_SETTINGS,
    MUNGE_KEY_SIZE,
    munge_key,
    node_hostname,
    slurm_conf,
    topology_conf,
)
from hyperpod_local.layout import LocalNode, plan_layout
from hyperpod_local.overlay import EMULATION_SLURM_OPTIONS
from training_runtime.node_names import INSTANCE_NAMES, IP_NAMES
from training_runtime.render.hostlist import expand
from training_runtime.render.slurm_conf import slurm_conf_problems

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("naming", [IP_NAMES, INSTANCE_NAMES])
def test_the_emulated_hyperpod_slurm_conf_is_the_runtimes_rendering_with_hyperpods_settings(naming: str) -> None:
    """One slurm.conf writer: the HyperPod platform's file is training_runtime's rendering, with HyperPod's
    node names (ip-a-b-c-d, or the instance names), its accounting include, the login node listed and the
    emulation's fast timings."""
    layout = plan_layout(load_config(ROOT / "examples" / "cpu-cluster.yaml"))
    text = slurm_conf(layout, naming, cpus=2)
    lines = text.splitlines()

    def name(node: LocalNode) -> str:
        return f"ip-{node.ip.replace('.', '-')}" if naming == IP_NAMES else node.name

    assert lines[0].startswith("# Written by the hyperpod-local emulator in HyperPod's place")
    controller = layout.controller
    assert f"SlurmctldHost={name(controller)}({controller.ip})" in lines
    assert f"include {HYPERPOD_SETTINGS.accounting_include}" in lines
    for key, value in EMULATION_SLURM_OPTIONS.items():
        found = {"cred_expire": f"AuthInfo=cred_expire={value}", "sched_interval": f"sched_interval={value}"}
        wanted = found.get(key, f"{''.join(p.title() for p in key.split('_'))}={value}")
        assert any(wanted in line for line in lines), wanted
    named = {line.split()[0].removeprefix("NodeName=") for line in lines if line.startswith("NodeName=")}
    assert named == {name(n) for n in layout.nodes if n.role != "controller"}
    dev, partition = [line for line in lines if line.startswith("PartitionName=")]
    assert dev.startswith("PartitionName=dev Nodes=ALL Default=YES ")  # HyperPod's universal partition, sinfo's dev*
    members = next(p for p in partition.split() if p.startswith("Nodes=")).removeprefix("Nodes=")
    assert expand(members) == [name(n) for n in layout.workers]
    assert " Default=NO " in partition
    assert "ReturnToService=2" in lines and "TaskPlugin=task/none" in lines
    assert [p for p in slurm_conf_problems(HYPERPOD_SETTINGS, [], []) if not p.startswith("partitions:")] == []


def test_the_munge_key_is_made_once_root_only_and_differs_per_cluster(tmp_path: Path) -> None:
    key = munge_key(tmp_path / "a")
    path = tmp_path / "a" / "cluster" / "munge.key"
    assert len(key) == MUNGE_KEY_SIZE and path.read_bytes() == key
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert munge_key(tmp_path / "a") == key  # kept: every node of the cluster, and each later boot, gets the same
    assert munge_key(tmp_path / "b") != key


def test_a_compute_group_at_zero_nodes_keeps_its_partition_and_login_nodes_run_slurmd() -> None:
    data = {
        "cluster_name": "lab",
        "storage": None,
        "instance_groups": [
            {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
            {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 1},
            {"name": "cpu", "role": "compute", "instance_type": "ml.c5.4xlarge", "count": 1},
            {"name": "spare", "role": "compute", "instance_type": "ml.c5.4xlarge", "count": 0, "partition": "burst"},
        ],
    }
    layout = plan_layout(parse_config(data))
    lines = slurm_conf(layout, INSTANCE_NAMES, cpus=2).splitlines()
    partitions = {
        line.split()[0].removeprefix("PartitionName="): line for line in lines if line.startswith("Partition")
    }
    assert set(partitions) == {DEV_PARTITION, "cpu", "burst"}
    assert "Nodes=" not in partitions["burst"]  # empty: no Nodes= at all
    assert "Nodes=cpu-1 " in partitions["cpu"]
    assert any(line.startswith("NodeName=login-1 ") for line in lines)
    assert not any(line.startswith("NodeName=controller-1 ") for line in lines)


def test_topology_conf_names_the_nodes_as_slurm_conf_does() -> None:
    layout = plan_layout(load_config(ROOT / "examples" / "cpu-cluster.yaml"))
    for naming in (IP_NAMES, INSTANCE_NAMES):
        named = {
            line.split()[0].removeprefix("NodeName=")
            for line in slurm_conf(layout, naming, cpus=2).splitlines()
            if line.startswith("NodeName=")
        }
        leaves = [line.split("Nodes=")[1] for line in topology_conf(layout, naming).splitlines() if " Nodes=" in line]
        assert {name for nodes in leaves for name in expand(nodes)} == named
        assert named == {node_hostname(naming, n) for n in layout.nodes if n.role != "controller"}
