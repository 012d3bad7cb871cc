"""Fault drills on a local cluster: a training job through the launcher, a node crash or a Spot reclaim, the resume.

Used by the fault tests (which assert on the outcome) and by ``bench/crash_resume.py`` (which reports the
timings). The job is ``ddp.sbatch`` of the packaged example jobs (``examples/jobs``): DDP over two workers, a
checkpoint to the shared directory every few steps, one ``step N loss X`` line per step in the job's log. Every
drill (these two and :func:`hyperpod_local.drill_autoresume.crash_and_auto_resume`) is one :class:`Drill`: submit,
wait for a step (and a checkpoint), inject the fault, follow the drill's phases, report them from the fault on.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyperpod_local import hyperpod_platform
from hyperpod_local.cluster import LocalCluster
from hyperpod_local.imds import FakeImds
from hyperpod_local.paths import JOBS_DIR
from hyperpod_local.state import LocalClusterError
from training_runtime import checkpoint
from training_runtime.health.remedy import parse_node_state
from training_runtime.health.results import SPOT_REASON
from training_runtime.launch_checkpoint import LOCAL_VARIABLE

"""The example job scripts of this checkout (the nodes see the host's files through their overlay)."""
POLL_S = 0.25

STEP = re.compile(r"^step (\d+) loss ")
RESUMED = re.compile(r"^resumed from (\S+) at step (\d+)$")
TIERS = re.compile(r"^resumed tiers (\S+)$")
"""The tier every rank loaded its shard from (``local`` or ``shared``) and its host, in rank order, after a resume:
``local@node-a,local@node-a,shared@node-b,...``."""
INCARNATION = re.compile(r"^job (\d+) restart (\d+) on ")
DONE = re.compile(r"^done (\d+) steps world=(\d+)")
STOPPED = re.compile(r"^stopping after step (\d+): checkpointed on the checkpoint signal")
RETRY = re.compile(r"^\[Auto Resume\] Info: JobID: \d+ StepID: \S+ Retrying step\. Attempt number: (\d+)$")
"""The srun wrapper's line (HyperPod's plugin prints the same) before it runs a failed step again."""


class DrillError(LocalClusterError):
    """The drill could not run or its job did not behave (the message has the job's log tail)."""


@dataclass
class Incarnation:
    """One run of the batch script (the first start, or a start after a requeue), or one auto-resume
    retry of its step inside the same run (``attempt`` > 0)."""

    restart: int
    attempt: int = 0
    steps: list[int] = field(default_factory=list)
    resumed_at: int | None = None
    resumed_from: str = ""
    """The checkpoint rank 0 loaded (a node-local tier's path or the shared one's)."""
    resumed_tiers: list[tuple[str, str]] = field(default_factory=list)
    """(tier, host) of every rank's resume, in rank order."""
    done_world: int | None = None
    stopped_after: int | None = None
    """The step after which the run checkpointed and stopped on the Spot watcher's signal."""


def parse_job_log(text: str) -> list[Incarnation]:
    runs: list[Incarnation] = []
    for line in text.splitlines():
        line = line.strip()
        if m := INCARNATION.match(line):
            runs.append(Incarnation(restart=int(m.group(2))))
        elif not runs:
            continue
        elif m := RETRY.match(line):
            runs.append(Incarnation(restart=runs[-1].restart, attempt=int(m.group(1))))
        elif m := STEP.match(line):
            runs[-1].steps.append(int(m.group(1)))
        elif m := RESUMED.match(line):
            runs[-1].resumed_at, runs[-1].resumed_from = int(m.group(2)), m.group(1)
        elif m := TIERS.match(line):
            runs[-1].resumed_tiers = [tuple(item.partition("@")[::2]) for item in m.group(1).split(",")]
        elif m := DONE.match(line):
            runs[-1].done_world = int(m.group(2))
        elif m := STOPPED.match(line):
            runs[-1].stopped_after = int(m.group(1))
    return runs


def job_fields(cluster: LocalCluster, node: str, job_id: str) -> dict[str, str]:
    """``scontrol show job -o`` as a dict ({} when slurmctld does not answer)."""
    result = cluster.exec(node, ["scontrol", "show", "job", "-o", job_id], timeout=30)
    if result.returncode != 0:
        return {}
    return dict(re.findall(r"(\w+)=(\S*)", result.stdout))


def node_state(cluster: LocalCluster, node: str, name: str) -> str:
    result = cluster.exec(node, ["sinfo", "-h", "-n", name, "-o", "%T"], timeout=30)
    return result.stdout.strip()


def wait_until(what: str, predicate: Callable[[], bool], timeout: float, log: Path | None = None) -> float:
    """Poll until ``predicate`` holds; returns the monotonic time it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(POLL_S)
    tail = "" if log is None or not log.exists() else "\n".join(log.read_text().splitlines()[-30:])
    suffix = f"; job log tail:\n{tail}" if tail else ""
    raise DrillError(f"timed out after {timeout:.0f} s waiting for {what}{suffix}")


@dataclass(frozen=True)
class DdpJob:
    """How to submit the example DDP job on the local cluster."""

    name: str
    steps: int
    checkpoint_every: int
    step_seconds: float
    nodes: int = 2
    local_tier: str = ""
    """The node-local checkpoint tier's parent on every node (``HYPERPOD_CDK_CHECKPOINT_LOCAL_DIR``, what the launcher
    sets on an instance store); empty: the shared tier only (the emulated types have no instance store)."""

    def sbatch(self, cluster: LocalCluster) -> list[str]:
        torchrun = Path(hyperpod_platform.torchrun())
        if not torchrun.exists():
            raise DrillError(f"{torchrun} does not exist: install torch==2.13.0 in this environment (make setup does)")
        env = f"ALL,TORCHRUN={torchrun},JOBS_DIR={JOBS_DIR},CHECKPOINT_DIR={self.checkpoint_dir(cluster)}"
        if self.local_tier:
            env += f",{LOCAL_VARIABLE}={self.local_tier}"
        return [
            "sbatch",
            "--parsable",
            f"--job-name={self.name}",
            f"--nodes={self.nodes}",
            f"--output={cluster.state.fsx_mount_path}/jobs/%x-%j.out",
            f"--export={env}",
            str(JOBS_DIR / "ddp.sbatch"),
            f"--steps={self.steps}",
            f"--checkpoint-every={self.checkpoint_every}",
            f"--step-seconds={self.step_seconds}",
        ]

    def checkpoint_dir(self, cluster: LocalCluster) -> str:
        return f"{cluster.state.fsx_mount_path}/checkpoints/{self.name}"

    def host_path(self, cluster: LocalCluster, on_node: str) -> Path:
        """A path under the shared directory, as the host sees it."""
        return cluster.workdir / "shared" / Path(on_node).relative_to(cluster.state.fsx_mount_path)

    def log(self, cluster: LocalCluster, job_id: str) -> Path:
        return self.host_path(cluster, f"{cluster.state.fsx_mount_path}/jobs/{self.name}-{job_id}.out")

    def submit(self, cluster: LocalCluster, node: str) -> str:
        self.host_path(cluster, f"{cluster.state.fsx_mount_path}/jobs").mkdir(parents=True, exist_ok=True)
        result = cluster.exec(node, self.sbatch(cluster), timeout=30)
        if result.returncode != 0:
            raise DrillError(f"sbatch failed: {result.stdout}{result.stderr}")
        return result.stdout.strip().split(";")[0]


@dataclass
class DrillOutcome:
    """What every drill reports of its job once it ended (:meth:`Drill.outcome`); each drill adds its phases."""

    job_id: str
    state: str
    restarts: int
    runs: list[Incarnation]
    """The job's runs and retries, as its log shows them (:func:`parse_job_log`)."""
    log: str


