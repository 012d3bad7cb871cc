"""The Spot interruption path on a node: the watcher against a fake instance metadata service (an HTTP
server on 127.0.0.1 that answers IMDSv2's token PUT and ``spot/instance-action`` as EC2 documents them), its
step on the runtime's fake roots, the launcher's ignored signal and the training side's StopRequest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import CLUSTER_GROUPS, RecordingRunner, fake_node, running_daemon
from training_runtime import checkpoint
from training_runtime.checkpoint.interrupt import CHECKPOINT_SIGNAL
from training_runtime.emulation import Emulation
from training_runtime.groups import GroupSpec
from training_runtime.health.remedy import Situation, parse_node_state, plan_actions
from training_runtime.health.results import PERIODIC
from training_runtime.spot import IMDS_URL, INSTANCE_ACTION_PATH, TOKEN_PATH, Imds, ImdsError, Notice, Watcher
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.daemon import RunningDaemon
from training_runtime.steps.spot import SPOT_WATCHER, UNIT_FILE, WATCHER, SpotWatcherFiles, spot_steps, watcher_program

SRC = str(Path(__file__).resolve().parent.parent / "src")
NOTICE = {"action": "terminate", "time": "2026-11-24T17:02:00Z"}  # passed through as text, never compared with a clock


class FakeImds:
    """IMDSv2 as EC2 documents it: PUT /latest/api/token with a TTL header gives a token; GET of the
    instance-action item needs it (401 otherwise), answers 404 until a notice is posted."""

    def __init__(self) -> None:
        self.notice: dict[str, str] | None = None
        self.tokens: list[str] = []
        self.requests: list[str] = []
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, code: int, body: str = "") -> None:
                self.send_response(code)
                self.end_headers()
                self.wfile.write(body.encode())

            def do_PUT(self) -> None:
                imds.requests.append("PUT " + self.path)
                if self.path != TOKEN_PATH or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    self._answer(400)
                    return
                imds.tokens.append(f"token-{len(imds.tokens)}")
                self._answer(200, imds.tokens[-1])

            def do_GET(self) -> None:
                imds.requests.append("GET " + self.path)
                if not imds.tokens or self.headers.get("X-aws-ec2-metadata-token") != imds.tokens[-1]:
                    self._answer(401)
                elif self.path != INSTANCE_ACTION_PATH or imds.notice is None:
                    self._answer(404)
                else:
                    self._answer(200, json.dumps(imds.notice))

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def imds() -> Iterator[FakeImds]:
    fake = FakeImds()
    yield fake
    fake.close()


# --- reading the notice -------------------------------------------------------------------------------


def test_no_notice_is_none_a_notice_is_read_and_one_token_serves_many_reads(imds: FakeImds) -> None:
    client = Imds(imds.url)
    assert client.instance_action() is None
    imds.notice = NOTICE
    assert client.instance_action() == Notice("terminate", "2026-11-24T17:02:00Z")
    assert imds.requests == ["PUT " + TOKEN_PATH, "GET " + INSTANCE_ACTION_PATH, "GET " + INSTANCE_ACTION_PATH]


def test_a_rejected_token_is_replaced_once(imds: FakeImds) -> None:
    client = Imds(imds.url)
    assert client.instance_action() is None
    imds.tokens.append("rotated")  # the service no longer takes the client's token
    imds.notice = NOTICE
    assert client.instance_action() == Notice("terminate", "2026-11-24T17:02:00Z")
    assert [r.split()[0] for r in imds.requests] == ["PUT", "GET", "GET", "PUT", "GET"]


def test_an_unreachable_service_is_an_error_not_no_notice(imds: FakeImds) -> None:
    url = imds.url
    imds.close()
    with pytest.raises(ImdsError, match="no IMDSv2 token"):
        Imds(url, timeout_s=0.5).instance_action()


# --- reacting to it -------------------------------------------------------------------------------------

SHOW = "NodeName=w1 Arch=x86_64\n   State={state} ThreadsPerCore=1\n{reason}"


def show(state: str, reason: str = "") -> str:
    return SHOW.format(state=state, reason=f"   Reason={reason} [root@2026-11-24T17:00:05]\n" if reason else "")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def watcher(tmp_path: Path, imds: FakeImds, node: str, jobs: str = "17\n") -> Watcher:
    runner = RecordingRunner({("scontrol", "show", "node"): (0, node), ("squeue",): (0, jobs)})
    return Watcher("w1", Imds(imds.url), runner, tmp_path / "state.json", grace_s=60, clock=Clock())


def slurm_changes(w: Watcher) -> list[list[str]]:
    return [a for a in w.actions if a[:2] != ["scontrol", "show"] and a[0] != "squeue"]


def test_a_notice_drains_the_node_and_signals_its_jobs_once_then_requeues_them_after_the_grace(
    tmp_path: Path, imds: FakeImds
) -> None:
    imds.notice = NOTICE
    w = watcher(tmp_path, imds, show("ALLOCATED"), jobs="17\n23\n")
    assert w.poll() == Notice("terminate", "2026-11-24T17:02:00Z")
    reason = "reason=hyperpod-cdk:spot-reclaim: terminate at 2026-11-24T17:02:00Z"
    assert slurm_changes(w) == [
        ["scontrol", "update", "nodename=w1", "state=drain", reason],
        ["scancel", "--signal=USR1", "17"],
        ["scancel", "--signal=USR1", "23"],
    ]
    assert ["squeue", "-h", "-w", "w1", "-t", "RUNNING,COMPLETING", "-o", "%A"] in w.actions
    # Drained now; the next polls within the grace change nothing (a restarted watcher reads its state file).
    w.runner.respond[("scontrol", "show", "node")] = (0, show("MIXED+DRAIN", reason[len("reason=") :]))  # type: ignore[attr-defined]
    w.actions = []
    w.clock.now += 59  # type: ignore[attr-defined]
    w.poll()
    assert slurm_changes(w) == []
    # Job 23 handed itself back (no longer on the node); 17 ignored the signal and is requeued, once.
    w.runner.respond[("squeue",)] = (0, "17\n")  # type: ignore[attr-defined]
    w.clock.now += 1  # type: ignore[attr-defined]
    w.poll()
    w.poll()
    assert slurm_changes(w) == [["scontrol", "requeue", "17"]]


def test_without_a_notice_a_spot_drained_node_is_a_replacement_and_is_resumed(tmp_path: Path, imds: FakeImds) -> None:
    w = watcher(tmp_path, imds, show("IDLE+DRAIN", "hyperpod-cdk:spot-reclaim: terminate at 2026-11-24T17:02:00Z"))
    (tmp_path / "state.json").write_text('{"signaled": {"17": 1.0}, "requeued": {}}')
    assert w.poll() is None
    assert slurm_changes(w) == [["scontrol", "update", "nodename=w1", "state=resume"]]
    assert not (tmp_path / "state.json").exists(), "a new instance starts with no handled jobs"


@pytest.mark.parametrize("reason", ["hyperpod-cdk:disk: / has 3.0 GiB free", "maintenance by ops"])
def test_without_a_notice_other_drains_are_left_alone(tmp_path: Path, imds: FakeImds, reason: str) -> None:
    w = watcher(tmp_path, imds, show("IDLE+DRAIN", reason))
    w.poll()
    assert slurm_changes(w) == []


def test_an_unreachable_metadata_service_changes_nothing(tmp_path: Path, imds: FakeImds) -> None:
    w = watcher(tmp_path, imds, show("IDLE+DRAIN", "hyperpod-cdk:spot-reclaim: terminate at x"))
    imds.close()
    w.imds.timeout_s = 0.5
    with pytest.raises(ImdsError):
        w.poll()
    assert w.actions == []


def test_the_health_checks_never_resume_or_redrain_a_spot_drained_node() -> None:
    situation = Situation("w1", "scontrol", PERIODIC, False, "recover", 0.0, {})
    spot = parse_node_state(show("IDLE+DRAIN", "hyperpod-cdk:spot-reclaim: terminate at x"))
    health = parse_node_state(show("IDLE+DRAIN", "hyperpod-cdk:disk: full"))
    assert spot is not None and health is not None
    assert plan_actions(situation, [], spot) == []
    assert plan_actions(situation, [], health) == [["scontrol", "update", "nodename=w1", "state=resume"]]


# --- the step -------------------------------------------------------------------------------------------

SPOT_GROUPS = (
    CLUSTER_GROUPS[0],
    CLUSTER_GROUPS[1],
    GroupSpec("workers", "compute", "ml.trn1.32xlarge", "trn", capacity="spot"),
)


def test_spot_compute_nodes_run_the_watcher_with_their_options_and_converge(tmp_path: Path) -> None:
    options = {"spot": {"poll_interval": 2, "checkpoint_grace": 30}}
    emulation = Emulation(imds_url="http://10.9.0.1:8111")  # the local cluster's fake metadata service
    node = fake_node(tmp_path, groups=SPOT_GROUPS, options=options, emulation=emulation)
    steps = [
        s for s in steps_for(node) if isinstance(s, SpotWatcherFiles) or getattr(s, "daemon", None) == SPOT_WATCHER
    ]
    assert [type(s) for s in steps] == [SpotWatcherFiles, RunningDaemon]
    running_daemon(node, SPOT_WATCHER)
    for step in steps:
        assert step.needed(node)
        step.apply(node)
        assert not step.needed(node), step
    program = node.path(WATCHER).read_text()
    assert "-m training_runtime.spot --interval 2 --grace 30 --imds-url http://10.9.0.1:8111" in program
    assert [WATCHER, "--daemon"] in node.runner.commands  # type: ignore[attr-defined]
    assert not node.path(UNIT_FILE).exists(), "no systemd on this node: a daemon, no unit"


def test_only_spot_compute_nodes_with_the_watcher_enabled_get_it(tmp_path: Path) -> None:
    assert spot_steps(fake_node(tmp_path / "a", groups=SPOT_GROUPS, instance="login-1")) == []
    assert spot_steps(fake_node(tmp_path / "b")) == [], "on-demand (not said)"
    off = fake_node(tmp_path / "c", groups=SPOT_GROUPS, options={"spot": {"enabled": False}})
    assert spot_steps(off) == []


def test_with_systemd_the_watcher_is_a_service_that_restarts(tmp_path: Path) -> None:
    (tmp_path / "run" / "systemd" / "system").mkdir(parents=True)
    node = fake_node(tmp_path, groups=SPOT_GROUPS)
    files = SpotWatcherFiles()
    files.apply(node)
    unit = node.path(UNIT_FILE).read_text()
    assert f"ExecStart={WATCHER}\nRestart=always" in unit
    assert node.runner.commands == [["systemctl", "daemon-reload"]]  # type: ignore[attr-defined]
    assert not files.needed(node)


# --- the job side ---------------------------------------------------------------------------------------


def test_the_launcher_starts_torchrun_with_the_checkpoint_signal_ignored(tmp_path: Path) -> None:
    """torchrun dies of a SIGUSR1 it does not ignore; the ignored disposition survives exec (and reaches the
    workers, whose StopRequest replaces it)."""
    torchrun = tmp_path / "torchrun"
    torchrun.write_text("#!/bin/sh\ngrep '^SigIgn' /proc/self/status\n")
    torchrun.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=SRC, SLURM_JOB_ID="5", SLURM_STEP_NODELIST="w[1-2]")
    argv = [sys.executable, "-m", "training_runtime", "launch", "--on-node", "--nproc-per-node=1"]
    argv += [f"--torchrun={torchrun}", "--", "train.py"]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    ignored = int(result.stdout.split()[1], 16)
    assert ignored & (1 << (CHECKPOINT_SIGNAL - 1)), result.stdout


def test_a_stop_request_catches_the_signal_and_the_ranks_agree() -> None:
    previous = signal.getsignal(CHECKPOINT_SIGNAL)
    try:
        stop = checkpoint.StopRequest()
        assert not stop.agreed() and not stop.agreed(lambda flag: flag)
        assert stop.agreed(lambda flag: True), "another rank got it"
        assert stop.requested_anywhere and not stop.requested
        os.kill(os.getpid(), CHECKPOINT_SIGNAL)
        assert stop.requested and stop.agreed()
    finally:
        signal.signal(CHECKPOINT_SIGNAL, previous)


def test_requeue_job_requeues_the_job_it_runs_in() -> None:
    calls: list[list[str]] = []

    def run(argv: list[str], **kw: Any) -> Any:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 1 if argv[-1] == "9" else 0, "", "Invalid job id")

    assert list(checkpoint.requeue_job({"SLURM_JOB_ID": "42"}, run=run)) == ["scontrol", "requeue", "42"]
    assert calls == [["scontrol", "requeue", "42"]]
    with pytest.raises(RuntimeError, match="Invalid job id"):
        checkpoint.requeue_job({"SLURM_JOB_ID": "9"}, run=run)
    with pytest.raises(RuntimeError, match="SLURM_JOB_ID is not set"):
        checkpoint.requeue_job({}, run=run)


def test_a_deployed_spot_node_reads_ec2s_metadata_service(tmp_path: Path) -> None:
    node = fake_node(tmp_path, groups=SPOT_GROUPS)
    assert f" --imds-url {IMDS_URL} " in watcher_program(node)
    assert IMDS_URL == "http://169.254.169.254", "EC2's documented IPv4 address"
