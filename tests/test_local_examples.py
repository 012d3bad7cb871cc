"""Every example config comes up on the local cluster (root only), its hardware declared emulated where this
machine cannot have it, and ``up`` fails at once, naming the reason, when the health checks drain a node.

One cluster at a time on one prefix and subnet, one node per group, and one ``srun`` across the workers each."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.core.config import load_config
from hyperpod_local import LocalCluster, LocalClusterError, staging
from hyperpod_local.plan import UpOptions
from local_support import HYPERPOD_REASON, requires_local_cluster, variant
from training_runtime.node import GENERIC, HYPERPOD
from training_runtime.params import ProvisioningParameters

pytestmark = requires_local_cluster  # each test brings up its own cluster (tests/conftest.py CLUSTER_PER_TEST)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(ROOT.glob("examples/*.yaml"))
PREFIX = f"hpex{os.getpid() % 10000}"
SUBNET = "10.243.0.0/24"


def bring_up(config: Path | None, workdir: Path, platform: str, idle_timeout: float = 180.0) -> LocalCluster:
    """The cluster up; a failed ``up`` leaves its nodes for inspection, which a test takes down at once."""
    options = UpOptions(prefix=PREFIX, subnet=SUBNET, max_per_group=1, idle_timeout=idle_timeout)
    try:
        return LocalCluster.up(config, workdir, variant(platform=platform), options)
    except BaseException:
        if (workdir / "state.json").exists():
            LocalCluster.open(workdir).down()
        raise


def partitions_of(cluster: LocalCluster, workers: list[str]) -> dict[str, list[str]]:
    """Each worker under the first partition sinfo lists it in (examples put groups in partitions of their own)."""
    listed = cluster.exec(cluster.layout.controller.name, ["sinfo", "-h", "-N", "-o", "%N %P"]).stdout
    found: dict[str, list[str]] = {}
    placed: set[str] = set()
    for line in listed.splitlines():
        node, partition = line.split()
        if node in workers and node not in placed:
            placed.add(node)
            found.setdefault(partition.rstrip("*"), []).append(node)
    assert placed == set(workers), f"sinfo lists {sorted(placed)}, the layout {sorted(workers)}"
    return found


@pytest.mark.parametrize("example", [*EXAMPLES, None], ids=lambda p: p.name if p else "default")
def test_every_example_comes_up_and_runs_a_step_on_every_worker(example: Path | None, tmp_path: Path) -> None:
    """The default config (API-driven, trn1 workers) on the emulated HyperPod platform - Slurm 24.11, HyperPod's
    part, the runtime's HyperPod path - as a new user's cluster runs; the examples on the generic platform, but
    an example with Slurm's REST API on, which the local cluster runs on the HyperPod platform only (its control
    plane serves the key's secret). An example with a ``directory`` names the organization's directory server and
    its CA's S3 object, which no local cluster reaches: it is synthesized and checked with every example
    (tests/test_examples.py), and tests/test_local_directory.py brings the same sections up against a real slapd."""
    config = load_config(example) if example is not None else None
    if config is not None and config.directory is not None:
        pytest.skip(f"{example.name}: its directory is the organization's; test_local_directory.py proves the sections")
    rest_api = config.rest_api if config is not None else None
    on_hyperpod = example is None or (rest_api is not None and rest_api.enabled)
    if on_hyperpod and HYPERPOD_REASON is not None:
        pytest.skip(HYPERPOD_REASON)
    platform = HYPERPOD if on_hyperpod else GENERIC
    cluster = bring_up(example, tmp_path / "work", platform=platform)
    try:
        workers = [cluster.slurm_name(n.name) for n in cluster.layout.workers]
        ran: list[str] = []
        for partition, nodes in partitions_of(cluster, workers).items():  # a job runs in one partition
            out = cluster.exec(
                cluster.layout.controller.name,
                ["srun", "-p", partition, "-w", ",".join(nodes), f"-N{len(nodes)}", "hostname"],
                timeout=120,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            ran += out.stdout.split()
        assert sorted(ran) == sorted(workers)
        if platform == HYPERPOD:
            version = cluster.exec(cluster.layout.controller.name, ["sinfo", "--version"]).stdout
            assert version.split()[-1].startswith("24.11."), version
        status = cluster.status()
        for node in status["nodes"]:
            assert node["hardware"].startswith(node["instance_type"])
        trn1 = [n for n in status["nodes"] if n["instance_type"].startswith("ml.trn1.")]
        for node in trn1:
            assert "emulated: 16 Neuron devices, 8 EFA interfaces declared, not present" in node["hardware"]
            facts = cluster.exec(node["name"], ["cat", "/etc/hyperpod-cdk/node.json"]).stdout
            assert '"emulated_hardware": true' in facts
    finally:
        cluster.down()


def test_up_fails_at_once_naming_the_drain_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the emulated-hardware declaration a trn1 worker is rightly drained (no Neuron devices): ``up``
    says so instead of waiting for its idle timeout."""
    real = staging.emulated

    def undeclared(*args: Any, **kwargs: Any) -> ProvisioningParameters:
        return dataclasses.replace(real(*args, **kwargs), emulation=None)

    monkeypatch.setattr(staging, "emulated", undeclared)
    workdir = tmp_path / "work"
    try:
        with pytest.raises(LocalClusterError) as error:
            bring_up(ROOT / "examples" / "trn1-cluster.yaml", workdir, GENERIC, idle_timeout=900)
    finally:
        if (workdir / "state.json").exists():  # up succeeded after all
            LocalCluster.open(workdir).down()
    message = str(error.value)
    assert "compute nodes are out of service and will not become idle" in message
    assert "  - trn1-1: hyperpod-cdk:neuron:" in message
    assert "not idle after" not in message


def test_the_cli_brings_up_a_synthesized_assembly_and_names_its_emulated_hardware(tmp_path: Path) -> None:
    """``local up --from cdk.out``: what the stack uploads runs, and ``local status`` names the hardware."""
    import json
    import subprocess
    import sys

    from support import build_example, fast_app

    app = fast_app(outdir=str(tmp_path / "cdk.out"))
    build_example(ROOT / "examples" / "trn1-cluster.yaml", app)
    app.synth()
    workdir = tmp_path / "work"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "hyperpod_cdk.cli", "local", *args, "--workdir", str(workdir)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)

    up = cli("up", "--from", str(tmp_path / "cdk.out"), "--prefix", PREFIX, "--subnet", SUBNET, "--max-per-group", "1")
    try:
        assert up.returncode == 0, up.stderr
        assert "emulated: 16 Neuron devices, 8 EFA interfaces declared, not present" in up.stdout
        report = json.loads(cli("status", "--json").stdout)
        assert report["config"] == f"{tmp_path / 'cdk.out'}#hyperpod-trn1-cluster"
        (worker,) = [n for n in report["nodes"] if n["role"] == "compute"]
        assert worker["hardware"].startswith("ml.trn1.32xlarge (emulated: 16 Neuron devices")
        # the command line's default platform is HyperPod's: Slurm 24.11, HyperPod's node names
        assert report["platform"] == "hyperpod" and worker["slurm_name"].startswith("ip-")
        assert f"{worker['slurm_name']} idle" in report["sinfo"]
    finally:
        assert cli("down").returncode == 0
