"""The auto-resume drill: HyperPod's path after a node failure, next to the requeue drill of :mod:`.drill`.

On a cluster of the emulated HyperPod platform (``Variant(platform="hyperpod")``, the default: the HyperPod
agent on the host, srun with ``--auto-resume`` on every node), the example DDP job runs through the launcher,
which passes ``srun --auto-resume=1`` as the marker is there. The drill crashes a worker inside the
running step; the agent replaces the node (a new instance under the same name, bootstrapped by the lifecycle
script), the srun wrapper runs the step again in the same job, and training resumes from the newest complete
checkpoint. No requeue: the job keeps its id and ``Restarts`` stays 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hyperpod_local import agent
from hyperpod_local.cluster import LocalCluster
from hyperpod_local.drill import DdpJob, Drill, DrillError, DrillOutcome
from training_runtime.node import HYPERPOD

FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT")


@dataclass
class AutoResume(DrillOutcome):
    """What happened in one auto-resume drill. Times are seconds after the crash."""

    crashed: str
    checkpoint_before_crash: int
    replaced_s: float
    """The agent had the new instance bootstrapped and back in Slurm."""
    retried_s: float
    """The wrapper started the step again (its ``Retrying step`` line)."""
    resumed_s: float
    completed_s: float
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
    drill = Drill(cluster, job, submit_from, timeout)
    drill.start(crash_after_step, lambda: cluster.crash(crash))
    assert drill.before is not None

    def replaced() -> bool:
        return any(
            e["node"] == crash and e["event"] == "replaced" and e["time"] >= drill.fault_wall
            for e in agent.events(cluster)
        )

    drill.wait(f"the agent to replace {crash}", replaced)
    replaced_wall = max(e["time"] for e in agent.events(cluster) if e["node"] == crash and e["event"] == "replaced")
    retried = drill.wait("the wrapper to retry the step", lambda: any(r.attempt > 0 for r in drill.runs()))
    resumed = drill.wait(
        "the retried step to load its checkpoint",
        lambda: any(r.attempt > 0 and r.resumed_at is not None for r in drill.runs()),
    )
    finished = drill.finished(FINISHED)
    return AutoResume(
        crashed=crash,
        checkpoint_before_crash=drill.before.step,
        replaced_s=round(replaced_wall - drill.fault_wall, 1),
        retried_s=drill.since(retried),
        resumed_s=drill.since(resumed),
        completed_s=drill.since(finished),
        **drill.outcome(),
        events=agent.events(cluster),
    )
