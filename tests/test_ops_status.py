"""`status` and `wait` against a moto server; the unknown-cluster, EKS, credential and access failures."""

from __future__ import annotations

import pytest

from clock import ago
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401

pytestmark = pytest.mark.usefixtures("aws_env")


def gpu_cluster() -> MotoCluster:
    return MotoCluster(
        "gpu",
        {
            "controller": ("ml.m5.xlarge", 1, "Controller"),
            "login": ("ml.m5.xlarge", 1, "Login"),
            "p5": ("ml.p5.48xlarge", 2, "Compute"),
        },
    ).create()


def test_status_lists_groups_and_nodes_with_hostnames() -> None:
    cluster = gpu_cluster()
    result = Operator()("status", "gpu", "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["status"] == "InService"
    assert report["log_group"] == f"/aws/sagemaker/Clusters/gpu/{cluster.id}"
    assert [(g["name"], g["current_count"], g["target_count"], g["slurm_node_type"]) for g in report["groups"]] == [
        ("controller", 1, 1, "Controller"),
        ("login", 1, 1, "Login"),
        ("p5", 2, 2, "Compute"),
    ]
    nodes = {n["instance_id"]: n for n in report["nodes"]}
    assert set(nodes) == {f"i-{n:017x}" for n in range(1, 5)}
    assert nodes[cluster.ids["p5"][1]]["hostname"] == "ip-10-1-0-4"
    assert nodes[cluster.ids["p5"][1]]["group"] == "p5"
    assert nodes[cluster.ids["p5"][1]]["instance_type"] == "ml.p5.48xlarge"

    human = Operator()("status", "gpu")
    assert human.code == 0
    for text in ("InService", "controller", "1/1", "ip-10-1-0-4", cluster.ids["p5"][1], "ml.p5.48xlarge"):
        assert text in human.out


def test_status_group_filter() -> None:
    cluster = gpu_cluster()
    report = Operator()("status", "gpu", "--group", "p5", "--json").json()
    assert [n["instance_id"] for n in report["nodes"]] == cluster.ids["p5"]


def test_status_exit_status_tells_the_outcome() -> None:
    cluster = gpu_cluster()
    cluster.group("p5")["Status"] = "Degraded"
    degraded = Operator()("status", "gpu")
    assert degraded.code == 1
    assert "Degraded" in degraded.out
    cluster.group("p5")["Status"] = "InService"
    cluster.set(status="Updating")
    assert Operator()("status", "gpu").code == 6
    cluster.set(status="Failed", failure="Lifecycle scripts failed on 1 node")
    failed = Operator()("status", "gpu")
    assert failed.code == 1
    assert "Lifecycle scripts failed on 1 node" in failed.out


def test_unknown_cluster_is_one_line_and_exit_3() -> None:
    result = Operator()("status", "nope")
    assert result.code == 3
    assert result.err.count("\n") == 1
    assert "no HyperPod cluster named 'nope' in us-west-2" in result.err


def test_eks_cluster_is_refused() -> None:
    cluster = gpu_cluster()
    cluster.model.extra = {"Orchestrator": {"Eks": {"ClusterArn": "arn:aws:eks:us-west-2:1:cluster/x"}}}
    result = Operator()("status", "gpu")
    assert result.code == 5
    assert result.err.startswith("error: cluster gpu is orchestrated by Amazon EKS, not Slurm")


def test_missing_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = Operator()("status", "gpu")
    assert result.code == 4
    assert result.err.startswith("error: no AWS credentials")
    assert result.err.count("\n") == 1


def test_missing_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION")
    result = Operator()("status", "gpu")
    assert (result.code, result.err) == (2, "error: no AWS Region: pass --region or set AWS_REGION\n")


def test_access_denied() -> None:
    operator = Operator()
    operator.fakes.fail["DescribeCluster"] = ("AccessDeniedException", "not authorized to sagemaker:DescribeCluster")
    result = operator("status", "gpu")
    assert result.code == 4
    assert "access denied to DescribeCluster: not authorized to sagemaker:DescribeCluster" in result.err


def test_wait_shows_progress_until_in_service() -> None:
    cluster = gpu_cluster()
    cluster.set(status="Creating")
    for instance_id in cluster.ids["p5"]:
        cluster.node(instance_id).status = "Pending"
    polls: list[float] = []
    operator = Operator()

    def sleep(seconds: float) -> None:  # the cluster comes up while the command sleeps between polls
        polls.append(seconds)
        operator.clock[0] += seconds
        if len(polls) == 1:
            cluster.node(cluster.ids["p5"][0]).status = "Running"
        else:
            cluster.node(cluster.ids["p5"][1]).status = "Running"
            cluster.set(status="InService")

    operator.sleep = sleep
    result = operator("wait", "gpu", "--interval", "7")
    assert result.code == 0, result.err
    assert polls == [7, 7]
    assert "p5 ready" in result.err  # the progress display
    assert "InService after 14 s" in result.out


def test_wait_reports_a_failed_cluster_with_failing_nodes_and_their_log_streams() -> None:
    cluster = gpu_cluster()
    cluster.set(status="Failed", failure="Instance group p5: lifecycle script exited 1")
    bad = cluster.ids["p5"][1]
    cluster.node(bad).status = "Failure"
    result = Operator()("wait", "gpu", "--json")
    assert result.code == 1
    report = result.json()
    assert report["failure_message"] == "Instance group p5: lifecycle script exited 1"
    assert [(n["instance_id"], n["log_stream"]) for n in report["failing_nodes"]] == [
        (bad, f"LifecycleConfig/p5/{bad}")
    ]
    assert report["failing_nodes"][0]["log_group"] == f"/aws/sagemaker/Clusters/gpu/{cluster.id}"
    human = Operator()("wait", "gpu")
    assert human.code == 1
    assert "lifecycle script exited 1" in human.out
    assert f"LifecycleConfig/p5/{bad}" in human.out
    assert f"hyperpod-cdk logs gpu --node {bad}" in human.out


def test_wait_times_out_with_exit_6() -> None:
    cluster = gpu_cluster()
    cluster.set(status="Creating")
    operator = Operator()

    def sleep(seconds: float) -> None:
        operator.clock[0] += seconds

    operator.sleep = sleep
    result = operator("wait", "gpu", "--timeout", "60", "--interval", "15")
    assert result.code == 6
    assert "timed out after 60 s: cluster gpu is still Creating" in result.err


def test_unknown_profile() -> None:
    result = Operator()("status", "gpu", "--profile", "nobody")
    assert result.code == 4
    assert "The config profile (nobody) could not be found" in result.err


@pytest.mark.calendar
def test_status_shows_the_scaler_heartbeat_tag() -> None:
    from training_runtime.scaler.heartbeat import TAG_KEY, GroupLine, Heartbeat, format_heartbeat

    value = format_heartbeat(Heartbeat("waiting", ago(30), (GroupLine("p5", 4, 0, 8),), 3))
    MotoCluster("gpu", {"controller": ("ml.m5.xlarge", 1, "Controller")}, tags={TAG_KEY: value}).create()
    report = Operator()("status", "gpu", "--json").json()
    assert report["scaler"]["status"] == "waiting" and report["scaler"]["pending_nodes"] == 3
    assert report["scaler"]["groups"] == [{"name": "p5", "target": 4, "min": 0, "max": 8}]
    assert report["scaler"]["stale"] is False
    human = Operator()("status", "gpu").out
    assert "Scaler:" in human and "p5 4 (0..8)" in human and "3 node(s) pending" in human


def test_status_without_a_scaler_shows_no_scaler_line() -> None:
    gpu_cluster()
    assert Operator()("status", "gpu", "--json").json()["scaler"] is None
    assert "Scaler:" not in Operator()("status", "gpu").out


@pytest.mark.calendar
def test_a_stale_scaler_heartbeat_is_flagged() -> None:
    from hyperpod_cdk.ops.status import SCALER_STALE_S
    from training_runtime.scaler.heartbeat import TAG_KEY, Heartbeat, format_heartbeat

    value = format_heartbeat(Heartbeat("ok", ago(SCALER_STALE_S + 60), (), 0))
    MotoCluster("gpu", {"controller": ("ml.m5.xlarge", 1, "Controller")}, tags={TAG_KEY: value}).create()
    assert Operator()("status", "gpu", "--json").json()["scaler"]["stale"] is True
    assert "STALE" in Operator()("status", "gpu").out
