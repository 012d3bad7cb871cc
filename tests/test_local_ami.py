"""HyperPod's 2026 AMI on the emulated HyperPod platform (root only): the emulator lays down what the AMI sets up
before the lifecycle script (``hyperpod_local.ami``), the runtime finds it, leaves it byte for byte, and says so in
its plan; and, in lifecycle-driven mode, ``runtime.slurm.version`` switches /opt/slurm before Slurm starts."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

from hyperpod_local import LocalCluster, LocalClusterError, ami
from hyperpod_local.plan import UpOptions
from local_support import requires_hyperpod_platform, variant
from training_runtime.node import HYPERPOD

pytestmark = requires_hyperpod_platform

CONTROLLER, WORKER = "controller-1", "workers-1"
CONFIG = """\
cluster_name: ami-cluster
instance_groups:
  - {name: controller, role: controller, instance_type: ml.m5.large, count: 1}
  - {name: workers, role: compute, instance_type: ml.c5.xlarge, count: 1}
runtime:
  accounting: {enabled: true}
"""
VERSION = "  slurm: {version: '25.11'}\n"
AMI_FILES = (
    "/etc/enroot/enroot.conf /usr/bin/enroot /opt/slurm/etc/plugstack.conf /opt/slurm/etc/plugstack.conf.d/pyxis.conf "
    "/etc/logrotate.d/slurm /etc/ssh/ssh_host_ed25519_key /home/ubuntu/.ssh/id_ed25519 "
    "/opt/slurm/etc/accounting.conf /opt/slurm/etc/slurmdbd.conf"
)


def up(tmp_path: Path, extra: str, prefix: str, subnet: str) -> LocalCluster:
    config = tmp_path / "ami.yaml"
    config.write_text(CONFIG + extra)
    try:
        return LocalCluster.up(
            config,
            tmp_path / "work",
            variant(platform=HYPERPOD, preconfigured_ami=True),
            UpOptions(prefix=f"{prefix}{os.getpid() % 10000}", subnet=subnet),
        )
    except LocalClusterError:
        with contextlib.suppress(LocalClusterError):  # a failed bootstrap leaves the nodes running: not here
            LocalCluster.open(tmp_path / "work").down(keep=True)
        raise


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=120)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def left_alone(cluster: LocalCluster, node: str) -> list[str]:
    """The ``left_alone`` lines of the node's plan (``python3 -m training_runtime plan --json``)."""
    out = run(cluster, node, "sh", "-c", "cd /opt/ml/lifecycle && PYTHONPATH=. python3 -m training_runtime plan --json")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    [row] = [r for r in rows if r.get("step") == "ami-setup"]
    return list(row["left_alone"])


@pytest.fixture(scope="module")
def api_cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    cluster = up(tmp_path_factory.mktemp("ami-api"), "", "hpam", "10.219.0.0/24")
    try:
        yield cluster
    finally:
        cluster.down()


def test_the_runtime_leaves_the_amis_pieces_as_the_ami_wrote_them(api_cluster: LocalCluster) -> None:
    assert api_cluster.state.variant.preconfigured_ami
    assert run(api_cluster, WORKER, "cat", "/etc/enroot/enroot.conf") == ami.ENROOT_CONF_TEXT
    accounting = run(api_cluster, CONTROLLER, "cat", "/opt/slurm/etc/accounting.conf")
    assert accounting.startswith("# Slurm accounting as HyperPod's AMI configures it")  # not the runtime's
    assert "hyperpod-cdk" not in run(api_cluster, CONTROLLER, "cat", "/opt/slurm/etc/slurmdbd.conf")
    names = run(api_cluster, CONTROLLER, "srun", "-N1", "hostname").split()  # Slurm runs with the AMI's plugstack
    assert names == [api_cluster.slurm_name(WORKER)]


def test_the_plan_lists_what_it_left_alone(api_cluster: LocalCluster) -> None:
    controller = left_alone(api_cluster, CONTROLLER)
    assert [line.split(":")[0] for line in controller] == [
        "Slurm accounting",
        "container runtime",
        "SSH host keys",
        "log rotation",
        "user homes",
    ]
    assert "in /opt/slurm/etc/accounting.conf; /opt/slurm/etc/slurmdbd.conf present" in controller[0]
    assert "on /opt/dlami/nvme" in controller[1] and "spank_pyxis.so in" in controller[1]
    worker = left_alone(api_cluster, WORKER)
    assert worker[0].split(":")[0] == "container runtime"  # no slurm.conf: no accounting there


def test_a_bootstrap_rerun_leaves_the_amis_files_byte_for_byte(api_cluster: LocalCluster) -> None:
    script = f"sha256sum {AMI_FILES} 2>/dev/null; true"
    before = {node: run(api_cluster, node, "sh", "-c", script) for node in (CONTROLLER, WORKER)}
    assert len(before[CONTROLLER].splitlines()) == 9 and len(before[WORKER].splitlines()) == 7
    for node in (CONTROLLER, WORKER):
        code, output = api_cluster.bootstrap(node)
        assert code == 0, output
        assert '"changed": 0' in output.splitlines()[-1], output
        assert '"event": "left-alone"' in output
    assert {node: run(api_cluster, node, "sh", "-c", script) for node in (CONTROLLER, WORKER)} == before


def test_lifecycle_driven_switches_slurm_before_it_starts(tmp_path: Path) -> None:
    cluster = up(tmp_path, VERSION + "mode: lifecycle-driven\n", "hpas", "10.218.0.0/24")
    try:
        for node in (CONTROLLER, WORKER):
            assert run(cluster, node, "readlink", "/opt/slurm").strip() == "/opt/slurm-25.11"
        assert "SlurmctldHost=" in run(cluster, CONTROLLER, "cat", "/opt/slurm-25.11/etc/slurm.conf")
        # OnCreate takes over from the AMI's own setup: the image's pieces only (trixie's Slurm packages bring
        # their own log rotation), and the runtime's accounting.
        pieces = [line.split(":")[0] for line in left_alone(cluster, CONTROLLER)]
        assert pieces == ["container runtime", "SSH host keys", "log rotation"]
        assert "hyperpod-cdk" in run(cluster, CONTROLLER, "head", "-1", "/opt/slurm/etc/accounting.conf")
        assert run(cluster, CONTROLLER, "srun", "-N1", "hostname").split() == [cluster.slurm_name(WORKER)]
    finally:
        cluster.down()
