"""The emulated HyperPod platform (root only): Slurm 24.11 from the trixie node root file system in HyperPod's
layout, HyperPod's part played by local/platform.py, then the runtime's HyperPod-platform path for real.
The default mode (API-driven, OnInitComplete) with accounting and a user; the lifecycle-driven mode (OnCreate)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_local import LocalCluster
from hyperpod_local.hyperpod_platform import torchrun
from hyperpod_local.plan import UpOptions
from local_support import CPU_CLUSTER, check_accounting_where_users_are, requires_hyperpod_platform, variant
from training_runtime.node import HYPERPOD
from training_runtime.node_names import IP_NAMES
from training_runtime.render.hostlist import expand

pytestmark = requires_hyperpod_platform

CONTROLLER, LOGIN = "controller-machine-1", "login-group-1"
WORKERS = ("worker-group-1-1", "worker-group-1-2")
NODES = (CONTROLLER, LOGIN, *WORKERS)
WATCHED = (
    "/opt/slurm/etc/slurm.conf /opt/slurm/etc/accounting.conf /opt/slurm/etc/slurmdbd.conf /etc/munge/munge.key "
    "/etc/passwd /etc/group /var/lib/hyperpod-cdk/bootstrap.done /run/munge/munged.pid /run/slurmctld.pid "
    "/run/slurmd.pid /run/slurmdbd.pid /run/mysqld/mysqld.pid"
)


def up(config: Path, workdir: Path, prefix: str, subnet: str, automatic_topology: bool = True) -> LocalCluster:
    return LocalCluster.up(
        config,
        workdir,
        variant(platform=HYPERPOD, automatic_topology=automatic_topology),
        UpOptions(prefix=f"{prefix}{os.getpid() % 10000}", subnet=subnet),
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = up(CPU_CLUSTER, tmp_path_factory.mktemp("hyperpod-api"), "hphp", "10.249.0.0/24")
    try:
        yield cluster
    finally:
        cluster.down()


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=120)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def test_nodes_run_slurm_24_11_in_hyperpods_layout_under_its_names(cluster: LocalCluster) -> None:
    for node in (CONTROLLER, WORKERS[0]):
        assert run(cluster, node, "sinfo", "--version").split()[1].startswith("24.11.")
        assert run(cluster, node, "sh", "-c", "command -v sinfo").strip() == "/opt/slurm/bin/sinfo"
        ip_name = "ip-" + cluster.node(node).ip.replace(".", "-")
        assert run(cluster, node, "hostname").strip() == (ip_name if cluster.state.variant.naming == IP_NAMES else node)
    conf = run(cluster, CONTROLLER, "cat", "/opt/slurm/etc/slurm.conf")
    assert f"SlurmctldHost={cluster.slurm_name(CONTROLLER)}(" in conf
    partition = next(line for line in conf.splitlines() if line.startswith("PartitionName=cpu "))
    nodes = next(item for item in partition.split() if item.startswith("Nodes="))
    assert expand(nodes.removeprefix("Nodes=")) == [cluster.slurm_name(w) for w in WORKERS]
    # The runtime took its HyperPod path: it never rendered slurm.conf, it only waited for HyperPod's.
    assert "Written by the hyperpod-local emulator in HyperPod's place" in conf
    assert run(cluster, WORKERS[0], "test", "-d", "/opt/sagemaker_cluster") == ""
    # Configless login and compute nodes, as HyperPod runs them: no local copy, slurmd's fetched one.
    probe = "test -e /opt/slurm/etc/slurm.conf || grep -c '^include accounting.conf' /run/slurm/conf/slurm.conf"
    assert {run(cluster, node, "sh", "-c", probe) for node in (LOGIN, *WORKERS)} == {"1\n"}


def test_two_node_job_from_the_login_node(cluster: LocalCluster) -> None:
    names = run(cluster, LOGIN, "srun", "-N2", "hostname").split()
    assert sorted(names) == sorted(cluster.slurm_name(w) for w in WORKERS)


def test_dev_partition_holds_every_node_but_batch_jobs_keep_off_the_login_node(cluster: LocalCluster) -> None:
    """HyperPod's universal dev partition (the default) lists every Slurm node, the login node too; the login
    node's bootstrap drained it (not with HyperPod's Action: words), so a job in dev gets the two workers and a
    three-node job cannot start; resumed by hand, then replaced as HyperPod replaces a node (same name, the
    lifecycle script again), it is drained again."""
    login = cluster.slurm_name(LOGIN)
    assert "dev*" in run(cluster, CONTROLLER, "sinfo", "-h", "-o", "%P").split()
    members = run(cluster, CONTROLLER, "sinfo", "-h", "-p", "dev", "-N", "-o", "%N").split()
    assert sorted(members) == sorted(cluster.slurm_name(n) for n in (LOGIN, *WORKERS))
    state = run(cluster, CONTROLLER, "sinfo", "-h", "-N", "-n", login, "-o", "%t|%E").strip()
    assert state.startswith("drain|hyperpod-cdk:login-node:"), state
    names = run(cluster, LOGIN, "srun", "-p", "dev", "-N2", "hostname").split()
    assert sorted(names) == sorted(cluster.slurm_name(w) for w in WORKERS)
    three = cluster.exec(LOGIN, ["srun", "-p", "dev", "-N3", "--immediate=5", "hostname"], timeout=120)
    assert three.returncode != 0 and login not in three.stdout, three.stdout + three.stderr
    run(cluster, CONTROLLER, "scontrol", "update", f"nodename={login}", "state=resume")
    code, output = cluster.replace(LOGIN)
    assert code == 0, output
    state = run(cluster, CONTROLLER, "sinfo", "-h", "-N", "-n", login, "-o", "%t|%E").strip()
    assert state.startswith("drain|hyperpod-cdk:login-node:"), state


def test_hyperpods_automatic_topology_reaches_every_node(cluster: LocalCluster) -> None:
    """The emulated agent's topology.conf on the controller and TopologyPlugin=topology/tree in slurm.conf;
    slurmctld answers `scontrol show topology` with every Slurm node under a switch, and configless nodes
    got the file with slurm.conf (sbatch from the login node works)."""
    assert "TopologyPlugin=topology/tree" in run(cluster, CONTROLLER, "cat", "/opt/slurm/etc/slurm.conf")
    topology = run(cluster, CONTROLLER, "scontrol", "show", "topology")
    leaves = [line for line in topology.splitlines() if " Nodes=" in line and "Level=0" in line]
    in_tree = {name for line in leaves for name in expand(line.split("Nodes=")[1].split()[0])}
    assert in_tree == {cluster.slurm_name(n) for n in (LOGIN, *WORKERS)}, topology
    assert run(cluster, LOGIN, "sh", "-c", "grep -c ^SwitchName= /run/slurm/conf/topology.conf").strip() != "0"
    assert "Submitted batch job" in run(cluster, LOGIN, "sbatch", "--wait", "-p", "dev", "--wrap", "true")


def test_users_and_accounting(cluster: LocalCluster) -> None:
    ids = {run(cluster, node, "id", "researcher").strip() for node in NODES}
    assert ids == {"uid=2001(researcher) gid=2001(researcher) groups=2001(researcher)"}
    # Jobs find the pinned torch on every node (as root: this machine's Python may live in root's home).
    python = str(Path(torchrun()).with_name("python"))
    out = run(cluster, LOGIN, "srun", "-N2", python, "-c", "import torch; print(torch.__version__)")
    assert [v.split("+")[0] for v in out.split()] == ["2.13.0", "2.13.0"]
    run(cluster, LOGIN, "runuser", "-u", "researcher", "--", "srun", "-N2", "-J", "acct-probe", "true")
    for _ in range(60):
        out = run(cluster, CONTROLLER, "sacct", "-a", "-n", "-X", "-P", "-o", "jobname,user,state")
        if "acct-probe|researcher|COMPLETED" in out.split():
            break
        cluster.exec(CONTROLLER, ["sleep", "1"])
    else:
        raise AssertionError(f"sacct never showed the job:\n{out}")
    check_accounting_where_users_are(cluster, LOGIN, "researcher")


def test_bootstrap_rerun_changes_nothing(cluster: LocalCluster) -> None:
    script = f"for f in {WATCHED}; do [ -e $f ] && sha256sum $f; done; true"
    before = {node: run(cluster, node, "sh", "-c", script) for node in NODES}
    for node in NODES:
        code, output = cluster.bootstrap(node)
        assert code == 0, output
        assert '"changed": 0' in output.splitlines()[-1], output
    assert {node: run(cluster, node, "sh", "-c", script) for node in NODES} == before


def test_lifecycle_driven_mode_on_the_hyperpod_platform(tmp_path: Path) -> None:
    """OnCreate with provisioning_parameters.json: HyperPod writes slurm.conf and runs munge, the runtime
    starts the Slurm daemons itself (slurmd from the controller's configuration), accounting included. With
    automatic topology off (an AMI before 2026-04): no topology.conf, no TopologyPlugin, and sbatch works."""
    config = tmp_path / "lifecycle.yaml"
    config.write_text(CPU_CLUSTER.read_text() + "mode: lifecycle-driven\n")
    cluster = up(config, tmp_path / "work", "hplc", "10.248.0.0/24", automatic_topology=False)
    try:
        assert cluster.state.mode == "lifecycle-driven"
        params = run(cluster, WORKERS[0], "cat", "/opt/ml/config/provisioning_parameters.json")
        assert '"worker_groups"' in params
        assert run(cluster, WORKERS[0], "sinfo", "--version").split()[1].startswith("24.11.")
        names = run(cluster, LOGIN, "srun", "-N2", "hostname").split()
        assert sorted(names) == sorted(cluster.slurm_name(w) for w in WORKERS)
        assert "TopologyPlugin" not in run(cluster, CONTROLLER, "cat", "/opt/slurm/etc/slurm.conf")
        assert run(cluster, CONTROLLER, "sh", "-c", "test -e /opt/slurm/etc/topology.conf || echo none") == "none\n"
        assert "Submitted batch job" in run(cluster, LOGIN, "sbatch", "--wait", "--wrap", "true")
        check_accounting_where_users_are(cluster, LOGIN, "researcher")
    finally:
        cluster.down()
