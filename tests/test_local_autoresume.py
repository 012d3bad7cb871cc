"""The auto-resume drill on the emulated HyperPod platform (root only): HyperPod's path after a node failure.

``up`` with ``platform="hyperpod"`` starts the emulated HyperPod agent and puts the srun wrapper on every node in
HyperPod's part, before the lifecycle script. A worker crashed inside the running step is replaced by a new
instance under its name, the step runs again in the same job (no requeue) and training resumes from the newest
complete checkpoint (first after a reboot from every node's local tier, then after the replacement from the shared
one for the replaced node). Then ``Action:Reboot`` on a worker reboots it without its lifecycle script, and a reason
that only starts with it is left alone (docs/local-cluster.md, "Reboot and replace"). About two minutes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from hyperpod_local import LocalCluster, agent
from hyperpod_local.drill import DdpJob
from hyperpod_local.drill_autoresume import crash_and_auto_resume
from local_support import cpu_cluster, requires_hyperpod_platform
from training_runtime import checkpoint
from training_runtime.health import RECOVERY_FILE
from training_runtime.node import HYPERPOD
from training_runtime.paths import DONE_MARKER
from training_runtime.services import ENABLED_DAEMONS, enabled_daemons

pytestmark = [requires_hyperpod_platform, pytest.mark.slow]  # a drill of minutes: handed out first (tests/conftest.py)

LOGIN = "login-group-1"
WORKERS = ("worker-group-1-1", "worker-group-1-2")
LOCAL_TIER = "/var/tmp"
"""The node-local checkpoint tier's parent on the emulated nodes: on the node's disk, which a reboot keeps and a
replacement does not (the emulated types have no instance store for the launcher to pick)."""


def wrapper_before_script(cluster: LocalCluster, node: str) -> bool:
    """srun on ``node`` is the wrapper, installed before the lifecycle script finished."""
    script = f"grep -q '{agent.WRAPPER_MARK}' {agent.WRAPPER_PATH} && stat -c %.9Y {agent.WRAPPER_PATH} {DONE_MARKER}"
    result = cluster.exec(node, ["sh", "-c", script])
    assert result.returncode == 0, f"{node}: {result.stdout}{result.stderr}"
    installed, finished = (float(t) for t in result.stdout.split())
    return installed < finished


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("autoresume-cluster")
    with cpu_cluster(workdir, "hpar", "10.238.0.0/24", platform=HYPERPOD) as cluster:
        yield cluster


def test_a_rebooted_worker_resumes_from_the_local_tier_and_a_replaced_one_from_the_shared_tier(
    cluster: LocalCluster,
) -> None:
    """One job, two faults (docs/training.md, "Asynchronous checkpoints from the launcher"): HyperPod reboots the
    second worker (its disk stays), the step is retried and every rank resumes from its node-local copy; then the
    same worker crashes and is replaced (a new disk), the step is retried again and that node's ranks resume from
    the shared tier."""
    # HyperPod's part gave every node srun --auto-resume before its script, and the agent runs.
    for node in cluster.nodes:
        assert wrapper_before_script(cluster, node.name), node.name
    assert agent.running(cluster)
    assert cluster.exec(WORKERS[1], ["touch", "/var/tmp/old-instance"]).returncode == 0
    job = DdpJob(name="autoresume-drill", steps=45, checkpoint_every=5, step_seconds=0.3, local_tier=LOCAL_TIER)
    drill = crash_and_auto_resume(
        cluster,
        job,
        submit_from=LOGIN,
        reboot=WORKERS[1],
        reboot_after_step=7,
        crash=WORKERS[1],
        crash_after_step=25,
    )

    # Same job, never requeued: the batch script ran once, its step three times.
    assert (drill.state, drill.restarts) == ("COMPLETED", 0), drill.log
    first, rebooted, retry = drill.runs
    assert [(r.restart, r.attempt) for r in drill.runs] == [(0, 0), (0, 1), (0, 2)]
    assert first.steps == list(range(len(first.steps)))
    # The reboot kept the node's disk: every rank loaded its own node's copy, at most one interval back.
    assert drill.reboot is not None and drill.reboot.node == WORKERS[1]
    assert [tier for tier, _ in rebooted.resumed_tiers] == ["local"] * 4, drill.log
    assert rebooted.resumed_from.startswith(f"{LOCAL_TIER}/hyperpod-cdk-checkpoints-")
    assert rebooted.resumed_at is not None and rebooted.resumed_at % job.checkpoint_every == 0
    assert rebooted.resumed_at >= drill.reboot.checkpoint_before + 1
    assert 0 <= first.steps[-1] + 1 - rebooted.resumed_at <= job.checkpoint_every
    # The node was replaced by a new instance: its old disk is gone (the file written on it before, and its local
    # checkpoints), and the new one got the wrapper before its lifecycle script ran. The job saw it under its Slurm
    # name.
    replaced = [e for e in drill.events if e["node"] == WORKERS[1] and e["event"] == "replaced"]
    assert replaced and replaced[-1]["exit_code"] == 0
    assert cluster.exec(WORKERS[1], ["test", "-e", "/var/tmp/old-instance"]).returncode == 1
    assert wrapper_before_script(cluster, WORKERS[1])
    assert f"Job failed - replaced nodes {cluster.slurm_name(WORKERS[1])}" in drill.log
    # The replaced node's two ranks read the shared tier, the surviving node's their local copies. Resumed right
    # after a complete checkpoint at least as new as the one at the crash: at most one interval of the retry's steps
    # is lost; then every remaining step once, on both nodes.
    by_host: dict[str, set[str]] = {}
    for tier, host in retry.resumed_tiers:
        by_host.setdefault(host, set()).add(tier)
    assert len(retry.resumed_tiers) == 4 and sorted(map(sorted, by_host.values())) == [["local"], ["shared"]], drill.log
    assert retry.resumed_at is not None and retry.resumed_at % job.checkpoint_every == 0
    assert retry.resumed_at >= drill.checkpoint_before_crash + 1
    assert 0 <= rebooted.steps[-1] + 1 - retry.resumed_at <= job.checkpoint_every
    assert retry.steps == list(range(retry.resumed_at, job.steps))
    assert retry.done_world == 4
    final = checkpoint.latest(job.host_path(cluster, job.checkpoint_dir(cluster)))
    assert final is not None and final.step == job.steps - 1


def slurm_reason(cluster: LocalCluster, node: str) -> str:
    controller = cluster.layout.controllers[0].name
    result = cluster.exec(controller, ["sinfo", "-h", "-N", "-n", cluster.slurm_name(node), "-o", "%E"])
    return result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""


def test_action_reboot_reboots_without_the_lifecycle_script_and_a_near_miss_is_left_alone(
    cluster: LocalCluster,
) -> None:
    """``scontrol update ... state=fail reason="Action:Reboot"`` (AWS's manual reboot): the agent reboots the
    instance (same disk, fresh /run), does not re-run the lifecycle script, the node's enabled daemons come back
    and the node returns to idle. A reason that only starts with it is left alone."""
    node, other = WORKERS
    controller = cluster.layout.controllers[0].name
    # The emulator writes this log afresh each time it runs the lifecycle entry script on the node.
    script_log = (cluster.workdir / "logs" / f"{node}-bootstrap.log").stat().st_mtime_ns
    kept = f"{os.path.dirname(RECOVERY_FILE)}/reboot-probe"  # where the health checks keep their recovery history
    probe = f"touch /run/reboot-probe {kept}"
    assert cluster.exec(node, ["sh", "-c", probe]).returncode == 0
    started = time.time()

    def scontrol(target: str, *argv: str) -> None:
        result = cluster.exec(controller, ["scontrol", "update", f"nodename={cluster.slurm_name(target)}", *argv])
        assert result.returncode == 0, result.stdout + result.stderr

    # The near-miss first: the agent's pass that sees the exact reason sees it too.
    scontrol(other, "state=drain", "reason=Action:Reboot please")
    scontrol(node, "state=fail", "reason=Action:Reboot")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        done = [e for e in agent.events(cluster) if e["time"] >= started and e["event"].startswith("reboot")]
        if any(e["event"] != "rebooting" for e in done):
            break
        time.sleep(1)
    events = [(e["node"], e["event"]) for e in agent.events(cluster) if e["time"] >= started]
    assert events == [(node, "rebooting"), (node, "rebooted")], events
    cluster.wait_idle(120, [node])

    # Rebooted: /run is a fresh tmpfs, the disk is the same one; the lifecycle script did not run again.
    assert cluster.exec(node, ["test", "-e", "/run/reboot-probe"]).returncode == 1
    assert cluster.exec(node, ["test", "-e", kept]).returncode == 0  # a repeat failure escalates to Action:Replace
    assert (cluster.workdir / "logs" / f"{node}-bootstrap.log").stat().st_mtime_ns == script_log
    # Whatever the lifecycle script started runs again (the emulation's "enabled" daemons).
    record = cluster.exec(node, ["cat", ENABLED_DAEMONS])
    for daemon in enabled_daemons(record.stdout if record.returncode == 0 else None):
        running = f'[ "$(cat /proc/$(cat {daemon.pid_file})/comm)" = "{daemon.name[:15]}" ]'
        assert cluster.exec(node, ["sh", "-c", running]).returncode == 0, daemon.unit
    # The near-miss: still drained with its reason, never rebooted.
    assert slurm_reason(cluster, other) == "Action:Reboot please"
    scontrol(other, "state=resume")
    cluster.wait_idle(60, [other])
    workers = ",".join(cluster.slurm_name(w) for w in WORKERS)
    ran = cluster.exec(LOGIN, ["srun", "-N2", "-w", workers, "hostname"], timeout=120)
    assert ran.returncode == 0 and sorted(ran.stdout.split()) == sorted(cluster.slurm_name(w) for w in WORKERS)
