"""`reboot` / `replace`: batches of 25, per-node results, confirmation, --dry-run; throttling is retried.

BatchReboot/BatchReplaceClusterNodes are not in moto 5.2.5: ``HyperPodFakes`` (tests/ops_support.py) answers
them on moto's cluster state. The nodes come from moto's ListClusterNodes over HTTP.
"""

from __future__ import annotations

from typing import Any

import botocore.endpoint
import botocore.retries.bucket
import pytest
from botocore.awsrequest import AWSResponse

from hyperpod_cdk.aws.clients import RETRIES, Aws
from hyperpod_cdk.aws.session import make_session
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401

pytestmark = pytest.mark.usefixtures("aws_env")


def big_cluster() -> MotoCluster:
    return MotoCluster(
        "big", {"ctl": ("ml.m5.xlarge", 1, "Controller"), "c5": ("ml.c5.xlarge", 30, "Compute")}
    ).create()


def test_thirty_nodes_go_in_two_calls_of_at_most_25() -> None:
    made = big_cluster()
    operator = Operator()
    result = operator("reboot", "big", *made.ids["c5"], "--yes", "--json")
    assert result.code == 0, result.err
    calls = operator.fakes.calls
    assert [name for name, _ in calls] == ["BatchRebootClusterNodes", "BatchRebootClusterNodes"]
    assert [len(params["NodeIds"]) for _, params in calls] == [25, 5]
    assert calls[0][1]["NodeIds"] + calls[1][1]["NodeIds"] == made.ids["c5"]
    report = result.json()
    assert [r["result"] for r in report["results"]] == ["Successful"] * 30


def test_partial_failure_reports_every_node_and_exits_1() -> None:
    made = big_cluster()
    busy = made.ids["c5"][1]
    operator = Operator()
    operator.fakes.busy.add(busy)
    # nodes named by Slurm hostname: the controller is ip-10-1-0-1, c5 nodes follow
    result = operator("replace", "big", "ip-10-1-0-2", "ip-10-1-0-3", made.ids["c5"][2], "--yes")
    assert result.code == 1
    assert operator.fakes.calls == [("BatchReplaceClusterNodes", {"ClusterName": "big", "NodeIds": made.ids["c5"][:3]})]
    assert "2 of 3 node(s) accepted; 1 failed" in result.out
    assert "InvalidInstanceStatus" in result.out
    row = next(line for line in result.out.splitlines() if busy in line)
    assert "ip-10-1-0-3" in row and "Failed" in row


def test_a_whole_batch_rejected_marks_its_nodes_failed() -> None:
    made = big_cluster()
    operator = Operator()
    operator.fakes.fail["BatchRebootClusterNodes"] = ("ValidationException", "Cluster must be InService")
    report = operator("reboot", "big", made.ids["c5"][0], "--yes", "--json")
    assert report.code == 1
    assert report.json()["results"][0]["error_code"] == "ValidationException"


def test_confirmation_declined_changes_nothing() -> None:
    made = big_cluster()
    operator = Operator()
    operator.answers = [False]
    result = operator("replace", "big", made.ids["c5"][0])
    assert result.code == 7
    assert operator.fakes.calls == []
    assert "every volume of these nodes" in result.err
    assert operator.questions == [f"replace 1 node(s) of cluster big: {made.ids['c5'][0]} (ip-10-1-0-2)?"]
    operator.answers = [True]
    assert operator("replace", "big", made.ids["c5"][0]).code == 0
    assert len(operator.fakes.calls) == 1


def test_dry_run_calls_nothing() -> None:
    made = big_cluster()
    operator = Operator()
    result = operator("reboot", "big", *made.ids["c5"], "--dry-run", "--json")
    assert result.code == 0
    assert [len(call["NodeIds"]) for call in result.json()["calls"]] == [25, 5]
    assert operator.fakes.calls == []
    assert operator.questions == []


def test_unknown_nodes_are_all_named_and_nothing_is_called() -> None:
    big_cluster()
    operator = Operator()
    result = operator("reboot", "big", "i-0000000000000ffff", "ip-10-1-0-2", "ip-9-9-9-9", "--yes")
    assert result.code == 3
    assert "has no node i-0000000000000ffff, ip-9-9-9-9" in result.err
    assert operator.fakes.calls == []


def test_clients_use_adaptive_retries() -> None:
    client = Aws(make_session(None, None)).sagemaker
    assert client.meta.config.retries == {"mode": "adaptive", "total_max_attempts": 8}
    assert RETRIES["mode"] == "adaptive"


