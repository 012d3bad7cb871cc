"""The scaler drills (issue #24, docs/scaler.md "Drills"): the REAL scaler service, started on the controller by
the runtime's bootstrap, against the emulated HyperPod control plane (SigV4 with the instance role's IMDS keys)
of a local cluster whose compute groups all start at 0 nodes (a new user's first scaled cluster: it comes up with
no Slurm node, so with no automatic topology), ``burst`` scaling 0..3. Each drill starts and ends with the group at 0.

Every job is submitted plainly (no ``--hold``) with the group at 0: the controller's job_submit script holds it and
the scaler releases it (docs/scaler.md, "A group at 0").

1. ``sbatch -N2`` → held, released → BatchAddClusterNodes → the job runs on the new nodes → idle → drained →
   BatchDeleteClusterNodes → 0; never a busy node deleted, never below min, never above what the job needs.
2. an interactive ``salloc`` is satisfied by a scale-out; a job its user held stays held, even named like the
   mark the job_submit script writes in the AdminComment of a job it holds (issue #39, L6).
3. no capacity → the job waits with the scaler's AdminComment, no second add, runs when capacity returns.
4. the scaler killed and started again (as the controller's bootstrap does) while its add is in flight → it
   resumes from its persisted state, no second add.
5. CloudFormation and the scaler agree: the synth path's deployed-count look-up reads the live count and an
   UpdateCluster with the template's counts changes nothing and removes no busy node.

Root only, HyperPod platform. Alone: ``python -m pytest tests/test_local_scaler.py`` (``make test`` runs two clusters
at a time, docs/testing.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from hyperpod_cdk.core.config import load_config
from hyperpod_cdk.core.deployment import deployment
from hyperpod_cdk.deployed.scaler_counts import at_template_counts, counts_for_synth
from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.hyperpod_files import SLURM_ETC
from local_support import requires_hyperpod_platform
from scaler_drill import (
    BURST_TYPE,
    CONFIG,
    GROUP,
    LAUNCH_LATENCY_S,
    MAX,
    NAME,
    PARTITION,
    back_to_zero,
    background,
    busy_deletes,
    counts,
    ctl,
    drill_cluster,
    group_nodes,
    job_field,
    job_state,
    plane_events,
    sagemaker,
    scaler_log,
    scaler_pid,
    scaler_state,
    submit,
    targets,
    topology,
    wait_for,
)
from training_runtime.scaler.job_submit import held_comment
from training_runtime.scaler.policy import DRAIN_REASON_START

pytestmark = [requires_hyperpod_platform, pytest.mark.slow]  # a drill of minutes: handed out first (tests/conftest.py)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with drill_cluster(tmp_path_factory.mktemp("scaler"), f"hpsc{os.getpid() % 10000}", "10.236.0.0/24") as up:
        yield up


@pytest.fixture
def client(cluster: LocalCluster) -> Any:
    return sagemaker(cluster)


@pytest.fixture
def at_zero(cluster: LocalCluster, client: Any) -> Iterator[float]:
    """Each drill starts with the group at 0 and the emulator's knobs as set at start; yields its start time."""
    assert counts(client) == (0, 0)
    yield time.time()
    control_plane.set_capacity(cluster, BURST_TYPE, None)
    control_plane.set_latency(cluster, LAUNCH_LATENCY_S)
    ctl(cluster, "scancel", "-p", PARTITION)
    back_to_zero(cluster, client)


def test_a_cluster_whose_compute_groups_are_all_at_0_comes_up(cluster: LocalCluster, client: Any) -> None:
    # Every compute group at 0: no Slurm node, so no switch tree; slurm.conf names no TopologyPlugin until a node
    # joins (topology/tree cannot run over no switches: render/topology_conf.automatic_topology).
    assert cluster.layout.workers == ()
    assert topology(cluster)[0] is None
    assert ctl(cluster, "sh", "-c", f"test ! -e {SLURM_ETC}/topology.conf && echo absent").strip() == "absent"
    assert set(ctl(cluster, "sinfo", "-h", "-o", "%P").split()) == {"dev*", "cpu", PARTITION}
    assert ctl(cluster, "sinfo", "-h", "-N", "-o", "%N").strip() == ""
    assert counts(client) == (0, 0)


