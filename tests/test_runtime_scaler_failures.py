"""The scaler when calls fail (training_runtime.scaler.service, .deletes): a delete whose outcome is unknown, a delete
HyperPod refused, no credentials from the metadata service, the heartbeat tag while errors last, and what a waiting
job's comment says. The same world as tests/test_runtime_scaler_service.py: the SageMaker fake, a Slurm model, an
injected clock (times are relative to its start)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler_fakes import FakeImds
from test_runtime_scaler_service import START, World
from training_runtime.scaler.credentials import RoleCredentials
from training_runtime.scaler.heartbeat import TAG_KEY
from training_runtime.scaler.sagemaker import SageMaker
from training_runtime.scaler.service import Scaler, backoff_s
from training_runtime.scaler.sigv4 import Credentials
from training_runtime.scaler.slurm_view import Slurm
from training_runtime.scaler.state import load

UNAVAILABLE = (503, {"__type": "ServiceUnavailable", "message": "try later"})
ATTEMPTS = 5
"""The client's tries per call (SageMaker(attempts=5)): a call without an answer fails that many times."""


@pytest.fixture()
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.fake.close()


def drained_idle_node(world: World) -> tuple[Scaler, str]:
    """A node idle for an hour, drained by the scaler in a first cycle: the next cycle deletes it."""
    name = world.node_joins(1, busy_since=START - 3600)
    world.fake.groups["gpu"][1] = 1
    scaler = world.scaler()
    scaler.cycle()
    assert world.slurm.nodes[name]["drain"]
    world.now += 60
    return scaler, name


def no_answer(world: World, operation: str = "BatchDeleteClusterNodes") -> None:
    for _ in range(ATTEMPTS):
        world.fake.script(operation, *UNAVAILABLE)


def resumed(world: World, name: str) -> bool:
    return ["NodeName=" + name, "State=RESUME"] in world.slurm.updates


def deletes(world: World) -> list[list[str]]:
    return [call["NodeIds"] for call in world.fake.calls("BatchDeleteClusterNodes")]


def test_a_delete_without_an_answer_keeps_its_node_drained_until_the_listing_shows_it_gone(world: World) -> None:
    scaler, name = drained_idle_node(world)
    no_answer(world)
    beat = scaler.cycle()
    assert beat.status == "error" and beat.error == "server"
    assert not resumed(world, name) and world.slurm.nodes[name]["drain"]  # HyperPod may be deleting it
    (op,) = load(Path(world.config.state_path)).in_flight
    assert (op.kind, op.nodes, op.sent) == ("delete", [name], False)
    world.fake.nodes[0]["InstanceStatus"]["Status"] = "ShuttingDown"  # the call had reached HyperPod
    for _ in range(3):
        world.now += 600
        scaler.cycle()
    assert len(deletes(world)) == ATTEMPTS and not resumed(world, name)  # under way: not sent again
    world.fake.nodes.clear()
    world.now += 60
    scaler.cycle()
    assert load(Path(world.config.state_path)).in_flight == [] and not resumed(world, name)


def test_a_delete_without_an_answer_is_sent_again_after_the_backoff_when_its_node_is_listed_running(
    world: World,
) -> None:
    scaler, name = drained_idle_node(world)
    no_answer(world)
    scaler.cycle()
    world.now += backoff_s(1, 1.0) - 1
    scaler.cycle()
    assert len(deletes(world)) == ATTEMPTS  # within the backoff: nothing sent
    world.now += 2
    scaler.cycle()
    assert deletes(world)[ATTEMPTS:] == [["i-00000000000000001"]]
    assert not resumed(world, name) and world.fake.nodes == []
    world.now += 60
    scaler.cycle()
    assert load(Path(world.config.state_path)).in_flight == []


def test_a_resent_delete_refused_as_in_use_keeps_its_node_drained_and_waits_for_the_backoff(world: World) -> None:
    scaler, name = drained_idle_node(world)
    no_answer(world)
    scaler.cycle()
    in_use = {"NodeId": "i-00000000000000001", "Code": "NodeIdInUse", "Message": "in use by another process"}
    world.fake.script("BatchDeleteClusterNodes", 200, {"Successful": [], "Failed": [in_use]})
    world.now += 3600
    scaler.cycle()
    assert len(deletes(world)) == ATTEMPTS + 1 and not resumed(world, name)
    assert [op.sent for op in load(Path(world.config.state_path)).in_flight] == [False]
    world.now += backoff_s(2, 1.0) - 1
    scaler.cycle()
    assert len(deletes(world)) == ATTEMPTS + 1  # the refusal counts: the next try waits
    world.now += 2
    scaler.cycle()
    assert len(deletes(world)) == ATTEMPTS + 2 and world.fake.nodes == [] and not resumed(world, name)


