"""Spot reclaim drill on a local cluster (root only): examples/cpu-cluster.yaml with its workers on Spot.

The fake instance metadata service (``hyperpod_local.imds.FakeImds``, an HTTP server in the cluster's
switch namespace) posts EC2's interruption notice for one worker; the node's Spot watcher drains it and
signals the DDP job (examples/jobs/ddp.sbatch through the launcher), which checkpoints the step it is at and
requeues itself. Then the node is lost (crashed) and a replacement boots under its name; the job resumes from
the checkpoint it took on the notice. About two minutes (the requeue delay is cred_expire + 1 = 71 s).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from hyperpod_local import LocalCluster
from hyperpod_local.drill import DdpJob, node_state, spot_reclaim
from hyperpod_local.imds import FakeImds, spot_variant
from hyperpod_local.plan import UpOptions
from local_support import CPU_CLUSTER, requires_local_cluster, variant
from training_runtime import checkpoint
from training_runtime.node import GENERIC

pytestmark = [requires_local_cluster, pytest.mark.slow]  # a drill of minutes: handed out first (tests/conftest.py)

LOGIN, WORKERS = "login-group-1", ("worker-group-1-1", "worker-group-1-2")
SUBNET = "10.246.0.0/24"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, FakeImds]]:
    workdir = tmp_path_factory.mktemp("spot-cluster")
    config = spot_variant(CPU_CLUSTER, workdir)
    cluster = LocalCluster.up(
        config,
        workdir / "cluster",
        variant(platform=GENERIC),
        UpOptions(prefix=f"hpsp{os.getpid() % 10000}", subnet=SUBNET),
    )
    imds = FakeImds(cluster)
    try:
        imds.start()
        yield cluster, imds
    finally:
        imds.stop()
        cluster.down()


def test_a_spot_notice_checkpoints_requeues_and_the_job_resumes_after_the_node_is_lost(
    cluster: tuple[LocalCluster, FakeImds],
) -> None:
    local, imds = cluster
    job = DdpJob(name="spot-drill", steps=24, checkpoint_every=5, step_seconds=0.4)
    drill = spot_reclaim(local, job, imds, submit_from=LOGIN, reclaim=WORKERS[1], notice_after_step=7)

    assert drill.drain_reason.startswith("hyperpod-cdk:spot-reclaim: terminate at "), drill.drain_reason
    assert (drill.state, drill.restarts) == ("COMPLETED", 1), drill.log
    first, second = drill.runs
    # The first run stopped on the signal after the step it was at, and that step is the checkpoint ...
    assert first.stopped_after is not None, drill.log
    assert first.steps[-1] == first.stopped_after == drill.checkpoint_at_requeue
    # ... so the resumed run loses no step: it starts right after it and does every remaining step once.
    assert second.resumed_at == drill.checkpoint_at_requeue + 1
    assert second.steps == list(range(second.resumed_at, job.steps))
    assert second.done_world == 4
    final = checkpoint.latest(job.host_path(local, job.checkpoint_dir(local)))
    assert final is not None and final.step == job.steps - 1
    # The replacement came back into service (its watcher found no notice and resumed the Spot drain).
    assert node_state(local, LOGIN, WORKERS[1]) in ("idle", "mixed", "allocated"), node_state(local, LOGIN, WORKERS[1])