class _Clock:
    """botocore.endpoint's ``time``, recording the retry back-off instead of sleeping it."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def __getattr__(self, name: str) -> Any:
        import time

        return getattr(time, name)


class _BucketClock:
    """The clock of botocore's adaptive rate limiter (``botocore.retries.bucket.Clock``): a minute passes at each
    reading, so its token bucket has refilled whenever it looks, instead of the test waiting the seconds it would
    (the limiter's own logic runs unchanged)."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def current_time(self) -> float:
        self.now += 60.0
        return self.now


@pytest.fixture(autouse=True)
def _limiter_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(botocore.retries.bucket, "Clock", _BucketClock)


def test_throttling_is_retried_until_the_call_goes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """ListClusterNodes is throttled 4 times (more than botocore's standard mode allows), then reaches moto."""
    made = big_cluster()
    clock = _Clock()
    monkeypatch.setattr(botocore.endpoint, "time", clock)
    sent: list[str] = []

    def throttle(request: Any, **_: Any) -> AWSResponse | None:
        sent.append(request.url)
        if len(sent) <= 4:
            body = b'{"__type": "ThrottlingException", "message": "Rate exceeded"}'
            return AWSResponse(request.url, 400, {"x-amzn-errortype": "ThrottlingException"}, _Raw(body))
        return None  # through to moto

    operator = Operator()
    operator.before_session = lambda session: session.events.register(
        "before-send.sagemaker.ListClusterNodes", throttle
    )
    result = operator("status", "big", "--json")
    assert result.code == 0, result.err
    assert len(sent) == 5
    assert len(clock.slept) == 4
    assert len(result.json()["nodes"]) == len(made.model.nodes)


def test_throttling_that_never_ends_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    big_cluster()
    monkeypatch.setattr(botocore.endpoint, "time", _Clock())
    # 3 attempts instead of 8: adaptive mode's client-side rate limiter really waits between throttled calls
    monkeypatch.setattr("hyperpod_cdk.aws.clients.RETRIES", {"mode": "adaptive", "total_max_attempts": 3})

    def throttle(request: Any, **_: Any) -> AWSResponse:
        body = b'{"__type": "ThrottlingException", "message": "Rate exceeded"}'
        return AWSResponse(request.url, 400, {"x-amzn-errortype": "ThrottlingException"}, _Raw(body))

    operator = Operator()
    operator.before_session = lambda session: session.events.register(
        "before-send.sagemaker.ListClusterNodes", throttle
    )
    result = operator("status", "big")
    assert result.code == 1
    assert result.err == "error: ListClusterNodes was still throttled after 3 attempts: try again later\n"


class _Raw:
    """The raw body botocore reads from an AWSResponse."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


# --- the documented limits, per API -------------------------------------------------------------------------------
def test_sixty_reboots_go_in_calls_of_25_25_and_10_and_every_node_is_reported_once() -> None:
    made = MotoCluster("sixty", {"ctl": ("ml.m5.xlarge", 1, "Controller"), "c5": ("ml.c5.xlarge", 60, "Compute")})
    made.create()
    operator = Operator()
    operator.fakes.busy.add(made.ids["c5"][30])  # in the second call
    result = operator("reboot", "sixty", *made.ids["c5"], "--yes", "--json")
    assert result.code == 1
    calls = operator.fakes.batch_calls("BatchRebootClusterNodes")
    assert [len(c["NodeIds"]) for c in calls] == [25, 25, 10]
    assert [i for c in calls for i in c["NodeIds"]] == made.ids["c5"]
    results = result.json()["results"]
    assert [r["instance_id"] for r in results] == made.ids["c5"]
    assert [r["instance_id"] for r in results if r["result"] == "Failed"] == [made.ids["c5"][30]]
    assert results[30]["error_code"] == "InvalidInstanceStatus"


def test_120_deletes_go_in_calls_of_50_50_and_20_with_per_node_results() -> None:
    made = MotoCluster("wide", {"ctl": ("ml.m5.xlarge", 1, "Controller"), "c5": ("ml.c5.xlarge", 121, "Compute")})
    made.create()
    doomed = made.ids["c5"][:120]
    operator = Operator()
    operator.fakes.busy.add(doomed[75])
    result = operator("delete", "wide", *doomed, "--yes")
    assert result.code == 1, result.err
    calls = operator.fakes.batch_calls("BatchDeleteClusterNodes")
    assert [len(c["NodeIds"]) for c in calls] == [50, 50, 20]
    assert [i for c in calls for i in c["NodeIds"]] == doomed
    assert "119 of 120 node(s) accepted; 1 failed" in result.out
    row = next(line for line in result.out.splitlines() if doomed[75] in line)
    assert "InvalidNodeStatus" in row  # BatchDeleteClusterNodes' own code, read from its ``Code`` field
    assert set(made.model.nodes) == {made.ids["ctl"][0], doomed[75], made.ids["c5"][120]}


def test_a_continuous_cluster_s_provisioning_node_goes_by_its_logical_id() -> None:
    made = big_cluster()
    made.set(NodeProvisioningMode="Continuous")
    pending = made.node(made.ids["c5"][0])
    pending.extra = {**pending.extra, "InstanceId": "", "NodeLogicalId": "c5-logical-0001"}
    operator = Operator()
    result = operator("reboot", "big", "c5-logical-0001", made.ids["c5"][1], "--yes", "--json")
    assert result.code == 0, result.err
    assert operator.fakes.batch_calls("BatchRebootClusterNodes") == [
        {"ClusterName": "big", "NodeIds": [made.ids["c5"][1]], "NodeLogicalIds": ["c5-logical-0001"]}
    ]
    assert [(r["logical_id"], r["result"]) for r in result.json()["results"]] == [
        ("c5-logical-0001", "Successful"),
        (None, "Successful"),
    ]


# --- controllers: refused where the API refuses them, before any call ----------------------------------------------
@pytest.mark.parametrize("verb", ["replace", "delete"])
def test_replace_and_delete_refuse_a_controller_node_before_any_call(verb: str) -> None:
    made = big_cluster()
    controller = made.ids["ctl"][0]
    operator = Operator()
    result = operator(verb, "big", made.ids["c5"][0], "ip-10-1-0-1", "--yes")  # ip-10-1-0-1 is the controller
    assert result.code == 5
    assert result.err.count("\n") == 1
    assert f"not sent: {controller} in group ctl is a Slurm controller node" in result.err
    assert "its SlurmConfig.NodeType is Controller" in result.err
    assert "API_Batch" in result.err
    assert operator.fakes.calls == []
    assert operator(verb, "big", controller, "--dry-run").code == 5  # a dry run is refused the same way
    assert operator.fakes.calls == []


def test_a_lifecycle_driven_cluster_s_controller_is_known_by_its_group_name() -> None:
    made = MotoCluster("legacy", {"controller-machine": ("ml.m5.xlarge", 1, None), "worker": ("ml.c5.xlarge", 2, None)})
    made.create()
    operator = Operator()
    result = operator("replace", "legacy", made.ids["controller-machine"][0], "--yes")
    assert result.code == 5
    assert "its name says controller" in result.err
    assert operator.fakes.calls == []
    assert operator("replace", "legacy", made.ids["worker"][0], "--yes").code == 0


def test_reboot_of_the_controller_is_allowed_and_the_question_says_so() -> None:
    made = big_cluster()
    operator = Operator()
    operator.answers = [True]
    result = operator("reboot", "big", made.ids["ctl"][0])
    assert result.code == 0, result.err
    assert "This includes the Slurm controller" in result.err
    assert operator.fakes.batch_calls("BatchRebootClusterNodes") == [
        {"ClusterName": "big", "NodeIds": [made.ids["ctl"][0]]}
    ]


def test_delete_refuses_a_stack_owned_cluster_and_names_the_count_change() -> None:
    made = MotoCluster(
        "owned",
        {"ctl": ("ml.m5.xlarge", 1, "Controller"), "c5": ("ml.c5.xlarge", 3, "Compute")},
        {"aws:cloudformation:stack-name": "hyperpod-owned"},
    ).create()
    operator = Operator()
    refused = operator("delete", "owned", made.ids["c5"][0], made.ids["c5"][1], "--yes")
    assert refused.code == 5
    assert "stack hyperpod-owned owns the counts" in refused.err
    assert "`count: 1` on the instance group named c5 (was 3)" in refused.err
    assert operator.fakes.batch_calls("BatchDeleteClusterNodes") == []
    drift = operator("delete", "owned", made.ids["c5"][0], "--yes", "--allow-drift")
    assert drift.code == 0, drift.err
    assert "keep it in step" in drift.err
    assert len(operator.fakes.batch_calls("BatchDeleteClusterNodes")) == 1