def test_a_delete_without_an_answer_is_not_sent_again_for_a_node_someone_put_back_in_service(world: World) -> None:
    scaler, name = drained_idle_node(world)
    no_answer(world)
    scaler.cycle()
    world.slurm.nodes[name].update(drain=False, reason=None, state="ALLOCATED", cpus=8)  # an admin resumed it
    world.now += 3600
    scaler.cycle()
    assert len(deletes(world)) == ATTEMPTS  # a job runs there: never deleted on a guess


def test_a_refused_delete_gives_its_node_back_and_the_next_delete_waits_for_the_backoff(world: World) -> None:
    scaler, name = drained_idle_node(world)
    refused = {"NodeId": "i-00000000000000001", "Code": "InvalidNodeStatus", "Message": "node is Pending"}
    world.fake.script("BatchDeleteClusterNodes", 200, {"Successful": [], "Failed": [refused]})
    world.now = START + 5
    scaler.cycle()
    assert resumed(world, name) and not world.slurm.nodes[name]["drain"]
    retry_at = load(Path(world.config.state_path)).next_try
    assert retry_at == START + 5 + backoff_s(1, 1.0)
    while world.now + 5 < retry_at:  # drained again (still idle), ready to delete: no call before the backoff
        world.now += 5
        scaler.cycle()
    assert world.slurm.nodes[name]["drain"] and len(deletes(world)) == 1
    world.now = retry_at
    scaler.cycle()
    assert len(deletes(world)) == 2 and world.fake.nodes == []


def test_no_credentials_from_the_metadata_service_is_an_error_with_backoff_then_clears(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.slurm.pending = ["7|gpu|2|Resources"]
    imds = FakeImds("2100-01-01T00:00:00Z")
    working = RoleCredentials(imds.url, clock=lambda: world.now)
    source = {"credentials": RoleCredentials("http://127.0.0.1:9", clock=lambda: world.now)}  # nothing listens

    def credentials() -> Credentials:
        return source["credentials"]()

    client = SageMaker(world.fake.url, "us-west-2", credentials, clock=lambda: world.now, sleep=lambda s: None)
    scaler = Scaler(world.config, client, Slurm(world.slurm), clock=lambda: world.now, jitter=lambda: 1.0,
                    resources=lambda: None)  # fmt: skip
    beat = scaler.cycle()
    assert beat.status == "error" and beat.error == "credentials"
    state = load(Path(world.config.state_path))
    assert state.last_error is not None and state.last_error["kind"] == "credentials"
    assert state.failures == 1 and state.next_try == START + backoff_s(1, 1.0)
    assert Path(world.config.heartbeat_path).read_text().startswith("error ")
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [e["kind"] for e in events if e["event"] == "scaler_error"] == ["credentials"]  # not a "bug"
    assert world.fake.requests == []  # nothing was sent unsigned
    source["credentials"] = working
    world.now += backoff_s(1, 1.0)
    beat = scaler.cycle()
    assert beat.status == "waiting" and beat.error is None and world.fake.groups["gpu"] == [0, 2]
    assert load(Path(world.config.state_path)).last_error is None


def test_an_error_clears_once_a_cycle_after_the_backoff_runs_clean(world: World) -> None:
    world.fake.script("DescribeCluster", 400, {"__type": "ValidationException", "message": "bad"})
    scaler = world.scaler()
    assert scaler.cycle().status == "error"
    world.now += backoff_s(1, 1.0) - 1
    assert scaler.cycle().status == "error"  # clean, but within the backoff
    world.now += 1
    assert scaler.cycle().status == "ok"
    assert load(Path(world.config.state_path)).failures == 0


def test_the_heartbeat_tag_is_written_at_most_every_tag_interval_even_while_errors_last(world: World) -> None:
    for _ in range(12):
        world.fake.script("DescribeCluster", 400, {"__type": "ValidationException", "message": "bad"})
    scaler = world.scaler()
    for _ in range(11):  # every 60 s for 10 minutes: tagged at 0, 300 and 600 s
        assert scaler.cycle().status == "error"
        world.now += 60
    assert len(world.fake.calls("AddTags")) == 3
    assert world.fake.tags[TAG_KEY].startswith("error ")


def test_a_waiting_jobs_comment_shows_the_kind_of_failure_not_awss_error_text(world: World) -> None:
    world.slurm.pending = ["7|gpu|2|Resources"]
    denied = "User: arn:aws:sts::123456789012:assumed-role/ClusterRole/i-0abc is not authorized to perform: x"
    world.fake.script("BatchAddClusterNodes", 400, {"__type": "AccessDeniedException", "message": denied})
    world.scaler().cycle()
    (comment,) = [u[1] for u in world.slurm.updates if u[0] == "JobId=7"]
    assert comment.startswith("AdminComment=hyperpod-cdk:scaler:") and "(auth)" in comment and "scaler's log" in comment
    assert "arn:" not in comment and "123456789012" not in comment
    state = load(Path(world.config.state_path))
    assert state.last_error is not None and "123456789012" in state.last_error["message"]  # kept for the admin
