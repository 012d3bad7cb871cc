"""The scaler's loop (training_runtime.scaler.service) with an injected clock, Slurm runner and SageMaker fake.

SageMaker is tests/scaler_fakes.py's JSON-protocol server (why a fake: it says), reached by the real client;
Slurm is a runner that answers ``scontrol``/``squeue`` from a model and records every update.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from scaler_fakes import FakeSageMaker
from training_runtime.run import CommandError, Result
from training_runtime.scaler.config import ScaledGroupConfig, ScalerConfig
from training_runtime.scaler.heartbeat import TAG_KEY, parse_heartbeat
from training_runtime.scaler.policy import drain_reason
from training_runtime.scaler.sagemaker import SageMaker
from training_runtime.scaler.service import Scaler, backoff_s
from training_runtime.scaler.sigv4 import Credentials
from training_runtime.scaler.slurm_view import Slurm
from training_runtime.scaler.state import load
from training_runtime.scaling import ScalingSpec

START = 1_795_000_000.0  # the service's injected clock: it reads no other time
ARN = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl"


class FakeSlurm:
    """``scontrol -o show nodes``, ``squeue -h -r -t PD``, ``scontrol update`` over a small model."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pending: list[str] = []
        self.updates: list[list[str]] = []
        self.job_update_exit = 0
        """Slurm 24.11 sets a job's AdminComment in a partition without nodes yet exits 1."""
        self.admin_comments: dict[str, str] = {}
        """Job id -> AdminComment (``squeue -h -r -j <id> -O admin_comment:``)."""
        self.job_names: dict[str, str] = {}
        """Job id -> the name its user gave it (``scontrol -o show job`` prints it among Slurm's fields)."""
        self.released: list[str] = []
        self.release_exit = 0
        """Slurm 24.11 releases a job in a partition without nodes yet exits 1."""

    def add_node(self, name: str, state: str = "IDLE", busy_since: float | None = None, cpus: int = 0) -> None:
        self.nodes[name] = {"state": state, "drain": False, "reason": None, "cpus": cpus, "busy": busy_since}

    def _line(self, name: str, node: dict[str, Any]) -> str:
        state = node["state"] + ("+DRAIN" if node["drain"] else "")
        busy = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(node["busy"])) if node["busy"] else "None"
        line = "NodeName={} Arch=x86_64 CPUAlloc={} CPUTot=8 State={} Partitions=gpu LastBusyTime={}".format(
            name, node["cpus"], state, busy
        )
        if node["reason"]:
            line += " Reason={} [root@2026-11-26T01:00:00]".format(node["reason"])
        return line

    def run(self, argv: Sequence[str], *, timeout: float = 0, check: bool = True) -> Result:
        argv = list(argv)
        out = ""
        if argv[:4] == ["scontrol", "-o", "show", "nodes"]:
            out = "\n".join(self._line(n, v) for n, v in sorted(self.nodes.items()))
        elif argv[:4] == ["scontrol", "-o", "show", "node"]:
            out = self._line(argv[4], self.nodes[argv[4]])
        elif argv[:4] == ["scontrol", "-o", "show", "job"]:  # as Slurm prints it: the user's name among the fields
            comment = self.admin_comments.get(argv[4])
            out = "JobId={} JobName={} JobState=PENDING Reason=JobHeldUser{}".format(
                argv[4], self.job_names.get(argv[4], "wrap"), "" if comment is None else " AdminComment=" + comment
            )
        elif argv[0] == "squeue" and "-O" in argv:
            assert argv[argv.index("-O") + 1] == "admin_comment:", argv  # that one field, printed whole
            out = self.admin_comments.get(argv[argv.index("-j") + 1], "(null)") + "\n"
        elif argv[:2] == ["scontrol", "release"]:
            self.released.append(argv[2])
            if self.release_exit and check:
                raise CommandError(argv, self.release_exit, "Requested partition configuration not available now")
        elif argv[0] == "squeue":
            out = "\n".join(self.pending)
        elif argv[:2] == ["scontrol", "update"]:
            self.updates.append(argv[2:])
            key, _, value = argv[2].partition("=")
            if key == "NodeName":
                node = self.nodes[value]
                if argv[3] == "State=DRAIN":
                    node["drain"], node["reason"] = True, argv[4].partition("=")[2]
                elif argv[3] == "State=RESUME":
                    node["drain"], node["reason"] = False, None
            elif key == "JobId" and self.job_update_exit and check:  # as the real Runner with check=True
                raise CommandError(argv, self.job_update_exit, "Requested partition configuration not available now")
        return Result(argv, 0, out, "")


