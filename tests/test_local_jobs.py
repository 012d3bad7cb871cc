"""Job scripts behave as on HyperPod (root only): each node's address resolves once, the node list expands,
users have their homes, and a HyperPod-style CPU DDP job script (examples/jobs/cpu_ddp.sbatch) runs unchanged."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_cdk.local import LocalCluster
from local_support import cpu_cluster, requires_local_cluster

pytestmark = requires_local_cluster

JOBS_DIR = Path(__file__).resolve().parent.parent / "examples" / "jobs"
LOGIN, WORKERS = "login-group-1", ("worker-group-1-1", "worker-group-1-2")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with cpu_cluster(tmp_path_factory.mktemp("jobs") / "work", "hpjb", "10.242.0.0/24") as up:
        yield up


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=120)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def test_every_node_resolves_its_own_name_to_one_address(cluster: LocalCluster) -> None:
    for node in cluster.nodes:
        assert run(cluster, node.name, "hostname", "--ip-address").split() == [node.ip]
        hosts = run(cluster, node.name, "cat", "/etc/hosts")
        listed = [
            name
            for line in hosts.splitlines()
            if line.startswith(node.ip + "\t") or line.startswith(node.ip + " ")
            for name in line.split()[1:]
        ]
        names = [
            n for line in hosts.splitlines() if not line.startswith(("#", "127.", "::1")) for n in line.split()[1:]
        ]
        assert len(names) == len(set(names)), f"{node.name}: a name is listed twice in /etc/hosts:\n{hosts}"
        assert node.name in listed


def test_scontrol_expands_the_job_node_list(cluster: LocalCluster) -> None:
    script = 'scontrol show hostnames "$SLURM_JOB_NODELIST"'
    out = run(cluster, LOGIN, "salloc", "-N2", "bash", "-c", script)
    assert out.split() == list(WORKERS)


def test_a_user_gets_a_home_and_a_login_environment(cluster: LocalCluster) -> None:
    out = run(cluster, LOGIN, "runuser", "-l", "researcher", "-c", 'echo "$HOME $(pwd) $(id -un) $USER"')
    home, cwd, user, env_user = out.split()
    assert (cwd, user, env_user) == (home, "researcher", "researcher")
    out = run(
        cluster,
        LOGIN,
        "runuser",
        "-u",
        "researcher",
        "--",
        "srun",
        "-N1",
        "bash",
        "-c",
        'echo "$HOME"; test -w "$HOME"',
    )
    assert out.split() == [home], "the home is the same and writable on the compute node"


def test_a_hyperpod_style_ddp_job_script_runs_unchanged_on_two_nodes(cluster: LocalCluster) -> None:
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.exists():
        pytest.skip(f"{torchrun} does not exist: install torch in this environment (make setup does)")
    fsx = cluster.state.fsx_mount_path
    submit = [
        "sbatch",
        "--parsable",
        f"--chdir={fsx}",
        f"--output={fsx}/%x-%j.out",
        f"--export=ALL,TORCHRUN={torchrun},JOBS_DIR={JOBS_DIR}",
        str(JOBS_DIR / "cpu_ddp.sbatch"),
        "--steps=3",
    ]
    job = run(cluster, LOGIN, *submit).strip().split(";")[0]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        state = run(cluster, LOGIN, "squeue", "-h", "-j", job, "-o", "%T").strip()
        if not state:
            break
        time.sleep(1)
    output = (cluster.workdir / "shared" / f"cpu-ddp-{job}.out").read_text()
    state = run(cluster, cluster.layout.controller.name, "sacct", "-X", "-n", "-j", job, "-o", "State").split()
    assert state == ["COMPLETED"], output
    head = next(line for line in output.splitlines() if line.startswith("head node "))
    assert head.startswith(f"head node {WORKERS[0]} at {cluster.node(WORKERS[0]).ip}; 2 nodes"), head
    assert "cpu-ddp: world_size=4 nodes=2 steps=3 weights_in_sync=True" in output
