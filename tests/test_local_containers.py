"""runtime.containers on the emulated HyperPod platform with the 2026 AMI, and the Slurm guard's drills (root only;
one cluster for both).

The emulator lays down the AMI's container files (``hyperpod_local.ami``: enroot.conf on /opt/dlami/nvme, pyxis in
plugstack.conf through an explicit include, a stand-in enroot). Enroot and pyxis themselves are not installed (they
are not packaged for Debian and cannot be downloaded here), so no container runs: the test checks the files the
runtime's container steps leave on the nodes, that Slurm still runs jobs with them, and that a re-run changes
nothing. What it plays by hand, after the cluster is up: an instance store mounted at /opt/dlami/nvme (a tmpfs), an
older AMI's enroot.conf on the root volume and a cgroup.conf without ConstrainDevices. The shared cache is not played
here: the emulated HyperPod nodes' parameters file has no FSx flag, so the runtime sees no shared file system there
(the fake-root tests cover it).

The drills (issue #43) break Slurm on the same cluster the ways HyperPod broke it in 2026 (``hyperpod_local.breakage``)
and check that the guard repairs each within a minute while jobs are accepted, and leaves alone what its table says to
leave (``training_runtime.guard.table``). Slurm 25.11's ``topology.yaml`` breakage needs a Slurm that reads
topology.yaml: tests/test_local_next_slurm.py drills it on 26.05.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

import pytest

from hyperpod_local import LocalCluster, LocalClusterError, ami, breakage, drill_guard, hyperpod_files
from hyperpod_local.control_plane.model import Group
from hyperpod_local.control_plane.nodes import LocalClusterBackend
from hyperpod_local.plan import UpOptions
from local_support import requires_hyperpod_platform, variant
from training_runtime.guard import checks, conf, plugstack, table
from training_runtime.node import HYPERPOD

pytestmark = requires_hyperpod_platform

CONTROLLER, WORKER = "controller-1", "workers-1"
CONFIG = """\
cluster_name: containers-cluster
instance_groups:
  - {name: controller, role: controller, instance_type: ml.m5.large, count: 1}
  - {name: workers, role: compute, instance_type: ml.c5.xlarge, count: 1}
"""
ETC = "/opt/slurm/etc"
OLDER_AMI_ENROOT = (  # enroot's package defaults: every path on the root volume
    "ENROOT_RUNTIME_PATH ${XDG_RUNTIME_DIR}/enroot\n"
    "ENROOT_CACHE_PATH ${XDG_CACHE_HOME}/enroot\n"
    "ENROOT_DATA_PATH ${XDG_DATA_HOME}/enroot\n"
    "#ENROOT_TEMP_PATH ${TMPDIR:-/tmp}\n"
    "ENROOT_MOUNT_HOME no\n"
)


def eventually(cluster: LocalCluster, node: str, path: str, wanted: str, timeout_s: float = 60) -> str:
    """``path``'s text on ``node`` once it is ``wanted`` (a push reaching a configless node), or its last text."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = cluster.exec(node, ["cat", path]).stdout
        if text == wanted:
            break
        time.sleep(0.25)
    return text


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=120)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def bootstrap(cluster: LocalCluster, node: str) -> str:
    code, output = cluster.bootstrap(node)
    assert code == 0, output
    return output.splitlines()[-1]


def plan_rows(cluster: LocalCluster, node: str) -> dict[str, dict[str, object]]:
    out = run(cluster, node, "sh", "-c", "cd /opt/ml/lifecycle && PYTHONPATH=. python3 -m training_runtime plan --json")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"step"' in line]
    return {str(r["step"]): r for r in rows if "needed" in r}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp_path = tmp_path_factory.mktemp("containers")
    config = tmp_path / "containers.yaml"
    config.write_text(CONFIG)
    try:
        up = LocalCluster.up(
            config,
            tmp_path / "work",
            variant(platform=HYPERPOD, preconfigured_ami=True),
            UpOptions(prefix=f"hpct{os.getpid() % 10000}", subnet="10.217.0.0/24"),
        )
    except LocalClusterError:
        with contextlib.suppress(LocalClusterError):
            LocalCluster.open(tmp_path / "work").down(keep=True)
        raise
    try:
        yield up
    finally:
        up.down()


