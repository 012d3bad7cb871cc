"""Fault tests on a local cluster (root only): a 2-node DDP job through the launcher survives a worker
crash and a slurmctld restart.

The cluster uses the emulation's fast-recovery settings (``slurmd_timeout`` 10 s, ``cred_expire`` 70 s),
so a crash costs about 15 s to detect plus the 71 s requeue delay; the module takes about two and a half minutes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from hyperpod_local import LocalCluster
from hyperpod_local.drill import DdpJob, crash_and_resume, job_fields, parse_job_log, wait_until
from local_support import cpu_cluster, requires_local_cluster
from training_runtime import checkpoint

pytestmark = [requires_local_cluster, pytest.mark.slow]  # a drill of minutes: handed out first (tests/conftest.py)

CONTROLLER, LOGIN = "controller-machine-1", "login-group-1"
WORKERS = ("worker-group-1-1", "worker-group-1-2")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with cpu_cluster(tmp_path_factory.mktemp("fault-cluster"), "hpft", "10.249.0.0/24") as cluster:
        yield cluster


def test_worker_crash_requeues_the_job_and_it_resumes_from_the_newest_complete_checkpoint(
    cluster: LocalCluster,
) -> None:
    job = DdpJob(name="crash-drill", steps=24, checkpoint_every=5, step_seconds=0.4)
    drill = crash_and_resume(cluster, job, submit_from=LOGIN, crash=WORKERS[1], crash_after_step=7)

    assert (drill.state, drill.restarts) == ("COMPLETED", 1), drill.log
    first, second = drill.runs
    assert (first.restart, second.restart) == (0, 1)
    assert first.steps == list(range(len(first.steps))), "the first run logs every step from 0"
    # The resumed run starts right after a complete checkpoint at least as new as the one seen at the crash,
    # so it loses at most one checkpoint interval of the steps the first run had done ...
    assert second.resumed_at is not None
    assert second.resumed_at >= drill.checkpoint_before_crash + 1
    assert second.resumed_at % job.checkpoint_every == 0
    lost = first.steps[-1] + 1 - second.resumed_at
    assert 0 <= lost <= job.checkpoint_every, (first.steps[-1], second.resumed_at)
    # ... and then does every remaining step exactly once, on both nodes again.
    assert second.steps == list(range(second.resumed_at, job.steps))
    assert second.done_world == 4
    final = checkpoint.latest(job.host_path(cluster, job.checkpoint_dir(cluster)))
    assert final is not None and final.step == job.steps - 1


def test_restarting_slurmctld_loses_no_running_or_queued_job(cluster: LocalCluster) -> None:
    cluster.wait_idle(timeout=120)
    running = DdpJob(name="ctld-drill", steps=30, checkpoint_every=10, step_seconds=0.3)
    running_id = running.submit(cluster, LOGIN)
    queued = []
    for n in range(3):
        result = cluster.exec(
            LOGIN, ["sbatch", "--parsable", f"--job-name=queued-{n}", "-N1", "--wrap", "hostname"], timeout=30
        )
        assert result.returncode == 0, result.stderr
        queued.append(result.stdout.strip().split(";")[0])
    log = running.log(cluster, running_id)
    wait_until("the training job's first steps", lambda: log.exists() and " loss " in log.read_text(), 120, log)
    states = {j: job_fields(cluster, LOGIN, j).get("JobState") for j in queued}
    assert set(states.values()) == {"PENDING"}, states

    kill = cluster.exec(CONTROLLER, ["sh", "-c", "kill $(cat /run/slurmctld.pid)"], timeout=30)
    assert kill.returncode == 0, kill.stderr
    wait_until("slurmctld to stop", lambda: cluster.exec(LOGIN, ["scontrol", "ping"], timeout=30).returncode != 0, 60)
    time.sleep(2)
    code, output = cluster.bootstrap(CONTROLLER)  # the runtime finds slurmctld stopped and starts it
    assert code == 0, output

    def all_completed() -> bool:
        return all(job_fields(cluster, LOGIN, j).get("JobState") == "COMPLETED" for j in [running_id, *queued])

    wait_until("every job to complete", all_completed, 240, log)
    assert job_fields(cluster, LOGIN, running_id).get("Restarts") == "0"
    (run,) = parse_job_log(log.read_text())
    assert run.resumed_at is None
    assert run.steps == list(range(running.steps))
    assert run.done_world == 4
