"""Multi-head controllers: the local layout of a controller group of two, and (root only) a failover drill on
a local cluster: the primary controller is powered off under a running and a queued job; the backup takes over
and both jobs finish; the primary, booted again without its lifecycle script, takes control back. The running job
runs until the test releases it, once the backup is in control: it ends under the backup however long the
takeover takes, and no fixed sleep pads the drill."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_cdk.core.config import load_config
from hyperpod_local import LocalCluster
from hyperpod_local.layout import plan_layout
from hyperpod_local.plan import UpOptions
from local_support import requires_local_cluster, variant
from training_runtime.node import GENERIC

CONFIG = Path(__file__).resolve().parent / "fixtures" / "multihead-cluster.yaml"
PRIMARY, BACKUP = "controller-machine-1", "controller-machine-2"
WORKERS = ("worker-group-1-1", "worker-group-1-2")


def test_layout_plans_both_controllers_primary_first() -> None:
    layout = plan_layout(load_config(CONFIG), subnet="10.253.0.0/24")
    assert [(n.name, n.role, n.ip) for n in layout.controllers] == [
        (PRIMARY, "controller", "10.253.0.10"),
        (BACKUP, "controller", "10.253.0.11"),
    ]
    assert layout.controller.name == PRIMARY and layout.capped() == {}
    assert plan_layout(load_config(CONFIG), max_per_group=1).controllers[-1].name == PRIMARY  # the local cap


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("multihead")
    cluster = LocalCluster.up(
        CONFIG,
        workdir,
        variant(platform=GENERIC),
        UpOptions(prefix=f"hpmh{os.getpid() % 10000}", subnet="10.253.0.0/24"),
    )
    try:
        yield cluster
    finally:
        cluster.down()


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=60)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def wait_for(cluster: LocalCluster, node: str, argv: list[str], pattern: str, timeout: float = 120.0) -> str:
    """Run ``argv`` on ``node`` until its output matches ``pattern``; return that output."""
    deadline, out = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        result = cluster.exec(node, argv, timeout=30)
        out = result.stdout + result.stderr
        if re.search(pattern, out):
            return out
        time.sleep(1)
    raise AssertionError(f"{' '.join(argv)} on {node} never matched {pattern!r} in {timeout:.0f} s; last:\n{out}")


def job_state(job: str) -> list[str]:
    return ["scontrol", "show", "job", job]


def primary_runs(cluster: LocalCluster, node: str = PRIMARY) -> int:
    """How many times ``node``'s slurmctld has taken control (its log survives the power-off)."""
    log = run(cluster, node, "cat", "/var/log/slurm/slurmctld.log")
    return log.count("Running as primary controller")


@requires_local_cluster
def test_backup_takes_over_without_losing_a_job_and_the_primary_takes_back(cluster: LocalCluster) -> None:
    worker = WORKERS[0]
    ping = run(cluster, worker, "scontrol", "ping")
    assert f"Slurmctld(primary) at {PRIMARY} is UP" in ping and f"Slurmctld(backup) at {BACKUP} is UP" in ping
    conf = run(cluster, BACKUP, "cat", "/etc/slurm/slurm.conf")
    assert "StateSaveLocation=/fsx/.hyperpod-cdk/slurmctld" in conf
    # A job on both workers that runs until the test releases it, and one queued behind it; each writes a file on
    # the shared file system.
    shared = cluster.workdir / "shared"
    release = "while [ ! -e /fsx/mh-release ]; do sleep 0.5; done; "
    wrap = "hostname > /fsx/mh-{0}.out"
    running = run(cluster, worker, "sbatch", "--parsable", "-N2", "--exclusive", "--wrap", release + wrap.format("a"))
    queued = run(cluster, worker, "sbatch", "--parsable", "-N1", "--exclusive", "--wrap", wrap.format("b"))
    running, queued = running.strip(), queued.strip()
    submitted = time.time()
    wait_for(cluster, worker, job_state(running), r"JobState=RUNNING")
    assert "JobState=PENDING" in run(cluster, worker, *job_state(queued))
    before = primary_runs(cluster)
    assert primary_runs(cluster, BACKUP) == 0  # in standby
    # slurmctld saves job state a few seconds after a change, not on submission: a job accepted less than that
    # before a hard crash is lost (Slurm's behaviour). Crash once the queued job is in the saved state.
    saved = cluster.workdir / "shared/.hyperpod-cdk/slurmctld/job_state"
    deadline = time.monotonic() + 30
    while not (saved.exists() and saved.stat().st_mtime > submitted) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert saved.stat().st_mtime > submitted, "slurmctld never saved its job state on the shared file system"

    cluster.crash(PRIMARY)  # power off: slurmctld and every other process of the primary die at once

    wait_for(cluster, worker, ["scontrol", "ping"], rf"primary\) at {PRIMARY} is DOWN[\s\S]*backup\) at {BACKUP} is UP")
    # The backup takes control (SlurmctldTimeout after the primary went silent) with the job still running on it ...
    deadline = time.monotonic() + 120
    while primary_runs(cluster, BACKUP) == 0 and time.monotonic() < deadline:
        time.sleep(1)
    assert primary_runs(cluster, BACKUP) == 1, "the backup never took control"
    assert "JobState=RUNNING" in run(cluster, worker, *job_state(running))
    (shared / "mh-release").touch()
    # ... and, reading the state the primary saved on shared storage, runs both jobs to the end.
    wait_for(cluster, worker, job_state(running), r"JobState=COMPLETED", timeout=180)
    wait_for(cluster, worker, job_state(queued), r"JobState=COMPLETED", timeout=180)
    assert (shared / "mh-a.out").read_text().strip() in WORKERS
    assert (shared / "mh-b.out").read_text().strip() in WORKERS

    # Booted again as after a reboot: no lifecycle script (HyperPod runs it on new instances only); slurmctld and
    # munged come back because the runtime's first run enabled them (docs/local-cluster.md, "Reboot and replace").
    assert cluster.boot(PRIMARY) is None
    wait_for(cluster, worker, ["scontrol", "ping"], rf"primary\) at {PRIMARY} is UP")
    assert primary_runs(cluster) == before + 1  # Slurm: a restarted primary asks the backup to hand back control
    after = run(cluster, worker, "srun", "-N2", "hostname").split()
    assert sorted(after) == sorted(WORKERS)
