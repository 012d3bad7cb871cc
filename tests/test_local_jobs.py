"""Job scripts behave as on HyperPod (root only), on the generic platform and on the emulated HyperPod one: each
node's address resolves once, the node list expands, users have their homes, and a HyperPod-style CPU DDP job
script (examples/jobs/cpu_ddp.sbatch) runs unchanged (with ``--auto-resume=1`` where HyperPod's marker is).

The HyperPod cluster here names its nodes by instance name (``cluster_agent.json`` ``UseInstanceNames``; the other
HyperPod-platform modules keep ``ip-a-b-c-d``) and gives its workers stale resource configs (a group at 0 on the
controller still listed on workers): both variants of docs/local-cluster.md, "Node names and resource_config.json".
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hyperpod_local import LocalCluster, LocalClusterError, agent
from hyperpod_local.paths import JOBS_DIR  # packaged: the HyperPod platform's nodes see it, not the checkout
from hyperpod_local.plan import UpOptions
from hyperpod_local.rootfs import node_rootfs
from local_support import CPU_CLUSTER, requires_local_cluster, variant
from training_runtime.node import GENERIC, HYPERPOD
from training_runtime.node_names import INSTANCE_NAMES

pytestmark = [requires_local_cluster, pytest.mark.slow]  # a drill of minutes: handed out first (tests/conftest.py)

LOGIN, WORKERS = "login-group-1", ("worker-group-1-1", "worker-group-1-2")
PLATFORMS = {GENERIC: ("hpjb", "10.242.0.0/24"), HYPERPOD: ("hpjh", "10.244.0.0/24")}
SPARE = {"name": "spare-group", "role": "compute", "instance_type": "ml.c5.4xlarge", "count": 0, "partition": "spare"}
"""A group at 0 on the HyperPod cluster: its workers' stale copies still list an instance of it."""


@pytest.fixture(scope="module", params=sorted(PLATFORMS))
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    platform = str(request.param)
    if platform == HYPERPOD:
        try:
            node_rootfs()
        except LocalClusterError as error:
            pytest.skip(str(error))
    prefix, subnet = PLATFORMS[platform]
    workdir = tmp_path_factory.mktemp(f"jobs-{platform}") / "work"
    choices: dict[str, object] = {}
    config = CPU_CLUSTER
    if platform == HYPERPOD:
        config = workdir.parent / "with-spare.yaml"
        data = yaml.safe_load(CPU_CLUSTER.read_text())
        data["instance_groups"].append(SPARE)
        config.write_text(yaml.safe_dump(data))
        choices = {"node_names": INSTANCE_NAMES, "stale_worker_copies": True}
    options = UpOptions(prefix=f"{prefix}{os.getpid() % 10000}", subnet=subnet)
    cluster = LocalCluster.up(config, workdir, variant(platform=platform, **choices), options)
    try:
        yield cluster
    finally:
        cluster.down()


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=120)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def test_every_node_resolves_its_own_name_to_one_address(cluster: LocalCluster) -> None:
    for node in cluster.nodes:
        assert run(cluster, node.name, "hostname", "--ip-address").split() == [node.ip]
        hosts = run(cluster, node.name, "cat", "/etc/hosts")
        names = [
            n for line in hosts.splitlines() if not line.startswith(("#", "127.", "::1")) for n in line.split()[1:]
        ]
        assert len(names) == len(set(names)), f"{node.name}: a name is listed twice in /etc/hosts:\n{hosts}"
        assert {node.name, cluster.slurm_name(node.name)} <= set(names)


def test_scontrol_expands_the_job_node_list(cluster: LocalCluster) -> None:
    out = run(cluster, LOGIN, "salloc", "-N2", "bash", "-c", 'scontrol show hostnames "$SLURM_JOB_NODELIST"')
    assert out.split() == sorted(cluster.slurm_name(w) for w in WORKERS)