class World:
    def __init__(self, tmp: Path, low: int = 0, high: int = 4) -> None:
        self.now = START
        self.fake = FakeSageMaker()
        self.fake.groups["gpu"] = [0, 0]
        self.slurm = FakeSlurm()
        self.config = ScalerConfig(
            cluster_name="demo",
            cluster_arn=ARN,
            region="us-west-2",
            endpoint=self.fake.url,
            naming="ip",
            groups=(ScaledGroupConfig("gpu", "gpu", ScalingSpec(low, high, 10)),),
            state_path=str(tmp / "state.json"),
            heartbeat_path=str(tmp / "heartbeat"),
            metrics_dir=str(tmp / "metrics"),
        )

    def scaler(self) -> Scaler:
        creds = Credentials("AKID", "secret")
        client = SageMaker(self.fake.url, "us-west-2", lambda: creds, clock=lambda: self.now, sleep=lambda s: None)
        return Scaler(self.config, client, Slurm(self.slurm), clock=lambda: self.now, jitter=lambda: 1.0,
                      resources=lambda: None)  # fmt: skip

    def node_joins(self, index: int, busy_since: float | None = None) -> str:
        instance = f"i-{index:017x}"
        address = f"10.0.0.{index}"
        self.fake.nodes.append({"InstanceId": instance, "InstanceGroupName": "gpu",
                                "InstanceStatus": {"Status": "Running"},
                                "PrivateDnsHostname": f"ip-10-0-0-{index}.us-west-2.compute.internal"})  # fmt: skip
        self.fake.groups["gpu"][0] += 1
        name = "ip-" + address.replace(".", "-")
        self.slurm.add_node(name, busy_since=busy_since)
        return name


@pytest.fixture()
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.fake.close()


def test_pending_jobs_scale_the_group_out_once(world: World) -> None:
    world.slurm.pending = ["7|gpu|2|Resources"]
    scaler = world.scaler()
    scaler.cycle()
    adds = world.fake.calls("BatchAddClusterNodes")
    assert [a["NodesToAdd"] for a in adds] == [[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 2}]]
    assert world.fake.groups["gpu"] == [0, 2]
    world.now += 60
    scaler.cycle()  # target reflects the add; the nodes are on the way
    assert len(world.fake.calls("BatchAddClusterNodes")) == 1
    assert load(Path(world.config.state_path)).in_flight == []
    assert load(Path(world.config.state_path)).totals["requested"] == 2


def test_a_comment_slurm_reports_failed_never_stops_scaling(world: World) -> None:
    # A group at 0: Slurm sets the AdminComment of a job in an empty partition but exits 1 (the drills found it).
    world.slurm.job_update_exit = 1
    world.slurm.pending = ["7|gpu|2|PartitionConfig"]
    scaler = world.scaler()
    assert scaler.cycle().status != "error"
    assert world.fake.groups["gpu"] == [0, 2]
    assert load(Path(world.config.state_path)).failures == 0
    world.slurm.pending = ["7|gpu|2|PartitionConfig", "8|gpu|1|PartitionConfig"]
    world.now += 5
    scaler.cycle()
    assert world.fake.groups["gpu"] == [0, 3]  # the next job is not held back by a backoff


def test_a_restart_resends_an_unsent_add_with_the_same_token(world: World, tmp_path: Path) -> None:
    world.slurm.pending = ["7|gpu|2|Resources"]
    world.fake.script("BatchAddClusterNodes", 503, {"__type": "ServiceUnavailable", "message": "x"})
    for _ in range(4):  # the client's own retries all fail: the outcome is unknown
        world.fake.script("BatchAddClusterNodes", 503, {"__type": "ServiceUnavailable", "message": "x"})
    world.scaler().cycle()
    saved = load(Path(world.config.state_path))
    assert [(op.kind, op.count, op.sent) for op in saved.in_flight] == [("add", 2, False)]
    token = saved.in_flight[0].token
    world.now += 3600  # past the backoff; a new process (controller restarted)
    world.scaler().cycle()
    tokens = [a["ClientToken"] for a in world.fake.calls("BatchAddClusterNodes")]
    assert set(tokens) == {token}
    assert world.fake.groups["gpu"] == [0, 2]