def test_sbatch_scales_out_runs_and_scales_back_to_zero(cluster: LocalCluster, client: Any, at_zero: float) -> None:
    job = submit(cluster, "-N2", "--wrap", "srun hostname; sleep 3")  # plainly, with the group at 0
    wait_for("the scaler's BatchAddClusterNodes", lambda: targets(plane_events(cluster, at_zero)))
    released = wait_for("the scaler's release", lambda: scaler_log(cluster, at_zero, "scaler_release"))
    assert [r["job"] for r in released] == [job]  # held at submission by job_submit.lua, released by the scaler
    assert job_state(cluster, job) == "PENDING"  # nothing ran before the nodes came
    wait_for("the job to run", lambda: job_state(cluster, job) in ("RUNNING", "COMPLETED"))
    ran_on = ctl(cluster, "scontrol", "show", "hostnames", job_field(cluster, job, "NodeList")).split()
    added = group_nodes(cluster)
    assert sorted(ran_on) == sorted(LocalCluster.open(cluster.workdir).slurm_name(n) for n in added)
    assert len(ran_on) == 2
    plugin, shown = topology(cluster)  # the first nodes brought HyperPod's automatic topology with them
    leaves = [line.split("Nodes=")[1].split()[0] for line in shown.splitlines() if " Level=0 " in line]
    assert plugin == "topology/tree" and len(leaves) == 1, shown
    assert sorted(ctl(cluster, "scontrol", "show", "hostnames", leaves[0]).split()) == sorted(ran_on)
    wait_for("the job to complete", lambda: job_state(cluster, job) == "COMPLETED")
    back_to_zero(cluster, client)
    assert topology(cluster)[0] is None  # and the last one to leave took it away
    assert ctl(cluster, "sinfo", "-h", "-o", "%P").split()  # slurmctld still answers

    history = targets(plane_events(cluster, at_zero))
    assert history[0] == 2 and max(history) == 2, history  # one add, of what the job needed
    assert history[-1] == 0 and min(history) >= 0, history
    drained = scaler_log(cluster, at_zero, "scaler_drain")
    deleted = [n for line in scaler_log(cluster, at_zero, "scaler_delete") for n in line["nodes"]]
    assert sorted(deleted) == sorted(ran_on) and sorted(d["node"] for d in drained) == sorted(ran_on)
    assert busy_deletes(cluster, at_zero) == []
    assert all(e["group"] == GROUP for e in plane_events(cluster, at_zero) if "deleted" in e["description"])


@pytest.mark.hostile  # the hostile-user drill (tests/hostile_drill.py): the user-held job named like the mark
def test_salloc_is_satisfied_by_a_scale_out(cluster: LocalCluster, client: Any, at_zero: float) -> None:
    mark = "x AdminComment=" + held_comment(GROUP)  # read from scontrol -o show job, the name would look ours
    user_held = submit(cluster, "--hold", "-J", mark, "-N1", "--wrap", "hostname")  # the user's own: never released
    salloc = background(cluster, ["salloc", "-N1", "-p", PARTITION, "srun", "hostname"])  # plainly, at 0
    out, err = salloc.communicate(timeout=120)
    assert salloc.returncode == 0, err
    assert job_state(cluster, user_held) == "PENDING" and job_field(cluster, user_held, "Reason") == "JobHeldUser"
    assert user_held not in [r["job"] for r in scaler_log(cluster, at_zero, "scaler_release")]
    added = group_nodes(cluster)
    assert len(added) == 1
    assert out.strip() == LocalCluster.open(cluster.workdir).slurm_name(added[0])
    assert max(targets(plane_events(cluster, at_zero))) == 1


