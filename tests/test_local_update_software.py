"""``hyperpod-cdk update-software`` on a running local cluster (root only; HyperPod platform) with the emulated
control plane: real Slurm daemons, real drains, a real verification job, and UpdateClusterSoftware re-imaging each
node (its root overlay reset, its lifecycle script run again) while /fsx and the accounting records stay.

One module-scoped cluster (tests/fixtures/update_software/cluster.yaml: two compute groups of one node, a partition
each) and one drill, so the budget stays small: a training job with ``--requeue`` runs on workers-b, keeping its
progress on /fsx; the update is interrupted between the two groups (Ctrl-C as the command drains workers-b) and
resumed with ``--resume``: workers-a is updated once, never again; workers-b is drained, waits for the job to finish,
is updated and verified. The job runs until the drill lets it finish (a file on /fsx), once the resumed command has
drained workers-b and found the job still running there: no fixed length of job pads the drill. The requeue at the
drain deadline is the unit tests' (tests/test_ops_update_software.py): a requeued job waits ``cred_expire`` (at
least 70 s) before it starts again, too long for this budget. A second test
(issue #39, H3) runs a job whose name and comment try to put a command on the controller's requeue line
(tests/hostile_slurm.py) up to that requeue, and shows that the requeue ran and the command did not.
Alone: ``python -m pytest tests/test_local_update_software.py``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from hostile_slurm import MARKERS, crafted_sbatch_args, injected
from hyperpod_cdk.ops.context import Captured
from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.namespaces import list_netns
from hyperpod_local.plan import UpOptions
from local_support import Release, SsmOnTheNode, release, requires_hyperpod_platform, use_control_plane, variant
from ops_support import NoFakes, Operator
from test_local_control_plane import run
from training_runtime.node import HYPERPOD
from training_runtime.paths import HEALTH_LOG

pytestmark = requires_hyperpod_platform

CONFIG = Path(__file__).resolve().parent / "fixtures" / "update_software" / "cluster.yaml"
NAME = "rolling-cluster"
JOB = (
    "n=$(cat /fsx/rolling/count 2>/dev/null || echo 0); while [ ! -e /fsx/rolling/release ]; do n=$((n+1)); "
    'echo $n >/fsx/rolling/count; sleep 1; done; echo "$n $(hostname)" >/fsx/rolling/finished'
)
"""A training job in miniature: a step a second, its progress on /fsx (a requeued run carries on from it), until
the drill lets it finish (:class:`ReleaseOnceWaiting`); it writes its last step and its node."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("update-software")
    cluster = LocalCluster.up(
        CONFIG,
        workdir,
        variant(platform=HYPERPOD),
        UpOptions(prefix=f"hpus{os.getpid() % 10000}", subnet="10.238.0.0/24"),
    )
    try:
        control_plane.start(cluster, launch_latency=1.0)
        yield cluster
    finally:
        cluster.down()
        leftover = [ns for ns in list_netns() if ns.startswith(cluster.state.prefix + "-")]
        assert leftover == [], leftover