class Drill:
    """The skeleton every drill shares: :meth:`start` submits the job, waits until it has logged a step (and a
    complete checkpoint exists, where the fault needs one), notes the moment and injects the fault; the drill then
    follows its phases with :meth:`wait` and reports them with :meth:`since` and :meth:`outcome`."""

    def __init__(self, cluster: LocalCluster, job: DdpJob, submit_from: str, timeout: float) -> None:
        self.cluster, self.job, self.submit_from, self.timeout = cluster, job, submit_from, timeout
        self.job_id = ""
        self.before: checkpoint.Checkpoint | None = None
        """The newest complete checkpoint when the fault was injected."""
        self.fault_at = 0.0
        """When the fault was injected (monotonic); :attr:`fault_wall` the same moment on the wall clock."""
        self.fault_wall = 0.0

    @property
    def log(self) -> Path:
        return self.job.log(self.cluster, self.job_id)

    @property
    def checkpoints(self) -> Path:
        return self.job.host_path(self.cluster, self.job.checkpoint_dir(self.cluster))

    def runs(self) -> list[Incarnation]:
        return parse_job_log(self.log.read_text()) if self.log.exists() else []

    def fields(self) -> dict[str, str]:
        return job_fields(self.cluster, self.submit_from, self.job_id)

    def wait(self, what: str, predicate: Callable[[], bool]) -> float:
        return wait_until(what, predicate, self.timeout, self.log)

    def since(self, moment: float) -> float:
        """Seconds from the fault to ``moment`` (monotonic), as the drills report them."""
        return round(moment - self.fault_at, 1)

    def start(self, after_step: int, fault: Callable[[], object], *, checkpoint_first: bool = True) -> None:
        """Submit the job; once it has logged ``after_step`` (and, ``checkpoint_first``, a complete checkpoint
        exists) note the moment and call ``fault``."""
        self.job_id = self.job.submit(self.cluster, self.submit_from)

        def training() -> bool:
            runs = self.runs()
            logged = bool(runs and runs[-1].steps and runs[-1].steps[-1] >= after_step)
            return logged and (not checkpoint_first or checkpoint.latest(self.checkpoints) is not None)

        what = f"a complete checkpoint and step {after_step} in the log" if checkpoint_first else ""
        self.wait(what or f"step {after_step} in the log", training)
        self.before = checkpoint.latest(self.checkpoints)
        self.fault_at, self.fault_wall = time.monotonic(), time.time()
        fault()

    def requeued(self) -> bool:
        return self.fields().get("Restarts", "0") != "0"

    def finished(self, states: tuple[str, ...]) -> float:
        return self.wait("the job to finish", lambda: self.fields().get("JobState") in states)

    def outcome(self) -> dict[str, Any]:
        """The ended job's figures every drill reports: its state, restarts, runs and whole log."""
        info, text = self.fields(), self.log.read_text()
        state, restarts = info.get("JobState", "?"), int(info.get("Restarts", "0") or 0)
        return {"job_id": self.job_id, "state": state, "restarts": restarts, "runs": parse_job_log(text), "log": text}


