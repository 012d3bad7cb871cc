"""The auto-resume drill: HyperPod's path after a node failure, next to the requeue drill of :mod:`.drill`.

On a cluster of the emulated HyperPod platform (``Variant(platform="hyperpod")``, the default: the HyperPod
agent on the host, srun with ``--auto-resume`` on every node), the example DDP job runs through the launcher,
which passes ``srun --auto-resume=1`` as the marker is there. The drill crashes a worker inside the
running step; the agent replaces the node (a new instance under the same name, bootstrapped by the lifecycle
script), the srun wrapper runs the step again in the same job, and training resumes from the newest complete
checkpoint. No requeue: the job keeps its id and ``Restarts`` stays 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hyperpod_local import agent
from hyperpod_local.cluster import LocalCluster
from hyperpod_local.drill import DdpJob, DrillError, Incarnation, job_fields, parse_job_log, wait_until
from training_runtime import checkpoint
from training_runtime.node import HYPERPOD

FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT")


@dataclass
class AutoResume:
    """What happened in one auto-resume drill. Times are seconds after the crash."""

    job_id: str
    crashed: str
    checkpoint_before_crash: int
    replaced_s: float
    """The agent had the new instance bootstrapped and back in Slurm."""
    retried_s: float
    """The wrapper started the step again (its ``Retrying step`` line)."""
    resumed_s: float
    completed_s: float
    state: str
    restarts: int
    runs: list[Incarnation]
    log: str
    events: list[dict[str, Any]] = field(default_factory=list)


def crash_and_auto_resume(
    cluster: LocalCluster,
    job: DdpJob,
    *,
    submit_from: str,
    crash: str,
    crash_after_step: int = 0,
    timeout: float = 300.0,
) -> AutoResume:
    """Run ``job``; once a checkpoint exists and the job has logged ``crash_after_step``, crash node ``crash``
    and leave the rest to the agent and the srun wrapper; wait for the job to end."""
    if not cluster.state.variant.hyperpod or not agent.enabled(cluster):
        raise DrillError(
            f"auto-resume needs the emulated HyperPod platform (this cluster's platform: "
            f"{cluster.state.variant.platform}). Fix: LocalCluster.up(...) with Variant(platform={HYPERPOD!r}), the "
            "default; the requeue drill (drill.crash_and_resume) runs on both"
        )
    job_id = job.submit(cluster, submit_from)
    log = job.log(cluster, job_id)
    checkpoints = job.host_path(cluster, job.checkpoint_dir(cluster))

    def runs() -> list[Incarnation]:
        return parse_job_log(log.read_text()) if log.exists() else []

    def training_with_a_checkpoint() -> bool:
        seen = runs()
        logged = bool(seen and seen[-1].steps and seen[-1].steps[-1] >= crash_after_step)
        return logged and checkpoint.latest(checkpoints) is not None

    wait_until(
        f"a complete checkpoint and step {crash_after_step} in the log", training_with_a_checkpoint, timeout, log
    )
    before = checkpoint.latest(checkpoints)
    assert before is not None
    crashed_at, crashed_wall = time.monotonic(), time.time()
    cluster.crash(crash)

    def since(moment: float) -> float:
        return round(moment - crashed_at, 1)

    def replaced() -> bool:
        return any(
            e["node"] == crash and e["event"] == "replaced" and e["time"] >= crashed_wall for e in agent.events(cluster)
        )

    wait_until(f"the agent to replace {crash}", replaced, timeout, log)
    replaced_wall = max(e["time"] for e in agent.events(cluster) if e["node"] == crash and e["event"] == "replaced")
    retried = wait_until("the wrapper to retry the step", lambda: any(r.attempt > 0 for r in runs()), timeout, log)
    resumed = wait_until(
        "the retried step to load its checkpoint",
        lambda: any(r.attempt > 0 and r.resumed_at is not None for r in runs()),
        timeout,
        log,
    )
    finished = wait_until(
        "the job to finish", lambda: job_fields(cluster, submit_from, job_id).get("JobState") in FINISHED, timeout, log
    )
    info = job_fields(cluster, submit_from, job_id)
    text = log.read_text()
    return AutoResume(
        job_id=job_id,
        crashed=crash,
        checkpoint_before_crash=before.step,
        replaced_s=round(replaced_wall - crashed_wall, 1),
        retried_s=since(retried),
        resumed_s=since(resumed),
        completed_s=since(finished),
        state=info.get("JobState", "?"),
        restarts=int(info.get("Restarts", "0") or 0),
        runs=parse_job_log(text),
        log=text,
        events=agent.events(cluster),
    )
