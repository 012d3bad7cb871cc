"""The real lifecycle assets on a local cluster (root only): bring-up from an example config, a 2-node
job, accounting, idempotent re-runs, a bootstrap killed halfway, and malformed inputs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from hyperpod_local import LocalCluster, agent
from hyperpod_local.namespaces import node_environment
from hyperpod_local.staging import LIFECYCLE_DIR, provision
from local_support import check_accounting_where_users_are, cpu_cluster, requires_local_cluster
from training_runtime.params import ENTRYPOINT_BY_MODE
from training_runtime.paths import RESOURCE_CONFIG_PATH

pytestmark = requires_local_cluster

CONTROLLER, LOGIN = "controller-machine-1", "login-group-1"
WORKERS = ("worker-group-1-1", "worker-group-1-2")
NODES = (CONTROLLER, LOGIN, *WORKERS)
WATCHED_FILES = (
    "/etc/slurm/slurm.conf /etc/slurm/cgroup.conf /etc/slurm/gres.conf /etc/slurm/slurmdbd.conf /etc/munge/munge.key "
    "/etc/hosts /etc/passwd /etc/group /etc/sudoers.d/hyperpod-cdk /etc/ssh/ssh_config.d/hyperpod-cdk.conf "
    "/var/lib/hyperpod-cdk/bootstrap.done /fsx/home/researcher/.ssh/authorized_keys"
)
PID_FILES = "/run/munge/munged.pid /run/slurmctld.pid /run/slurmd.pid /run/slurmdbd.pid /run/mysqld/mysqld.pid"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with cpu_cluster(tmp_path_factory.mktemp("local-cluster"), "hpit", "10.252.0.0/24") as cluster:
        yield cluster


def run(cluster: LocalCluster, node: str, *argv: str, check: bool = True) -> str:
    result = cluster.exec(node, list(argv), timeout=60)
    if check:
        assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def fingerprint(cluster: LocalCluster, node: str) -> str:
    """Checksums of the files bootstrap manages and the PIDs of the node's daemons."""
    script = f"for f in {WATCHED_FILES}; do [ -e $f ] && sha256sum $f; done; for p in {PID_FILES}; do "
    script += '[ -e $p ] && echo "$p $(cat $p)"; done; true'
    return run(cluster, node, "sh", "-c", script)


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_two_node_job_from_the_login_node(cluster: LocalCluster) -> None:
    names = run(cluster, LOGIN, "srun", "-N2", "hostname").split()
    assert sorted(names) == sorted(WORKERS)
    # The generic platform has none of HyperPod's: no marker, Slurm's own srun, no emulated HyperPod agent.
    assert run(cluster, LOGIN, "sh", "-c", "command -v srun; test -e /opt/sagemaker_cluster || echo no marker") == (
        "/usr/bin/srun\nno marker\n"
    )
    assert not agent.enabled(cluster) and not agent.running(cluster)


def test_users_have_the_same_ids_everywhere_and_a_shared_home(cluster: LocalCluster) -> None:
    ids = {run(cluster, node, "id", "researcher").strip() for node in NODES}
    assert ids == {"uid=2001(researcher) gid=2001(researcher) groups=2001(researcher)"}
    assert run(cluster, LOGIN, "getent", "passwd", "researcher").split(":")[5] == "/fsx/home/researcher"


def test_accounting_records_a_users_job(cluster: LocalCluster) -> None:
    run(cluster, LOGIN, "runuser", "-u", "researcher", "--", "srun", "-N2", "-J", "acct-probe", "true")

    def recorded() -> bool:
        out = run(cluster, CONTROLLER, "sacct", "-a", "-n", "-X", "-P", "-o", "jobname,user,state", check=False)
        return "acct-probe|researcher|COMPLETED" in out.split()

    wait_for(recorded, "sacct to show the job")
    check_accounting_where_users_are(cluster, LOGIN, "researcher")


def test_munge_key_is_shared_but_root_only(cluster: LocalCluster) -> None:
    keys = {run(cluster, node, "sha256sum", "/etc/munge/munge.key").split()[0] for node in NODES}
    assert len(keys) == 1
    secrets = run(cluster, CONTROLLER, "stat", "-c", "%a %U", "/fsx/.hyperpod-cdk/secrets", "/etc/munge/munge.key")
    assert secrets.split("\n")[:2] == ["700 root", "400 munge"]
    bucket = cluster.workdir / "bucket"
    key = (cluster.workdir / "shared/.hyperpod-cdk/secrets/munge.key").read_bytes()
    assert not any(key in p.read_bytes() for p in bucket.rglob("*") if p.is_file())