def test_no_capacity_keeps_the_job_waiting_with_the_reason_until_capacity_returns(
    cluster: LocalCluster, client: Any, at_zero: float
) -> None:
    control_plane.set_capacity(cluster, BURST_TYPE, 0)
    job = submit(cluster, "-N1", "--wrap", "hostname")
    wait_for(
        "the capacity failure in the record",
        lambda: [e for e in plane_events(cluster, at_zero) if "insufficient capacity" in e["description"]],
    )
    comment = wait_for(
        "the scaler's AdminComment",
        lambda: "launching" in job_field(cluster, job, "AdminComment") and job_field(cluster, job, "AdminComment"),
    )
    assert comment.startswith(DRAIN_REASON_START) and "HyperPod is launching nodes in burst: 0 of 1" in comment
    time.sleep(5)  # several scaler cycles while HyperPod retries the launch (Continuous provisioning)
    assert job_state(cluster, job) == "PENDING"
    assert counts(client) == (0, 1)  # the scaler did not add again for the same job
    control_plane.set_capacity(cluster, BURST_TYPE, None)
    wait_for("the job to complete once capacity returns", lambda: job_state(cluster, job) == "COMPLETED")
    assert targets(plane_events(cluster, at_zero)) == [1]  # one add, no delete yet


def test_a_scaler_restarted_mid_scale_out_resumes_without_a_second_add(
    cluster: LocalCluster, client: Any, at_zero: float
) -> None:
    control_plane.set_latency(cluster, 8.0)  # the launch stays in flight across the restart
    job = submit(cluster, "-N2", "--wrap", "hostname")
    added = wait_for("the scaler's add", lambda: scaler_log(cluster, at_zero, "scaler_add"))
    in_flight = scaler_state(cluster)["in_flight"]
    assert [(op["kind"], op["count"], op["token"]) for op in in_flight] == [("add", 2, added[0]["token"])]
    before = scaler_pid(cluster)
    assert before is not None
    ctl(cluster, "kill", str(before))
    wait_for(
        "the scaler gone", lambda: cluster.exec(cluster.layout.controller.name, ["kill", "-0", str(before)]).returncode
    )
    restarted = time.time()
    code, output = cluster.bootstrap(cluster.layout.controller.name)  # as the controller's reboot would
    assert code == 0, output
    after = scaler_pid(cluster)
    assert after is not None and after != before
    resumed = wait_for("the restarted scaler to resume", lambda: scaler_log(cluster, restarted, "scaler_add_reflected"))
    assert resumed[0]["token"] == added[0]["token"]
    wait_for("the job to complete", lambda: job_state(cluster, job) == "COMPLETED")
    assert scaler_log(cluster, restarted, "scaler_add") == []
    history = targets(plane_events(cluster, at_zero))
    assert history == [2], history  # the count was raised once, to what the job needs (max is 3)
    assert max(history) <= MAX


def test_cloudformation_and_the_scaler_agree_on_the_count(cluster: LocalCluster, client: Any, at_zero: float) -> None:
    job = submit(cluster, "-N1", "--wrap", "sleep 60")
    wait_for("the job to run", lambda: job_state(cluster, job) == "RUNNING")
    config = load_config(CONFIG)
    deployed = counts_for_synth(deployment(config), None, client=lambda: client)  # the synth path's look-up
    assert deployed is not None and deployed[GROUP] == 1 and deployed["cpu"] == 0
    template = {g.name: g for g in at_template_counts(config.instance_groups, deployed, "drill")}
    assert template[GROUP].count == 1  # the config's count is 0: the template follows the scaler instead
    node = group_nodes(cluster)[0]
    since = time.time()
    # What CloudFormation sends: every group's whole specification (as deployed), the template's counts.
    described = client.describe_cluster(ClusterName=NAME)["InstanceGroups"]
    client.update_cluster(
        ClusterName=NAME,
        InstanceGroups=[
            {
                "InstanceGroupName": g["InstanceGroupName"],
                "InstanceType": g["InstanceType"],
                "InstanceCount": template[g["InstanceGroupName"]].count,
                "LifeCycleConfig": g["LifeCycleConfig"],
                "ExecutionRole": g["ExecutionRole"],
            }
            for g in described
            if g["InstanceGroupName"] != "controller"
        ],
    )
    time.sleep(3)
    assert counts(client) == (1, 1)
    assert not [
        e for e in plane_events(cluster, since) if "UpdateCluster" in e["description"] or "set from" in e["description"]
    ]
    assert group_nodes(cluster) == [node] and job_state(cluster, job) == "RUNNING"
