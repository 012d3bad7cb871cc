"""The drills' shared skeleton (``hyperpod_local.drill.Drill``): the fault comes only once the job has logged the step
(and, where asked, a complete checkpoint exists), times count from the fault, and the ended job's figures are read
once. No root and no cluster: a fake job log and a fake ``scontrol``; the drills themselves run in
tests/test_local_faults.py, test_local_spot.py and test_local_autoresume.py."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hyperpod_local import drill as drills
from hyperpod_local.drill import Drill, DrillError

JOB_LINE = "JobId=42 JobName=ddp JobState=COMPLETED Restarts=1 NodeList=cpu-[1-2]\n"


class FakeJob:
    """A DdpJob's paths in a temporary directory; submitting gives job 42."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def submit(self, cluster: Any, node: str) -> str:
        return "42"

    def log(self, cluster: Any, job_id: str) -> Path:
        return self.directory / f"ddp-{job_id}.out"

    def checkpoint_dir(self, cluster: Any) -> str:
        return "/fsx/checkpoints/ddp"

    def host_path(self, cluster: Any, on_node: str) -> Path:
        return self.directory / "checkpoints"


class FakeCluster:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def exec(self, node: str, argv: list[str], timeout: float = 0) -> SimpleNamespace:
        self.calls.append(argv)
        return SimpleNamespace(returncode=0, stdout=JOB_LINE, stderr="")


def later(seconds: float, action: Any) -> None:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Drill, Path, dict[str, Any]]:
    found: dict[str, Any] = {"checkpoint": None}
    monkeypatch.setattr(drills.checkpoint, "latest", lambda root: found["checkpoint"])
    drill = Drill(FakeCluster(), FakeJob(tmp_path), "login-1", timeout=10)  # type: ignore[arg-type]
    log = tmp_path / "ddp-42.out"
    log.write_text("job 42 restart 0 on cpu-1\nstep 1 loss 0.9\nstep 2 loss 0.8\n")
    return drill, log, found


def test_the_fault_waits_for_the_step_and_a_complete_checkpoint(setup: tuple[Drill, Path, dict[str, Any]]) -> None:
    drill, log, found = setup
    seen: list[tuple[int, Any]] = []
    later(0.3, lambda: log.write_text(log.read_text() + "step 3 loss 0.7\n"))
    later(0.8, lambda: found.update(checkpoint=SimpleNamespace(step=3)))
    drill.start(3, lambda: seen.append((drill.runs()[-1].steps[-1], found["checkpoint"])))
    assert seen == [(3, found["checkpoint"])] and found["checkpoint"] is not None
    assert drill.job_id == "42" and drill.before is found["checkpoint"]
    assert drill.since(drill.fault_at + 2.04) == 2.0


def test_without_checkpoint_first_the_fault_needs_only_the_step(setup: tuple[Drill, Path, dict[str, Any]]) -> None:
    drill, _log, found = setup
    faults: list[str] = []
    drill.start(2, lambda: faults.append("notice"), checkpoint_first=False)
    assert faults == ["notice"] and drill.before is None and found["checkpoint"] is None


def test_a_step_never_logged_is_a_drill_error_naming_the_wait(setup: tuple[Drill, Path, dict[str, Any]]) -> None:
    drill, _log, found = setup
    found["checkpoint"] = SimpleNamespace(step=2)
    drill.timeout = 0.5
    with pytest.raises(DrillError, match=r"waiting for a complete checkpoint and step 9 in the log; job log tail"):
        drill.start(9, lambda: pytest.fail("no fault before the step"))


def test_the_outcome_is_the_ended_jobs_fields_and_log(setup: tuple[Drill, Path, dict[str, Any]]) -> None:
    drill, log, _found = setup
    drill.job_id = "42"
    outcome = drill.outcome()
    assert {k: outcome[k] for k in ("job_id", "state", "restarts", "log")} == {
        "job_id": "42",
        "state": "COMPLETED",
        "restarts": 1,
        "log": log.read_text(),
    }
    assert [run.steps for run in outcome["runs"]] == [[1, 2]]
    assert drill.requeued() and drill.cluster.calls[-1] == ["scontrol", "show", "job", "-o", "42"]  # type: ignore[attr-defined]


class SpotCluster:
    """A cluster whose ``scontrol`` tells the Spot drill's story: the node drained on the notice, the job requeued but
    still COMPLETING for a few looks, then PENDING; running again and completed once the replacement booted. Records
    the job's state when the node is lost."""

    def __init__(self, log: Path) -> None:
        self.log, self.completing, self.lost, self.booted = log, 3, False, False
        self.state_when_lost = ""

    def job(self) -> str:
        if self.booted:
            self.log.write_text(self.log.read_text() + "job 42 restart 1 on cpu-1\nresumed from /c at step 3\n")
            return "JobState=COMPLETED Restarts=1"
        if self.completing:
            self.completing -= 1
            return "JobState=COMPLETING Restarts=1"
        return "JobState=PENDING Restarts=1"

    def exec(self, node: str, argv: list[str], timeout: float = 0) -> SimpleNamespace:
        if argv[:3] == ["scontrol", "show", "node"]:
            state = "IDLE+DRAIN+NOT_RESPONDING" if self.lost else "IDLE+DRAIN"
            shown = f"NodeName={argv[3]} State={state}\n   Reason=hyperpod-cdk:spot-reclaim: terminate at x [root]\n"
            return SimpleNamespace(returncode=0, stdout=shown, stderr="")
        return SimpleNamespace(returncode=0, stdout=f"JobId=42 {self.job()}\n", stderr="")

    def crash(self, name: str) -> None:
        self.lost, self.state_when_lost = True, self.job()

    def boot(self, name: str, bootstrap: bool = False) -> None:
        self.booted = True


def test_the_spot_drill_loses_the_node_only_once_the_requeued_job_is_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lost while the job still COMPLETES on it, the requeue waits for slurmctld to resend the dead node's termination
    (about 45 s on the local cluster) before the requeue delay starts."""
    monkeypatch.setattr(drills.checkpoint, "latest", lambda root: SimpleNamespace(step=2))
    log = tmp_path / "ddp-42.out"
    log.write_text("job 42 restart 0 on cpu-1\nstep 1 loss 0.9\nstep 2 loss 0.8\n")
    cluster = SpotCluster(log)
    imds = SimpleNamespace(post=lambda node: None, withdraw=lambda node: None)
    drill = drills.spot_reclaim(
        cluster,  # type: ignore[arg-type]
        FakeJob(tmp_path),  # type: ignore[arg-type]
        imds,  # type: ignore[arg-type]
        submit_from="login-1",
        reclaim="cpu-2",
        notice_after_step=2,
        timeout=10,
    )
    assert cluster.state_when_lost == "JobState=PENDING Restarts=1" and cluster.completing == 0
    assert (drill.state, drill.checkpoint_at_requeue) == ("COMPLETED", 2)
