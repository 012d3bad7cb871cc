"""`logs` against moto's CloudWatch Logs: lifecycle and health-agent streams, --node, --json, --follow."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clock import ago_ms
from hyperpod_cdk.aws.session import make_session
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401

pytestmark = [pytest.mark.usefixtures("aws_env"), pytest.mark.calendar]
T0 = ago_ms(600)  # ten minutes before the run's clock: inside CloudWatch's 14 days whatever the date


def setup_logs(made: MotoCluster) -> Any:
    logs = make_session(None, None).client("logs")
    group = f"/aws/sagemaker/Clusters/{made.name}/{made.id}"
    logs.create_log_group(logGroupName=group)
    for name, ids in made.ids.items():
        for instance_id in ids:
            for prefix, text in (("LifecycleConfig", "lifecycle"), ("SagemakerHealthMonitoringAgent", "health")):
                stream = f"{prefix}/{name}/{instance_id}"
                logs.create_log_stream(logGroupName=group, logStreamName=stream)
                logs.put_log_events(
                    logGroupName=group,
                    logStreamName=stream,
                    logEvents=[{"timestamp": T0, "message": f"{text} {instance_id} step 1"}],
                )
    return logs


def cluster() -> MotoCluster:
    return MotoCluster("logs", {"ctl": ("ml.m5.xlarge", 1, "Controller"), "gpu": ("ml.g5.8xlarge", 2, None)}).create()


def test_lifecycle_logs_of_every_node_by_default() -> None:
    made = cluster()
    setup_logs(made)
    result = Operator()("logs", "logs")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) == 3
    assert all(" lifecycle " in line for line in lines)
    gpu = made.ids["gpu"][0]
    assert f"gpu/{gpu} lifecycle {gpu} step 1" in result.out


def test_node_by_hostname_and_the_health_agent_stream() -> None:
    made = cluster()
    setup_logs(made)
    gpu = made.ids["gpu"][1]  # the third node: ip-10-1-0-3
    result = Operator()("logs", "logs", "--node", "ip-10-1-0-3", "--source", "health", "--json")
    assert result.code == 0, result.err
    events = [json.loads(line) for line in result.out.splitlines()]
    assert [(e["source"], e["group"], e["instance_id"], e["message"]) for e in events] == [
        ("health", "gpu", gpu, f"health {gpu} step 1")
    ]
    both = Operator()("logs", "logs", "--node", gpu, "--source", "all", "--json")
    assert sorted(json.loads(line)["source"] for line in both.out.splitlines()) == ["health", "lifecycle"]


def test_group_filter() -> None:
    made = cluster()
    setup_logs(made)
    result = Operator()("logs", "logs", "--group", "ctl", "--source", "all")
    assert result.code == 0
    assert len(result.out.splitlines()) == 2
    assert made.ids["ctl"][0] in result.out
    assert made.ids["gpu"][0] not in result.out


def test_follow_prints_new_events_once_until_ctrl_c() -> None:
    made = cluster()
    logs = setup_logs(made)
    ctl = made.ids["ctl"][0]
    group = f"/aws/sagemaker/Clusters/logs/{made.id}"
    operator = Operator()
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 1:
            logs.put_log_events(
                logGroupName=group,
                logStreamName=f"LifecycleConfig/ctl/{ctl}",
                logEvents=[{"timestamp": T0 + 1000, "message": "slurmctld started"}],
            )
        elif len(polls) == 3:
            raise KeyboardInterrupt

    operator.sleep = sleep
    result = operator("logs", "logs", "--node", ctl, "--follow", "--interval", "2")
    assert result.code == 0
    assert polls == [2, 2, 2]
    assert result.out.splitlines()[-1].endswith(f"ctl/{ctl} slurmctld started")
    assert result.out.count("slurmctld started") == 1
    assert result.out.count(f"lifecycle {ctl} step 1") == 1


def test_since_drops_older_events() -> None:
    made = cluster()
    setup_logs(made)
    # T0 is ten minutes before the commands' clock, which is the run's: --since 5m starts after it, 1h before it
    assert len(Operator()("logs", "logs", "--since", "1h").out.splitlines()) == 3
    result = Operator()("logs", "logs", "--since", "5m")
    assert (result.code, result.out) == (0, "")
    assert "no log events" in result.err
    assert Operator()("logs", "logs", "--since", "soon").code == 2


def test_missing_log_group_is_exit_3() -> None:
    cluster()
    result = Operator()("logs", "logs")
    assert result.code == 3
    assert "does not exist (yet)" in result.err
