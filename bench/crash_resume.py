"""Crash-to-resume time of a 2-node DDP job on the local cluster (root only), next to Slurm's floor.

Run in the repo root as root: ``.venv/bin/python bench/crash_resume.py``. It brings up
``examples/cpu-cluster.yaml``, submits ``examples/jobs/ddp.sbatch`` through the launcher (2 workers x 2
processes, gloo, a checkpoint every 5 steps), crashes the second worker once a checkpoint exists, boots it
again once Slurm has declared it DOWN, and prints when each phase ended, in seconds after the crash. The
floor is what the cluster's settings allow at best: the node is declared DOWN after ``SlurmdTimeout``
(checked every ``SlurmdTimeout/3`` s), and a requeued job may start ``cred_expire + 1`` s after the requeue,
at the next scheduling pass. Timings are reported, never asserted.

Then, on the same cluster (its workers are on Spot, their watcher polling a fake metadata service every
second), the Spot reclaim drill: EC2's interruption notice for the second worker after step 7, the job
checkpoints and requeues itself, the node is lost and a replacement boots; it prints the seconds from the
notice to each phase and the steps lost.

The requeue and Spot drills run on the generic platform. Last, on a fresh cluster of the emulated HyperPod
platform (``platform="hyperpod"``: Slurm 24.11, ``ip-a-b-c-d`` names, the emulated HyperPod agent and srun
wrapper), the auto-resume drill: the same job, whose launcher passes ``srun --auto-resume=1`` because the
HyperPod marker is there, the second worker crashed after step 7; the agent replaces it and the step runs
again in the same job. It prints the seconds from the crash to each phase, next to the requeue path's.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from pathlib import Path

from hyperpod_local import LocalCluster
from hyperpod_local.drill import DdpJob, crash_and_resume, spot_reclaim
from hyperpod_local.drill_autoresume import crash_and_auto_resume
from hyperpod_local.imds import FakeImds, spot_variant
from hyperpod_local.overlay import EMULATION_SLURM_OPTIONS
from hyperpod_local.plan import UpOptions
from hyperpod_local.variant import Variant
from training_runtime.node import GENERIC, HYPERPOD

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "cpu-cluster.yaml"


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("the local cluster needs root")
    options = EMULATION_SLURM_OPTIONS
    subnet = "10.253.0.0/24"
    with tempfile.TemporaryDirectory(prefix="hpcdk-bench-") as workdir:
        config = spot_variant(CONFIG, Path(workdir))
        cluster = LocalCluster.up(
            config, Path(workdir) / "cluster", Variant(platform=GENERIC), UpOptions(prefix="hpbcrash", subnet=subnet)
        )
        imds = FakeImds(cluster)
        try:
            imds.start()
            job = DdpJob(name="bench", steps=60, checkpoint_every=5, step_seconds=0.4)
            drill = crash_and_resume(
                cluster, job, submit_from="login-group-1", crash="worker-group-1-2", crash_after_step=7
            )
            cluster.wait_idle(timeout=120)
            spot_job = DdpJob(name="bench-spot", steps=60, checkpoint_every=5, step_seconds=0.4)
            spot = spot_reclaim(
                cluster, spot_job, imds, submit_from="login-group-1", reclaim="worker-group-1-2", notice_after_step=7
            )
        finally:
            imds.stop()
            cluster.down()
        cluster = LocalCluster.up(
            CONFIG, Path(workdir) / "autoresume", Variant(platform=HYPERPOD), UpOptions(prefix="hpbauto", subnet=subnet)
        )
        try:
            auto_job = DdpJob(name="bench-auto", steps=60, checkpoint_every=5, step_seconds=0.4)
            auto = crash_and_auto_resume(
                cluster, auto_job, submit_from="login-group-1", crash="worker-group-1-2", crash_after_step=7
            )
        finally:
            cluster.down()
    first, second = drill.runs
    lost = first.steps[-1] + 1 - (second.resumed_at or 0)
    floor_down = options["slurmd_timeout"]
    floor_restart = options["cred_expire"] + 1
    print(f"Host: {platform.node()}, {os.cpu_count()} CPUs. Job {drill.state}, restarts {drill.restarts}.")
    print(
        f"Settings: SlurmdTimeout={options['slurmd_timeout']} MessageTimeout={options['message_timeout']} "
        f"cred_expire={options['cred_expire']} sched_interval={options['sched_interval']}\n"
    )
    print("| Phase (seconds after the crash) | Measured | Slurm's floor |")
    print("| --- | --: | --: |")
    print(f"| Node declared DOWN | {drill.node_down_s:.1f} | {floor_down} |")
    print(f"| Job requeued | {drill.requeued_s:.1f} | {floor_down} |")
    print(f"| Job running again | {drill.running_again_s:.1f} | {floor_down + floor_restart} |")
    print(f"| Training resumed from the checkpoint | {drill.resumed_s:.1f} | - |")
    print(f"| Job completed | {drill.completed_s:.1f} | - |")
    print(
        f"\nResumed at step {second.resumed_at} (checkpoint at the crash: step {drill.checkpoint_before_crash}, "
        f"last step logged before it: {first.steps[-1]}; {lost} step(s) redone, interval {job.checkpoint_every})."
    )

    first, second = spot.runs
    print(f"\nSpot reclaim: job {spot.state}, restarts {spot.restarts}; drain reason {spot.drain_reason!r}.\n")
    print("| Phase (seconds after the interruption notice) | Measured |")
    print("| --- | --: |")
    print(f"| Node drained for the Spot reclaim | {spot.drained_s:.1f} |")
    print(f"| Job checkpointed and requeued | {spot.requeued_s:.1f} |")
    print(f"| Node lost (crashed), replacement booting | {spot.lost_s:.1f} |")
    print(f"| Job running again | {spot.running_again_s:.1f} |")
    print(f"| Notice -> resumed from the checkpoint | {spot.resumed_s:.1f} |")
    print(f"| Job completed | {spot.completed_s:.1f} |")
    done = first.steps[-1] + 1 - (second.resumed_at or 0)
    print(
        f"\nStopped after step {first.stopped_after}, checkpoint at the requeue: step {spot.checkpoint_at_requeue}, "
        f"resumed at step {second.resumed_at}; {done} step(s) redone."
    )

    first, retry = auto.runs
    attempts = len(auto.runs)
    print(f"\nAuto-resume (platform {HYPERPOD}): job {auto.state}, restarts {auto.restarts}, attempts {attempts}.\n")
    print("| Phase (seconds after the crash) | Auto-resume | Requeue |")
    print("| --- | --: | --: |")
    replaced, down = auto.replaced_s, drill.node_down_s
    print(f"| Node replaced (new instance bootstrapped) / declared DOWN | {replaced:.1f} | {down:.1f} |")
    print(f"| Step retried in the same job / job running again | {auto.retried_s:.1f} | {drill.running_again_s:.1f} |")
    print(f"| Training resumed from the checkpoint | {auto.resumed_s:.1f} | {drill.resumed_s:.1f} |")
    print(f"| Job completed | {auto.completed_s:.1f} | {drill.completed_s:.1f} |")
    redone = first.steps[-1] + 1 - (retry.resumed_at or 0)
    print(
        f"\nResumed at step {retry.resumed_at} (checkpoint at the crash: step {auto.checkpoint_before_crash}, "
        f"last step logged before it: {first.steps[-1]}; {redone} step(s) redone)."
    )


if __name__ == "__main__":
    main()
