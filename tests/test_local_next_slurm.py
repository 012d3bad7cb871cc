"""Slurm's next major: the runtime brings a cluster up on Debian forky's root file system (Slurm 26.05, Python
3.14) on the emulated HyperPod platform and on the generic platform, and a two-node job runs on each, so options
Slurm renames or removes show up here before AWS ships the major (docs/local-cluster.md, "Slurm's next major").

One small cluster per platform (examples/cpu-cluster.yaml: controller with accounting, login node, two workers).
Alone: ``.venv/bin/pytest tests/test_local_next_slurm.py`` (``make test`` runs two clusters at a time, docs/testing.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hyperpod_local import LocalCluster, breakage, drill_guard
from local_support import cpu_cluster
from training_runtime.groups import COMPUTE
from training_runtime.guard import checks, table
from training_runtime.node import GENERIC, HYPERPOD

NEXT = "26.05"
pytestmark = pytest.mark.local(rootfs=NEXT)

IMPORT_EVERYTHING = """
import importlib, pkgutil, sys, training_runtime
names = [m.name for m in pkgutil.walk_packages(training_runtime.__path__, "training_runtime.")]
for name in names:
    if not name.endswith("__main__"):
        importlib.import_module(name)
print(sys.version_info[0], sys.version_info[1], len(names))
"""
"""Every runtime module imported with warnings as errors: what Python deprecates reaches us here first."""


@pytest.mark.parametrize("platform", [HYPERPOD, GENERIC])
def test_the_runtime_brings_up_slurms_next_major_and_a_two_node_job_runs(platform: str, tmp_path: Path) -> None:
    with cpu_cluster(tmp_path / "cluster", "nx", "10.229.0.0/24", platform=platform, slurm=NEXT) as cluster:
        controller, login = cluster.layout.controller.name, cluster.layout.login
        assert login is not None
        version = cluster.exec(controller, ["sinfo", "--version"]).stdout
        assert re.search(rf"\b{re.escape(NEXT)}\.\d+", version), f"the nodes do not run Slurm {NEXT}: {version}"

        job = cluster.exec(login.name, ["runuser", "-u", "researcher", "--", "srun", "-N2", "-J", "next", "hostname"])
        assert job.returncode == 0, job.stdout + job.stderr
        assert sorted(job.stdout.split()) == sorted(cluster.slurm_name(n.name) for n in cluster.layout.workers)

        accounted = cluster.exec(
            controller,
            ["sh", "-c", "for i in $(seq 30); do sacct -n -X -P -o jobname,state | grep -qx 'next|COMPLETED' && exit; "
             "sleep 1; done; exit 1"],
        )  # fmt: skip
        assert accounted.returncode == 0, "slurmdbd never recorded the job"
        dbd_log = cluster.exec(controller, ["cat", "/var/log/slurm/slurmdbd.log"]).stdout
        assert "innodb_snapshot_isolation is enabled" not in dbd_log, dbd_log

        if platform == HYPERPOD:  # Slurm 25.11's empty topology.yaml, which 24.11 never reads (issue #43)
            guard_repairs_an_empty_topology_yaml(cluster)

        python = cluster.exec(controller, ["python3", "-W", "error", "-c", IMPORT_EVERYTHING], cwd="/opt/ml/lifecycle")
        assert python.returncode == 0, python.stderr
        major, minor, modules = map(int, python.stdout.split())
        assert (major, minor) >= (3, 14) and modules > 50, python.stdout


def guard_repairs_an_empty_topology_yaml(cluster: LocalCluster) -> None:
    """HyperPod's 25.11 breakage (an empty topology.yaml, the compute partitions tagged ``Topology=tree``) on the
    Slurm that reads topology.yaml: the Slurm guard gives each tag a flat topology, jobs run in a tagged partition,
    and slurm.conf keeps HyperPod's tags (the guard never edits it)."""
    controller = cluster.layout.controller.name
    result = drill_guard.drill(cluster, breakage.TOPOLOGY_YAML_EMPTY, table.TOPOLOGY_YAML)
    assert result.seconds < drill_guard.REPAIR_TIMEOUT_S and result.after.accepted, result
    assert cluster.exec(controller, ["cat", "/opt/slurm/etc/topology.yaml"]).stdout == checks.flat_yaml(["tree"])
    partition = next(g.partition or g.name for g in cluster.layout.groups if g.role == COMPUTE)
    slurm_conf = cluster.exec(controller, ["cat", "/opt/slurm/etc/slurm.conf"]).stdout
    assert any(line.startswith(f"PartitionName={partition} ") and line.endswith(" Topology=tree")
               for line in slurm_conf.splitlines()), "HyperPod's tag is left in slurm.conf"  # fmt: skip
    job = cluster.exec(controller, ["srun", "-p", partition, "-N1", "hostname"], timeout=120)
    assert job.returncode == 0, job.stdout + job.stderr