@dataclass
class CrashResume(DrillOutcome):
    """What happened in one crash-to-resume drill. Times are seconds after the crash."""

    crashed: str
    checkpoint_before_crash: int
    """The newest complete checkpoint's step when the node was crashed."""
    node_down_s: float
    requeued_s: float
    running_again_s: float
    resumed_s: float
    completed_s: float


def crash_and_resume(
    cluster: LocalCluster,
    job: DdpJob,
    *,
    submit_from: str,
    crash: str,
    crash_after_step: int = 0,
    timeout: float = 300.0,
) -> CrashResume:
    """Run ``job``; once a checkpoint exists and the job has logged ``crash_after_step``, crash node ``crash``;
    boot it again once Slurm has declared it DOWN (as a replacement would come back); wait for the job to end.

    A ``crash_after_step`` between two checkpoints makes the resumed job redo the steps since the last one."""
    drill = Drill(cluster, job, submit_from, timeout)
    drill.start(crash_after_step, lambda: cluster.crash(crash))
    assert drill.before is not None
    node_down = drill.wait(
        f"{crash} to be declared DOWN", lambda: node_state(cluster, submit_from, crash).startswith("down")
    )
    requeued = drill.wait("the job to be requeued", drill.requeued)
    running, resumed, finished = _boot_and_follow_the_requeue(drill, crash, "the rebooted")
    return CrashResume(
        crashed=crash,
        checkpoint_before_crash=drill.before.step,
        node_down_s=drill.since(node_down),
        requeued_s=drill.since(requeued),
        running_again_s=drill.since(running),
        resumed_s=drill.since(resumed),
        completed_s=drill.since(finished),
        **drill.outcome(),
    )


@dataclass
class SpotReclaim(DrillOutcome):
    """What happened in one Spot reclaim drill. Times are seconds after the notice was posted."""

    reclaimed: str
    drain_reason: str
    checkpoint_at_requeue: int
    """The newest complete checkpoint's step once the job was requeued."""
    drained_s: float
    requeued_s: float
    lost_s: float
    """When the node was lost (crashed), after the job was requeued."""
    running_again_s: float
    resumed_s: float
    completed_s: float