def test_bootstrap_rerun_changes_nothing(cluster: LocalCluster) -> None:
    before = {node: fingerprint(cluster, node) for node in NODES}
    for node in NODES:
        code, output = cluster.bootstrap(node)
        assert code == 0, output
        assert '"changed": 0' in output.splitlines()[-1], output
    assert {node: fingerprint(cluster, node) for node in NODES} == before


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        ("resource_config", "resource config is invalid"),
        ("parameters", "provisioning parameters are invalid"),
    ],
)
def test_malformed_inputs_fail_clearly_and_leave_the_node_untouched(
    cluster: LocalCluster, broken: str, expected: str
) -> None:
    node = WORKERS[0]
    before = fingerprint(cluster, node)
    copy = "/tmp/broken-lifecycle"
    script = f"rm -rf {copy} && cp -r {LIFECYCLE_DIR} {copy} && cp {RESOURCE_CONFIG_PATH} {copy}/resource_config.json"
    run(cluster, node, "sh", "-c", script)
    if broken == "resource_config":
        run(cluster, node, "sh", "-c", f'echo \'{{"InstanceGroups": [{{"Name": 7}}]}}\' > {copy}/resource_config.json')
    else:
        run(
            cluster, node, "sh", "-c", f'sed -i \'s/"contract_version": 2/"contract_version": 99/\' {copy}/*param*.json'
        )
    entry = ENTRYPOINT_BY_MODE[cluster.state.mode]
    result = cluster.exec(
        node, ["bash", f"{copy}/{entry}"], env={"SAGEMAKER_RESOURCE_CONFIG_PATH": f"{copy}/resource_config.json"}
    )
    assert result.returncode == 2
    failure = json.loads([line for line in result.stdout.splitlines() if '"failed"' in line][-1])
    assert failure["step"] == "inputs" and expected in failure["error"]
    assert "hyperpod-cdk: FAILED at inputs" in result.stderr
    assert fingerprint(cluster, node) == before


def test_bootstrap_killed_halfway_then_rerun_converges(cluster: LocalCluster) -> None:
    """A replaced worker (fresh disk) whose bootstrap is killed while it waits for the munge key, then
    re-run: it converges, joins Slurm and runs jobs. The other nodes are not disturbed."""
    node = WORKERS[1]
    cluster.crash(node)
    shutil.rmtree(cluster.namespaces.node_dir(node) / "upper")
    cluster.boot(node, bootstrap=False)
    shared_key = cluster.workdir / "shared/.hyperpod-cdk/secrets/munge.key"
    parked = shared_key.with_name("munge.key.parked")
    shared_key.rename(parked)
    entry = f"{LIFECYCLE_DIR}/{ENTRYPOINT_BY_MODE[cluster.state.mode]}"
    provision(cluster, cluster.node(node))
    argv = cluster.namespaces.command(node, ["bash", entry], cwd=LIFECYCLE_DIR)
    env = node_environment({"SAGEMAKER_RESOURCE_CONFIG_PATH": RESOURCE_CONFIG_PATH})
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        state = cluster.namespaces.node_dir(node) / "upper/var/lib/hyperpod-cdk/state.json"

        def waiting_for_key() -> bool:
            return state.exists() and '"munge-key"' in state.read_text()

        wait_for(waiting_for_key, "bootstrap to reach the munge-key step")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        parked.rename(shared_key)
    steps = json.loads(state.read_text())["steps"]
    assert steps["hosts"]["result"] == "changed" and steps["munge-key"]["result"] == "running"
    assert "daemon:slurmd" not in steps
    assert not (state.parent / "bootstrap.done").exists()
    code, output = cluster.bootstrap(node)
    assert code == 0, output
    assert (state.parent / "bootstrap.done").exists()
    cluster.wait_idle(timeout=60)
    assert sorted(run(cluster, LOGIN, "srun", "-N2", "hostname").split()) == sorted(WORKERS)