def test_a_restart_after_the_count_was_raised_adds_nothing(world: World) -> None:
    world.slurm.pending = ["7|gpu|2|Resources"]
    world.scaler().cycle()
    path = Path(world.config.state_path)
    state = json.loads(path.read_text())
    assert [op["sent"] for op in state["in_flight"]] == [True]
    state["in_flight"][0]["sent"] = False  # as if the controller died between the call and the save
    path.write_text(json.dumps(state))
    world.fake.requests.clear()
    world.now += 60
    world.scaler().cycle()
    assert world.fake.calls("BatchAddClusterNodes") == []
    assert load(path).in_flight == []


def test_idle_nodes_are_drained_then_deleted_after_confirmation(world: World) -> None:
    name = world.node_joins(1, busy_since=START - 11 * 60)
    world.fake.groups["gpu"][1] = 1
    scaler = world.scaler()
    scaler.cycle()
    assert world.slurm.nodes[name]["reason"] == drain_reason(10)
    assert world.fake.calls("BatchDeleteClusterNodes") == []
    world.now += 60
    scaler.cycle()
    assert world.fake.calls("BatchDeleteClusterNodes") == [{"ClusterName": "demo", "NodeIds": ["i-00000000000000001"]}]
    assert world.fake.groups["gpu"] == [0, 0]
    assert load(Path(world.config.state_path)).totals["deleted"] == 1


def test_a_job_landing_on_a_drained_node_is_never_deleted(world: World) -> None:
    name = world.node_joins(1, busy_since=START - 11 * 60)
    world.fake.groups["gpu"][1] = 1
    scaler = world.scaler()
    scaler.cycle()
    world.slurm.nodes[name].update(state="ALLOCATED", cpus=8)  # a job got there before the drain
    world.now += 60
    scaler.cycle()
    assert world.fake.calls("BatchDeleteClusterNodes") == []
    assert world.slurm.nodes[name]["drain"] is False


def test_never_below_min(tmp_path: Path) -> None:
    world = World(tmp_path, low=1)
    try:
        first = world.node_joins(1, busy_since=START - 3600)
        second = world.node_joins(2, busy_since=START - 3600)
        world.fake.groups["gpu"][1] = 2
        scaler = world.scaler()
        for _ in range(3):
            scaler.cycle()
            world.now += 60
        drained = [n for n in (first, second) if world.slurm.nodes[n]["drain"]]
        assert len(world.fake.calls("BatchDeleteClusterNodes")) == 1
        assert len(drained) == 1
    finally:
        world.fake.close()


def test_a_failed_delete_gives_the_node_back(world: World) -> None:
    name = world.node_joins(1, busy_since=START - 3600)
    world.fake.groups["gpu"][1] = 1
    scaler = world.scaler()
    scaler.cycle()
    failed = {"NodeId": "i-00000000000000001", "Code": "InvalidNodeStatus", "Message": "busy"}
    world.fake.script("BatchDeleteClusterNodes", 200, {"Successful": [], "Failed": [failed]})
    world.now += 60
    scaler.cycle()
    assert world.slurm.nodes[name]["drain"] is False


def test_a_quota_failure_is_shown_on_the_job_and_retried_after_backoff(world: World) -> None:
    world.slurm.pending = ["7|gpu|2|Resources", "8|gpu|1|Dependency"]
    world.fake.script("BatchAddClusterNodes", 400, {"__type": "ResourceLimitExceeded", "message": "quota p5"})
    scaler = world.scaler()
    beat = scaler.cycle()
    assert beat.status == "error" and beat.error == "quota"
    comments = [u for u in world.slurm.updates if u[0] == "JobId=7"]
    assert comments and "quota" in comments[-1][1] and comments[-1][1].startswith("AdminComment=hyperpod-cdk:scaler:")
    assert not any(u[0] == "JobId=8" for u in world.slurm.updates)
    world.now += backoff_s(1, 1.0) - 1
    scaler.cycle()
    assert len(world.fake.calls("BatchAddClusterNodes")) == 1
    world.now += 2
    scaler.cycle()
    assert len(world.fake.calls("BatchAddClusterNodes")) == 2
    assert world.fake.groups["gpu"] == [0, 2]