def test_a_user_gets_a_home_and_a_login_environment(cluster: LocalCluster) -> None:
    out = run(cluster, LOGIN, "runuser", "-l", "researcher", "-c", 'echo "$HOME $(pwd) $(id -un) $USER"')
    home, cwd, user, env_user = out.split()
    assert (cwd, user, env_user) == (home, "researcher", "researcher")
    job = ["srun", "-N1", "bash", "-c", 'echo "$HOME"; test -w "$HOME"']
    out = run(cluster, LOGIN, "runuser", "-u", "researcher", "--", *job)
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
    while time.monotonic() < deadline and run(cluster, LOGIN, "squeue", "-h", "-j", job, "-o", "%T").strip():
        time.sleep(1)
    output = (cluster.workdir / "shared" / f"cpu-ddp-{job}.out").read_text()
    # slurmctld sends a job's end to slurmdbd on its own: on a loaded machine sacct may still say RUNNING for a
    # moment after the job has left squeue (seen once in a full run). Wait for the record, then judge it.
    deadline = time.monotonic() + 30
    while True:
        state = run(cluster, cluster.layout.controller.name, "sacct", "-X", "-n", "-j", job, "-o", "State").split()
        if state not in (["RUNNING"], ["COMPLETING"], ["PENDING"], []) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert state == ["COMPLETED"], output
    first = sorted(cluster.slurm_name(w) for w in WORKERS)[0]
    ip = next(n.ip for n in cluster.nodes if cluster.slurm_name(n.name) == first)
    head = next(line for line in output.splitlines() if line.startswith("head node "))
    assert head.startswith(f"head node {first} at {ip}; 2 nodes"), head
    on_hyperpod = cluster.state.variant.hyperpod
    assert f"auto-resume: {'--auto-resume=1' if on_hyperpod else 'off'}" in output
    assert "cpu-ddp: world_size=4 nodes=2 steps=3 weights_in_sync=True" in output


def test_instance_names_and_stale_worker_copies_on_the_hyperpod_platform(cluster: LocalCluster) -> None:
    """Instance-name mode: host names, slurm.conf and the runtime's recorded Slurm name are the instance names,
    and only the controller has cluster_agent.json; workers' stale copies list the spare group and the runtime
    on them still came up (it said it ignored nothing it needs and guessed the naming from the host name)."""
    if not cluster.state.variant.hyperpod:
        pytest.skip("a HyperPod-platform variant")
    controller = cluster.layout.controller.name
    for node in cluster.nodes:
        assert run(cluster, node.name, "hostname").strip() == node.name
        facts = json.loads(run(cluster, node.name, "cat", "/etc/hyperpod-cdk/node.json"))
        assert facts["slurm_name"] == node.name
    # every Slurm node, the login node too (HyperPod's universal dev partition), by its instance name
    assert sorted(set(run(cluster, controller, "sinfo", "-h", "-N", "-o", "%N").split())) == sorted([LOGIN, *WORKERS])
    agent = json.loads(run(cluster, controller, "cat", "/opt/ml/config/cluster_agent.json"))
    assert agent["SlurmConfiguration"]["UseInstanceNames"] is True
    assert cluster.exec(WORKERS[0], ["test", "-e", "/opt/ml/config/cluster_agent.json"]).returncode == 1

    def spare(node: str) -> list[str]:
        data = json.loads(run(cluster, node, "cat", "/opt/ml/config/resource_config.json"))
        group = next(g for g in data["InstanceGroups"] if g["Name"] == SPARE["name"])
        return [i["InstanceName"] for i in group["Instances"] or []]

    assert spare(controller) == [] and spare(WORKERS[0]) == spare(LOGIN) == ["spare-group-1"]
    worker_log = (cluster.workdir / "logs" / f"{WORKERS[0]}-bootstrap.log").read_text()
    assert "Slurm node names taken to be instance names" in worker_log
    assert "Slurm node names taken" not in (cluster.workdir / "logs" / f"{controller}-bootstrap.log").read_text()


def test_a_replaced_worker_keeps_its_name_and_runs_a_two_node_job(cluster: LocalCluster) -> None:
    """HyperPod's replacement, asked the way AWS documents (``scontrol update node=<name> state=fail
    reason="Action:Replace"``), keeps the Slurm node name (AWS's field notes): in instance-name mode the agent
    finds the instance by that name, a new instance (empty disk) comes back under it and runs a two-node job."""
    if not cluster.state.variant.hyperpod:
        pytest.skip("a HyperPod-platform variant")
    target, controller = WORKERS[1], cluster.layout.controller.name
    run(cluster, target, "touch", "/var/tmp/old-instance")
    started = time.time()
    reason = "reason=Action:Replace"
    run(cluster, controller, "scontrol", "update", f"nodename={cluster.slurm_name(target)}", "state=fail", reason)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        done = [e for e in agent.events(cluster) if e["node"] == target and e["time"] >= started]
        if any(e["event"] in ("replaced", "replacement-failed") for e in done):
            break
        time.sleep(2)
    assert [e["event"] for e in done][-1:] == ["replaced"], done
    assert cluster.exec(target, ["test", "-e", "/var/tmp/old-instance"]).returncode == 1, "a new instance"
    assert run(cluster, target, "hostname").strip() == target
    cluster.wait_idle()
    assert sorted(run(cluster, LOGIN, "srun", "-N2", "hostname").split()) == sorted(WORKERS)
