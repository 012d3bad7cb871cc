"""The auto-resume drill: HyperPod's path after a node failure, next to the requeue drill of :mod:`.drill`.

On a cluster of the emulated HyperPod platform (``Variant(platform="hyperpod")``, the default: the HyperPod
agent on the host, srun with ``--auto-resume`` on every node), the example DDP job runs through the launcher,
which passes ``srun --auto-resume=1`` as the marker is there. The drill crashes a worker inside the
running step; the agent replaces the node (a new instance under the same name, bootstrapped by the lifecycle
script), the srun wrapper runs the step again in the same job, and training resumes from the newest complete
checkpoint. No requeue: the job keeps its id and ``Restarts`` stays 0.

With ``reboot``, the same job first meets HyperPod's reboot of a worker (``Action:Reboot`` through Slurm, as an
operator or a health check asks for it): the node keeps its disk, so with a node-local checkpoint tier
(``DdpJob.local_tier``) the retried step resumes from every node's local copy; the crash and replacement that follow
lose that node's local tier, and its ranks resume from the shared one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hyperpod_local import agent
from hyperpod_local.cluster import LocalCluster
from hyperpod_local.drill import DdpJob, Drill, DrillError, DrillOutcome
from training_runtime import checkpoint
from training_runtime.node import HYPERPOD

FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT")


@dataclass
class Reboot:
    """The first fault of a drill with ``reboot``. Times are seconds after the reboot was asked for."""

    node: str
    checkpoint_before: int
    """The newest complete checkpoint on the shared tier when the reboot was asked for."""
    rebooted_s: float
    retried_s: float
    resumed_s: float


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
    reboot: Reboot | None = None


def request_reboot(cluster: LocalCluster, node: str) -> None:
    """Ask HyperPod to reboot ``node`` the way AWS's runbook does: ``scontrol update ... state=fail
    reason="Action:Reboot"`` (docs/local-cluster.md, "Reboot and replace")."""
    controller = cluster.layout.controllers[0].name
    argv = ["scontrol", "update", f"nodename={cluster.slurm_name(node)}", "state=fail", "reason=Action:Reboot"]
    result = cluster.exec(controller, argv, timeout=30)
    if result.returncode != 0:
        raise DrillError(f"{' '.join(argv)} failed: {result.stdout}{result.stderr}")


def _agent_did(cluster: LocalCluster, node: str, event: str, since: float) -> list[dict[str, Any]]:
    return [e for e in agent.events(cluster) if e["node"] == node and e["event"] == event and e["time"] >= since]


def crash_and_auto_resume(
    cluster: LocalCluster,
    job: DdpJob,
    *,
    submit_from: str,
    crash: str,
    crash_after_step: int = 0,
    reboot: str | None = None,
    reboot_after_step: int = 0,
    timeout: float = 300.0,
) -> AutoResume:
    """Run ``job``; once a checkpoint exists and the job has logged ``crash_after_step``, crash node ``crash``
    and leave the rest to the agent and the srun wrapper; wait for the job to end. With ``reboot``: first, after
    ``reboot_after_step``, have the agent reboot that node and wait for the retried step to resume; then crash
    ``crash`` once the retry has logged ``crash_after_step``."""
    if not cluster.state.variant.hyperpod or not agent.enabled(cluster):
        raise DrillError(
            f"auto-resume needs the emulated HyperPod platform (this cluster's platform: "
            f"{cluster.state.variant.platform}). Fix: LocalCluster.up(...) with Variant(platform={HYPERPOD!r}), the "
            "default; the requeue drill (drill.crash_and_resume) runs on both"
        )
    drill = Drill(cluster, job, submit_from, timeout)
    reboot_phase = None
    if reboot is not None:
        drill.start(reboot_after_step, lambda: request_reboot(cluster, reboot))
        assert drill.before is not None
        rebooted = _follow_retry(drill, reboot, "rebooted", attempt=1)
        reboot_phase = Reboot(
            reboot,
            drill.before.step,
            round(rebooted.event_wall - drill.fault_wall, 1),
            drill.since(rebooted.retried),
            drill.since(rebooted.resumed),
        )
        _fault_again(drill, crash_after_step, attempt=1, fault=lambda: cluster.crash(crash))
    else:
        drill.start(crash_after_step, lambda: cluster.crash(crash))
    assert drill.before is not None
    replaced = _follow_retry(drill, crash, "replaced", attempt=2 if reboot is not None else 1)
    finished = drill.finished(FINISHED)
    return AutoResume(
        crashed=crash,
        checkpoint_before_crash=drill.before.step,
        replaced_s=round(replaced.event_wall - drill.fault_wall, 1),
        retried_s=drill.since(replaced.retried),
        resumed_s=drill.since(replaced.resumed),
        completed_s=drill.since(finished),
        **drill.outcome(),
        events=agent.events(cluster),
        reboot=reboot_phase,
    )


@dataclass(frozen=True)
class _Retry:
    event_wall: float
    """When the agent logged the reboot or replacement (wall clock)."""
    retried: float
    resumed: float
    """When the wrapper retried the step and when the retry loaded its checkpoint (monotonic)."""


def _follow_retry(drill: Drill, node: str, event: str, attempt: int) -> _Retry:
    """Wait for the agent's ``event`` on ``node`` since the fault, then the wrapper's retry ``attempt`` and its
    resume."""
    cluster = drill.cluster
    drill.wait(f"the agent: {node} {event}", lambda: bool(_agent_did(cluster, node, event, drill.fault_wall)))
    wall = max(e["time"] for e in _agent_did(cluster, node, event, drill.fault_wall))
    retried = drill.wait(f"the wrapper's retry {attempt}", lambda: any(r.attempt >= attempt for r in drill.runs()))
    resumed = drill.wait(
        f"retry {attempt} to load its checkpoint",
        lambda: any(r.attempt >= attempt and r.resumed_at is not None for r in drill.runs()),
    )
    return _Retry(wall, retried, resumed)


def _fault_again(drill: Drill, after_step: int, attempt: int, fault: Callable[[], object]) -> None:
    """In the retry ``attempt``: once it has logged ``after_step`` and published a checkpoint since its resume,
    note the moment (the drill's fault from now on) and call ``fault``."""

    def ready() -> bool:
        runs = [r for r in drill.runs() if r.attempt == attempt and r.resumed_at is not None and r.steps]
        newest = checkpoint.latest(drill.checkpoints)
        if not runs or newest is None:
            return False
        resumed_at = runs[-1].resumed_at or 0
        return runs[-1].steps[-1] >= after_step and newest.step >= resumed_at

    drill.wait(f"retry {attempt} to reach step {after_step} and save", ready)
    drill.before = checkpoint.latest(drill.checkpoints)
    drill.fault_at, drill.fault_wall = time.monotonic(), time.time()
    fault()