def test_on_the_amis_files_nothing_moves_and_the_wildcard_include_is_made_explicit(cluster: LocalCluster) -> None:
    # No instance store is mounted in the emulation: the AMI's NVMe paths stay byte for byte, with a warning.
    assert run(cluster, WORKER, "cat", "/etc/enroot/enroot.conf") == ami.ENROOT_CONF_TEXT
    rows = plan_rows(cluster, WORKER)
    assert rows["enroot-paths"]["needed"] is False
    warning = [line for line in rows["enroot-paths"]["left_alone"] if line.startswith("WARNING")]  # type: ignore[attr-defined]
    assert warning and "no instance store is mounted" in warning[0]
    # The node image's plugstack.conf is Debian's package's, `include /etc/slurm/plugstack.conf.d/*.conf` (/etc/slurm
    # links to /opt/slurm/etc), so the AMI's explicit one was not laid over it: the controller's bootstrap made the
    # wildcard explicit, and its push sent that to the configless worker.
    # The Slurm guard then copied that include's lines in (configless Slurm does not send an include by a path), and
    # pushed the result to the worker.
    included = "/etc/slurm/plugstack.conf.d/pyxis.conf"
    explicit = (
        "# hyperpod-cdk: `include /etc/slurm/plugstack.conf.d/*.conf` made explicit (configless Slurm cannot expand "
        f"wildcards)\n{plugstack.BEGIN.format(included)}\n{ami.PYXIS_CONF}{plugstack.END.format(included)}\n"
    )
    assert run(cluster, CONTROLLER, "cat", ETC + "/plugstack.conf") == explicit
    assert eventually(cluster, WORKER, "/var/spool/slurmd/conf-cache/plugstack.conf", explicit) == explicit
    assert (
        run(cluster, CONTROLLER, "cat", ETC + "/plugstack.conf.d/pyxis.conf") == ami.PYXIS_CONF
    )  # not registered again
    assert run(cluster, CONTROLLER, "srun", "-N1", "hostname").split() == [cluster.slurm_name(WORKER)]


def test_an_older_amis_enroot_conf_moves_to_nvme_and_devices_are_constrained(cluster: LocalCluster) -> None:
    run(cluster, WORKER, "sh", "-c", "mkdir -p /opt/dlami/nvme && mount -t tmpfs nvme /opt/dlami/nvme")
    run(cluster, WORKER, "sh", "-c", f"printf '%s' '{OLDER_AMI_ENROOT}' >/etc/enroot/enroot.conf")
    run(cluster, CONTROLLER, "sh", "-c", f"echo 'CgroupPlugin=autodetect' >{ETC}/cgroup.conf")
    assert '"changed": 0' not in bootstrap(cluster, CONTROLLER)
    assert run(cluster, CONTROLLER, "cat", ETC + "/cgroup.conf") == "CgroupPlugin=autodetect\nConstrainDevices=yes\n"
    cached = ""
    for _ in range(60):  # the controller's push (scontrol reconfigure) reaches the configless worker
        cached = cluster.exec(WORKER, ["cat", "/var/spool/slurmd/conf-cache/cgroup.conf"]).stdout
        if "ConstrainDevices=yes" in cached:
            break
        time.sleep(1)
    assert cached == "CgroupPlugin=autodetect\nConstrainDevices=yes\n"
    assert '"changed": 0' not in bootstrap(cluster, WORKER)
    assert run(cluster, WORKER, "cat", "/etc/enroot/enroot.conf") == (
        "ENROOT_RUNTIME_PATH /opt/dlami/nvme/tmp/enroot/user-$(id -u)\n"
        "ENROOT_CACHE_PATH /opt/dlami/nvme/enroot\n"
        "ENROOT_DATA_PATH /opt/dlami/nvme/tmp/enroot/data/user-$(id -u)\n"
        "ENROOT_TEMP_PATH /opt/dlami/nvme/tmp\n"
        "ENROOT_MOUNT_HOME no\n"
    )
    directories = ("/opt/dlami/nvme/tmp", "/opt/dlami/nvme/tmp/enroot/data", "/opt/dlami/nvme/enroot")
    assert run(cluster, WORKER, "stat", "-c", "%a", *directories).split() == ["1777"] * 3
    for node in (CONTROLLER, WORKER):  # converged: a re-run changes nothing
        assert '"changed": 0' in bootstrap(cluster, node)
    assert run(cluster, CONTROLLER, "srun", "-N1", "hostname").split() == [cluster.slurm_name(WORKER)]


# --- The Slurm guard's drills (issue #43), on the same cluster: HyperPod breaks Slurm, the guard repairs it ---------
TREE = ETC + "/topology.conf"
DRILLS: list[drill_guard.GuardDrill] = []
"""Every drill's figures, in order (the benchmark reports the same from bench/guard_drills.py)."""


def repairs_since(cluster: LocalCluster, node: str, since: float) -> list[dict[str, object]]:
    return drill_guard.guard_events(cluster, node, "guard_repair", since)


