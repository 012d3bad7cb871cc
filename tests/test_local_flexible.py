"""A flexible group on the local cluster (root only): one group, two instance types of different sizes, and one
job across both, each node running as its own type."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import yaml

from hyperpod_local import LocalCluster
from hyperpod_local.plan import UpOptions
from local_support import requires_local_cluster, variant
from training_runtime.node import GENERIC

pytestmark = requires_local_cluster

CONFIG = {
    "cluster_name": "flex-cluster",
    "instance_groups": [
        {"name": "controller-machine", "role": "controller", "instance_type": "ml.m5.large", "count": 1},
        # 1 and 2 CPUs (SMT off): the local cluster keeps each type's own CPU count up to the machine's.
        {"name": "mixed", "instance_types": ["ml.c5.large", "ml.c5.xlarge"], "count": 2, "partition": "cpu"},
    ],
}
CONTROLLER, WORKERS = "controller-machine-1", ("mixed-1", "mixed-2")
EXPECTED = {"mixed-1": ("ml.c5.large", 1), "mixed-2": ("ml.c5.xlarge", 2)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("the two types differ in CPUs only on a machine with at least 2")
    base = tmp_path_factory.mktemp("flex-cluster")
    config = base / "flex.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    cluster = LocalCluster.up(
        config,
        base / "work",
        variant(platform=GENERIC),
        UpOptions(prefix=f"hpfx{os.getpid() % 10000}", subnet="10.236.0.0/24"),
    )
    try:
        yield cluster
    finally:
        cluster.down()


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=90)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def test_one_job_runs_across_both_types_each_node_as_its_own(cluster: LocalCluster) -> None:
    cluster.wait_idle(timeout=120, nodes=list(WORKERS))
    script = (
        'echo "$(hostname) $(python3 -c \'import json; print(json.load(open("/etc/hyperpod-cdk/node.json"))'
        '["instance_type"])\') $SLURM_CPUS_ON_NODE"'
    )
    out = run(cluster, CONTROLLER, "srun", "-N2", "-p", "cpu", "--exclusive", "sh", "-c", script)
    seen = {name: (kind, int(cpus)) for name, kind, cpus in (line.split() for line in out.splitlines())}
    assert seen == EXPECTED


def test_slurm_conf_and_sinfo_show_each_types_size(cluster: LocalCluster) -> None:
    conf = run(cluster, CONTROLLER, "cat", "/etc/slurm/slurm.conf")
    lines = {line.split()[0]: line for line in conf.splitlines() if line.startswith("NodeName=")}
    assert " CPUs=1 " in lines["NodeName=mixed-1"] and " CPUs=2 " in lines["NodeName=mixed-2"]
    sinfo = run(cluster, CONTROLLER, "sinfo", "-h", "-N", "-p", "cpu", "-o", "%N %c")
    assert {tuple(line.split()) for line in sinfo.splitlines()} == {("mixed-1", "1"), ("mixed-2", "2")}