@pytest.fixture
def sagemaker(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    use_control_plane(cluster, monkeypatch, tmp_path)
    return boto3.session.Session().client("sagemaker", config=Config(retries={"max_attempts": 2}))


class CtrlCAtDrain:
    """The SSM fake that presses Ctrl-C once, as the command starts draining ``node``: between the two groups."""

    def __init__(self, ssm: SsmOnTheNode, node: str) -> None:
        self.ssm, self.node, self.pressed = ssm, node, False

    def __call__(self, argv: list[str]) -> Captured:
        command = json.loads(argv[argv.index("--parameters") + 1])["command"][0]
        if not self.pressed and f"NodeName={self.node} State=DRAIN" in command:
            self.pressed = True
            raise KeyboardInterrupt
        return self.ssm(argv)


class ReleaseOnceWaiting:
    """The SSM fake that lets the job finish (``ending``: a file on /fsx) once the command has drained ``node`` and
    then found ``job`` still running there: the command is waiting for it, as it must, and the drill no longer."""

    def __init__(self, ssm: SsmOnTheNode, node: str, job: str, ending: Release) -> None:
        self.ssm, self.node, self.job, self.ending = ssm, node, job, ending
        self.drained = self.waited = False

    def __call__(self, argv: list[str]) -> Captured:
        command = json.loads(argv[argv.index("--parameters") + 1])["command"][0]
        answer = self.ssm(argv)
        if f"NodeName={self.node} State=DRAIN" in command:
            self.drained = True
        elif self.drained and not self.waited and "; squeue " in command:  # the command's look at the jobs
            self.waited = any(line.split("|")[0] == self.job for line in answer.stdout.splitlines())
            if self.waited:
                self.ending.now()
        return answer


def reimages(cluster: LocalCluster) -> dict[str, int]:
    """How often the control plane re-imaged each instance (its event log)."""
    found: dict[str, int] = {}
    for line in (control_plane.directory(cluster) / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["description"].endswith(": reimage started"):
            found[event["instance_id"]] = found.get(event["instance_id"], 0) + 1
    return found


def test_a_rolling_update_interrupted_and_resumed_while_a_job_runs(
    cluster: LocalCluster, sagemaker: Any, tmp_path: Path
) -> None:
    a, b = cluster.slurm_name("workers-a-1"), cluster.slurm_name("workers-b-1")
    listed = sagemaker.list_cluster_nodes(ClusterName=NAME)["ClusterNodeSummaries"]
    ids = {n["InstanceGroupName"]: n["InstanceId"] for n in listed}
    assert cluster.exec("workers-a-1", ["sh", "-c", "echo old >/var/tmp/root-marker"]).returncode == 0
    run(cluster, "mkdir", "-p", "/fsx/rolling")
    job = run(cluster, "sbatch", "--parsable", "--requeue", "-p", "cpu-b", "-w", b, "-J", "train", "--wrap", JOB)
    job = job.strip()
    operator = Operator(fakes=NoFakes(), home=tmp_path, sleep=time.sleep)
    operator.ssm_command = CtrlCAtDrain(SsmOnTheNode(cluster, sagemaker, NAME), b)
    options = ("--yes", "--poll", "2", "--drain-deadline", "2m", "--update-timeout", "300", "--json")

    interrupted = operator("update-software", NAME, *options)
    assert interrupted.code == 130, interrupted.err
    record = json.loads((tmp_path / ".hyperpod-cdk/update-software" / f"{NAME}.json").read_text())
    assert record["phases"] == {"workers-a": "done", "workers-b": "draining"}
    assert record["verified"] == {"workers-a": [a]}
    assert reimages(cluster) == {ids["workers-a"]: 1}
    assert cluster.exec("workers-a-1", ["test", "-e", "/var/tmp/root-marker"]).returncode == 1  # a fresh root

    with release(cluster, "rolling/release") as ending:  # JOB's file
        waiting = ReleaseOnceWaiting(SsmOnTheNode(cluster, sagemaker, NAME), b, job, ending)
        operator.ssm_command = waiting
        resumed = operator("update-software", NAME, "--resume", *options)
    assert resumed.code == 0, resumed.err
    assert waiting.waited, "the resumed command never found the job running on the drained workers-b"
    assert [(g["group"], g["phase"], g["verified_on"]) for g in resumed.json()["groups"]] == [
        ("workers-a", "done", [a]),
        ("workers-b", "done", [b]),
    ]
    assert reimages(cluster) == {ids["workers-a"]: 1, ids["workers-b"]: 1}  # no group twice, the controller never
    steps = run(cluster, "cat", "/fsx/rolling/count").strip()
    assert int(steps) > 0 and run(cluster, "cat", "/fsx/rolling/finished").split() == [steps, b]  # /fsx stayed
    # (the job finished where it ran, before b's update)
    accounted = run(cluster, "sacct", "-X", "-n", "-P", "-o", "JobName,State,NodeList", "-S", "now-1hour")
    assert f"train|COMPLETED|{b}" in accounted.splitlines()  # the accounting records stayed
    verified = [line for line in accounted.splitlines() if line.startswith("hyperpod-cdk-verify|")]
    assert verified == [f"hyperpod-cdk-verify|COMPLETED|{a}", f"hyperpod-cdk-verify|COMPLETED|{b}"]
    for node in ("workers-a-1", "workers-b-1"):  # the verification job ran the health checks on the fresh root
        checked = cluster.exec(node, ["grep", "-c", '"mode": "report"', HEALTH_LOG])
        assert checked.returncode == 0 and int(checked.stdout) >= 1, (node, checked.stdout, checked.stderr)
    states = run(cluster, "sinfo", "-h", "-N", "-p", "cpu-a,cpu-b", "-o", "%N %t")
    assert sorted(states.split()) == sorted([a, "idle", b, "idle"])  # back in service, no reservation left
    assert run(cluster, "scontrol", "show", "reservation").strip().startswith("No reservations")
    described = sagemaker.describe_cluster(ClusterName=NAME)["InstanceGroups"]
    assert {g["InstanceGroupName"]: g.get("SoftwareUpdateStatus") for g in described} == {
        "controller": None,
        "workers-a": "Succeeded",
        "workers-b": "Succeeded",
    }


class CtrlCAfterRequeue:
    """The SSM fake that records each command and presses Ctrl-C on the first one after ``scontrol requeue``: the
    drill stops before UpdateClusterSoftware (no re-image), once the requeue line has run."""

    def __init__(self, ssm: SsmOnTheNode) -> None:
        self.ssm = ssm
        self.commands: list[str] = []
        self.said: list[str] = []
        """Each command with what it printed (for a failure's message)."""

    def __call__(self, argv: list[str]) -> Captured:
        command = json.loads(argv[argv.index("--parameters") + 1])["command"][0]
        if any("scontrol requeue" in c for c in self.commands):
            raise KeyboardInterrupt
        self.commands.append(command)
        answer = self.ssm(argv)
        self.said.append(f"$ {command}\n{answer.stdout}{answer.stderr}")
        return answer


@pytest.mark.hostile  # the hostile-user drill (tests/hostile_drill.py)
def test_a_crafted_job_name_and_comment_run_nothing_through_the_requeue_line(
    cluster: LocalCluster, sagemaker: Any, tmp_path: Path
) -> None:
    controller = cluster.layout.controller.name
    a = cluster.slurm_name("workers-a-1")
    job = run(cluster, "sbatch", "--parsable", "--requeue", "-p", "cpu-a", "-w", a, *crafted_sbatch_args(),
              "--wrap", "sleep 600").strip()  # fmt: skip
    for _ in range(180):
        if run(cluster, "squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING":
            break
        time.sleep(1)
    else:
        shown = run(cluster, "squeue", "-h", "-j", job, "-o", "%T %r") + run(cluster, "sinfo", "-N", "-o", "%N %t %E")
        raise AssertionError(f"the crafted job never started:\n{shown}")
    operator = Operator(fakes=NoFakes(), home=tmp_path)

    def sleep(seconds: float) -> None:  # the command's deadline runs on the operator's clock: it moves with time
        time.sleep(seconds)
        operator.clock[0] += seconds

    operator.sleep = sleep
    ssm = CtrlCAfterRequeue(SsmOnTheNode(cluster, sagemaker, NAME))
    operator.ssm_command = ssm
    try:
        done = operator("update-software", NAME, "--groups", "workers-a", "--yes", "--poll", "2",
                        "--drain-deadline", "5s")  # fmt: skip
        assert done.code == 130, done.err + "\n".join(ssm.said)  # stopped after the requeue, before any update
        assert injected(cluster, controller) == [], "a command in the job's name or comment ran on the controller"
        requeues = [c for c in ssm.commands if "scontrol requeue" in c]
        assert len(requeues) == 1 and f"; scontrol requeue {job}; echo " in requeues[0], requeues
        for _ in range(30):  # the real job was requeued
            shown = run(cluster, "scontrol", "-o", "show", "job", job)
            if " Restarts=1 " in shown:
                break
            time.sleep(1)
        assert " Restarts=1 " in shown, shown
    finally:
        cluster.exec(controller, ["scancel", job])
        cluster.exec(controller, ["scontrol", "update", f"NodeName={a}", "State=RESUME"])
        cluster.exec(controller, ["rm", "-f", *MARKERS])