def test_the_heartbeat_is_tagged_and_parses(world: World) -> None:
    world.slurm.pending = ["7|gpu|3|Resources"]
    world.scaler().cycle()
    beat = parse_heartbeat(world.fake.tags[TAG_KEY])
    assert beat.status == "waiting" and beat.pending == 3
    assert [(g.name, g.target, g.min, g.max) for g in beat.groups] == [("gpu", 3, 0, 4)]
    assert Path(world.config.heartbeat_path).read_text().strip() == world.fake.tags[TAG_KEY]
    metrics = (Path(world.config.metrics_dir) / "scaler.prom").read_text()
    assert "hyperpod_scaler_nodes_requested_total 3" in metrics


def test_a_slurm_failure_is_an_error_cycle_not_a_crash(world: World) -> None:
    class Broken(FakeSlurm):
        def run(self, argv: Sequence[str], *, timeout: float = 0, check: bool = True) -> Result:
            from training_runtime.run import CommandError

            raise CommandError(list(argv), 1, "slurmctld down")

    world.slurm = Broken()
    beat = world.scaler().cycle()
    assert beat.status == "error" and beat.error == "slurm"


def test_a_node_that_took_a_job_since_the_cycle_read_slurm_is_not_deleted(world: World) -> None:
    class Racing(FakeSlurm):
        """The cycle's first read shows the node DRAINED; the check just before the delete sees the job."""

        def run(self, argv: Sequence[str], *, timeout: float = 0, check: bool = True) -> Result:
            if list(argv[:4]) == ["scontrol", "-o", "show", "node"]:
                line = f"NodeName={argv[4]} CPUAlloc=8 State=MIXED+DRAIN Reason={drain_reason(10)}"
                return Result(list(argv), 0, line, "")
            return super().run(argv, timeout=timeout, check=check)

    world.slurm = Racing()
    name = world.node_joins(1, busy_since=START - 3600)
    world.slurm.nodes[name].update(drain=True, reason=drain_reason(10))
    world.fake.groups["gpu"][1] = 1
    world.scaler().cycle()
    assert world.fake.calls("BatchDeleteClusterNodes") == []


def test_an_add_refused_by_hyperpod_is_decided_again_with_a_new_token(world: World) -> None:
    world.slurm.pending = ["7|gpu|2|Resources"]
    world.fake.script("BatchAddClusterNodes", 400, {"__type": "ValidationException", "message": "group Updating"})
    scaler = world.scaler()
    scaler.cycle()
    world.now += 3600
    scaler.cycle()
    first, second = [a["ClientToken"] for a in world.fake.calls("BatchAddClusterNodes")]
    assert first != second
    assert world.fake.groups["gpu"] == [0, 2]


def test_an_add_never_reflected_is_dropped_after_the_tokens_life(world: World) -> None:
    world.slurm.pending = ["7|gpu|2|Resources"]
    world.fake.script("BatchAddClusterNodes", 200, {"Successful": [], "Failed": []})  # accepted, count not raised
    scaler = world.scaler()
    scaler.cycle()
    world.now += 3600
    scaler.cycle()
    assert len(world.fake.calls("BatchAddClusterNodes")) == 1  # still in flight: counted, not re-added
    world.now += 8 * 3600
    scaler.cycle()
    assert len(world.fake.calls("BatchAddClusterNodes")) == 2


def test_one_bad_cycle_does_not_stop_the_loop(world: World) -> None:
    scaler = world.scaler()
    calls: list[int] = []

    def cycle() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("surprise")

    scaler.cycle = cycle  # type: ignore[method-assign,assignment]
    scaler.run(sleep=lambda s: None, cycles=3)
    assert len(calls) == 3