def test_a_topology_left_without_a_tree_gets_one_switch_that_follows_the_nodes_and_hyperpods_own_tree_is_left(
    cluster: LocalCluster,
) -> None:
    for kind in (breakage.TOPOLOGY_EMPTY, breakage.TOPOLOGY_MISSING):
        result = drill_guard.drill(cluster, kind, table.TOPOLOGY_TREE)
        DRILLS.append(result)
        assert result.seconds < drill_guard.REPAIR_TIMEOUT_S and result.after.accepted, result
        assert run(cluster, CONTROLLER, "cat", TREE) == checks.flat_tree([cluster.slurm_name(WORKER)])
    # Topology on and off as nodes join and leave, while the agent still writes no tree: the guard's tree follows.
    backend = LocalClusterBackend(cluster.workdir, LocalCluster.open)
    workers = Group("workers", "Compute", "ml.c5.xlarge", 2, "", {})
    joined = backend.allocate(workers)
    backend.boot(workers, joined)
    both = [cluster.slurm_name(WORKER), LocalCluster.open(cluster.workdir).slurm_name(joined.name)]
    assert eventually(cluster, CONTROLLER, TREE, checks.flat_tree(both)) == checks.flat_tree(both)
    assert drill_guard.sbatch(cluster, CONTROLLER).accepted
    backend.terminate(joined)
    one = checks.flat_tree([cluster.slurm_name(WORKER)])
    assert eventually(cluster, CONTROLLER, TREE, one) == one
    breakage.heal(cluster)  # HyperPod writes its own tree again: the guard leaves it as it is
    healed_at = time.time()  # a check after this one saw every file heal wrote
    drill_guard.wait_checked(cluster, CONTROLLER, healed_at)
    hyperpods = hyperpod_files.topology_conf(cluster.layout, cluster.state.variant.naming)
    assert run(cluster, CONTROLLER, "cat", TREE) == hyperpods
    assert repairs_since(cluster, CONTROLLER, healed_at) == []
    assert drill_guard.sbatch(cluster, CONTROLLER).accepted


def test_topology_turned_off_by_the_operator_is_left_alone(cluster: LocalCluster) -> None:
    breakage.break_slurm(cluster, breakage.TOPOLOGY_FLAT, cluster.state.variant.slurm or "")
    off_at = time.time()  # a check after this one saw both files
    drill_guard.wait_checked(cluster, CONTROLLER, off_at)
    assert cluster.exec(CONTROLLER, ["test", "-e", TREE]).returncode != 0, "the guard wrote a topology.conf"
    plugin = breakage.off_plugin(cluster.state.variant.slurm or "")
    assert f"TopologyPlugin={plugin}\n" in run(cluster, CONTROLLER, "cat", ETC + "/slurm.conf")
    assert repairs_since(cluster, CONTROLLER, off_at) == []
    assert drill_guard.sbatch(cluster, CONTROLLER).accepted
    breakage.heal(cluster)


def test_a_second_pyxis_registration_is_commented_out_and_the_amis_kept(cluster: LocalCluster) -> None:
    result = drill_guard.drill(cluster, breakage.PYXIS_TWICE, table.PYXIS_TWICE)
    DRILLS.append(result)
    assert result.during.accepted and result.after.accepted, result
    text = run(cluster, CONTROLLER, "cat", ETC + "/plugstack.conf")
    loading = [line for line in text.splitlines() if conf.loads_pyxis(line)]
    assert loading == [ami.PYXIS_CONF.strip()], text
    assert text.index(loading[0]) < text.index(plugstack.DUPLICATE.format("")), "the first one, the AMI's, stays"
    assert run(cluster, CONTROLLER, "cat", breakage.PYXIS_INCLUDE) == ami.PYXIS_CONF, "the AMI's file is untouched"
    assert eventually(cluster, WORKER, "/var/spool/slurmd/conf-cache/plugstack.conf", text) == text


def test_a_configless_include_the_workers_lack_is_copied_in_and_reaches_them(cluster: LocalCluster) -> None:
    result = drill_guard.drill(cluster, breakage.CONFIGLESS_PLUGSTACK, table.CONFIGLESS_INCLUDE)
    DRILLS.append(result)
    assert result.during.accepted and result.after.accepted, result
    text = run(cluster, CONTROLLER, "cat", ETC + "/plugstack.conf")
    assert text == f"{plugstack.BEGIN.format(breakage.PYXIS_INCLUDE)}\n{ami.PYXIS_CONF}" + (
        plugstack.END.format(breakage.PYXIS_INCLUDE) + "\n"
    )
    assert eventually(cluster, WORKER, "/var/spool/slurmd/conf-cache/plugstack.conf", text) == text
    assert cluster.exec(WORKER, ["test", "-e", breakage.PYXIS_INCLUDE]).returncode != 0, "slurmd's node: not written"
    assert repairs_since(cluster, WORKER, result.broken_at) == [], "a compute node never repairs"