def spot_reclaim(
    cluster: LocalCluster,
    job: DdpJob,
    imds: FakeImds,
    *,
    submit_from: str,
    reclaim: str,
    notice_after_step: int = 0,
    timeout: float = 300.0,
) -> SpotReclaim:
    """Run ``job``; once it has logged ``notice_after_step`` post EC2's interruption notice for node ``reclaim``
    on the fake metadata service; wait for the watcher to drain the node and for the job to checkpoint and be
    requeued (pending again: its first run ended on every node); then lose the node (:meth:`LocalCluster.crash`)
    and bring a replacement up under its name
    (the notice withdrawn: a new instance); wait for the job to end."""
    drill = Drill(cluster, job, submit_from, timeout)
    drill.start(notice_after_step, lambda: imds.post(reclaim), checkpoint_first=False)
    reason = ""

    def spot_drained() -> bool:
        nonlocal reason
        shown = cluster.exec(submit_from, ["scontrol", "show", "node", reclaim], timeout=30).stdout
        state = parse_node_state(shown)
        reason = state.reason if state is not None else ""
        return state is not None and state.drained and reason.startswith(SPOT_REASON)

    drained = drill.wait(f"{reclaim} to be drained for the Spot reclaim", spot_drained)
    requeued = drill.wait("the job to be requeued", drill.requeued)
    # EC2 takes the instance two minutes after the notice: by then the job's first run has ended on it. The node is
    # lost once Slurm holds the job pending again, its first run's end (COMPLETING) confirmed by every node: lost
    # while the job is still COMPLETING on it, the requeue would wait for slurmctld to resend the dead node's
    # termination (about 45 s more) before the requeue delay even starts.
    drill.wait("the requeued job's first run to end on every node", lambda: drill.fields().get("JobState") == "PENDING")
    at_requeue = checkpoint.latest(drill.checkpoints)
    if at_requeue is None:
        raise DrillError(f"no complete checkpoint when the job was requeued; job log:\n{drill.log.read_text()[-2000:]}")
    lost = time.monotonic()
    cluster.crash(reclaim)
    imds.withdraw(reclaim)

    def gone() -> bool:
        # A drained node that goes silent is DOWN+DRAIN or DRAIN+NOT_RESPONDING, never plain "down".
        state = parse_node_state(cluster.exec(submit_from, ["scontrol", "show", "node", reclaim], timeout=30).stdout)
        return state is not None and bool({"DOWN", "NOT_RESPONDING"} & set(state.flags))

    drill.wait(f"Slurm to see {reclaim} gone", gone)
    running, resumed, finished = _boot_and_follow_the_requeue(drill, reclaim, "the replacement")
    return SpotReclaim(
        reclaimed=reclaim,
        drain_reason=reason,
        checkpoint_at_requeue=at_requeue.step,
        drained_s=drill.since(drained),
        requeued_s=drill.since(requeued),
        lost_s=drill.since(lost),
        running_again_s=drill.since(running),
        resumed_s=drill.since(resumed),
        completed_s=drill.since(finished),
        **drill.outcome(),
    )


REQUEUE_FINISHED = ("COMPLETED", "FAILED", "CANCELLED")
"""The requeue drills' end states (the auto-resume drill also ends on NODE_FAIL or TIMEOUT)."""


def _boot_and_follow_the_requeue(drill: Drill, node: str, what: str) -> tuple[float, float, float]:
    """Boot ``node`` again (bootstrapped), then wait for the requeued job to run again, to load its checkpoint
    and to end: the three moments (monotonic)."""
    code, output = drill.cluster.boot(node, bootstrap=True) or (0, "")
    if code != 0:
        raise DrillError(f"bootstrap of {what} {node} failed:\n{output}")

    def running_again() -> bool:
        info = drill.fields()
        return info.get("JobState") in ("RUNNING", "COMPLETED") and info.get("Restarts", "0") != "0"

    running = drill.wait("the requeued job to start", running_again)

    def resumed_line() -> bool:
        runs = drill.runs()
        return len(runs) > 1 and runs[-1].resumed_at is not None

    resumed = drill.wait("the resumed job to load its checkpoint", resumed_line)
    return running, resumed, drill.finished(REQUEUE_FINISHED)
