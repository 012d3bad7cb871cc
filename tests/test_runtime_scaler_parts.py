"""The scaler's parsers and files: Slurm's output, the persisted state, the heartbeat value, the config file."""

from __future__ import annotations

import calendar
import json
import re
import time
from pathlib import Path

import pytest

from training_runtime.scaler.config import ConfigError, ScaledGroupConfig, ScalerConfig, endpoint_of
from training_runtime.scaler.heartbeat import MAX_VALUE, GroupLine, Heartbeat, format_heartbeat, parse_heartbeat
from training_runtime.scaler.policy import ADD, PendingJob, drain_reason
from training_runtime.scaler.slurm_view import parse_nodes, parse_pending, parse_state, to_policy_nodes
from training_runtime.scaler.state import Operation, State, StateError, load, save
from training_runtime.scaling import ScalingSpec

UTC = calendar.timegm


def test_scontrol_lines_parse_with_a_reason_that_has_spaces() -> None:
    text = (
        "NodeName=ip-10-0-0-1 Arch=x86_64 CPUAlloc=0 CPUTot=8 State=IDLE+DRAIN Partitions=gpu "
        "LastBusyTime=2026-11-26T01:00:00 Reason=hyperpod-cdk:scaler: idle 10m [root@2026-11-26T01:10:00]\n"
        "NodeName=ip-10-0-0-2 CPUAlloc=8 State=MIXED LastBusyTime=None OS=Linux 6.1.0 #1 SMP\n"
        "NodeName=ip-10-0-0-3 CPUAlloc=0 State=IDLE* LastBusyTime=2026-11-26T00:00:00\n"
    )
    first, second, third = parse_nodes(text, to_epoch=UTC)
    assert first.reason == drain_reason(10) and first.drain and first.state == "idle"
    assert first.last_busy == UTC(time.strptime("2026-11-26T01:00:00", "%Y-%m-%dT%H:%M:%S"))
    assert second.cpu_alloc == 8 and second.state == "mixed" and second.last_busy is None
    assert not third.responding and third.state == "idle"


def test_states_with_flags() -> None:
    assert parse_state("ALLOCATED+DRAIN") == ("allocated", True, True)
    assert parse_state("IDLE+DRAIN+NOT_RESPONDING") == ("idle", True, False)
    assert parse_state("IDLE~") == ("idle", False, True)


def test_only_listed_instances_reach_the_policy_and_busy_nodes_are_not_idle() -> None:
    records = parse_nodes(
        "NodeName=a CPUAlloc=4 State=MIXED LastBusyTime=2026-11-26T00:00:00\n"
        "NodeName=b CPUAlloc=0 State=IDLE LastBusyTime=2026-11-26T00:00:00\n"
        "NodeName=head CPUAlloc=0 State=IDLE LastBusyTime=2026-11-26T00:00:00\n",
        to_epoch=UTC,
    )
    nodes = to_policy_nodes(records, {"a": "gpu", "b": "gpu"})
    assert [(n.name, n.jobs, n.idle_since is None) for n in nodes] == [("a", 1, True), ("b", 0, False)]


def test_pending_jobs_parse() -> None:
    jobs = parse_pending("12|gpu|2|Resources\n13_4|gpu,cpu|1|Priority\n14|gpu|1|ReqNodeNotAvail, UnavailableNodes:x\n")
    assert jobs[0] == PendingJob("12", ("gpu",), 2, "Resources")
    assert jobs[1].partitions == ("gpu", "cpu")
    assert jobs[2].reason.startswith("ReqNodeNotAvail")


def test_state_round_trips_and_writes_atomically(tmp_path: Path) -> None:
    path = tmp_path / "scaler" / "state.json"
    state = State(in_flight=[Operation(ADD, "gpu", 2, "tok", base_target=1, sent=True)], idle_seen={"n": 5.0})
    state.totals["requested"] = 2
    save(path, state)
    again = load(path)
    assert again.to_json() == state.to_json()
    assert again.in_flight[0].in_flight().base_target == 1
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_corrupt_state_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{not json")
    with pytest.raises(StateError, match="in flight"):
        load(path)
    path.write_text(json.dumps({"version": 1, "in_flight": [{"kind": "grow", "group": "g", "count": 1, "token": "t"}]}))
    with pytest.raises(StateError, match="kind"):
        load(path)
    assert load(tmp_path / "absent.json").in_flight == []


def test_the_heartbeat_value_round_trips() -> None:
    # a round trip through the tag's text: no clock is read
    beat = Heartbeat("error", 1795000000.0, (GroupLine("gpu", 2, 0, 8), GroupLine("cpu", 0, 0, 4)), 3, "capacity")
    value = format_heartbeat(beat)
    assert value == "error 2026-11-18T11:06:40Z gpu=2/0..8 cpu=0/0..4 pending=3 error=capacity"
    assert parse_heartbeat(value) == beat


def test_the_heartbeat_value_fits_a_tag() -> None:
    groups = tuple(GroupLine(f"group-number-{i}", 10, 0, 50) for i in range(20))
    value = format_heartbeat(Heartbeat("ok", 0.0, groups, 7))
    assert len(value) <= MAX_VALUE
    assert re.fullmatch(r"[\w .:/=+\-@]*", value)
    assert parse_heartbeat(value).pending == 7


def test_a_foreign_tag_value_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_heartbeat("managed by someone")


def test_the_config_file_round_trips_and_names_problems() -> None:
    config = ScalerConfig(
        "demo", "arn:aws:sagemaker:us-west-2:1:cluster/x", "us-west-2", endpoint_of("us-west-2", None), "ip",
        (ScaledGroupConfig("gpu", "gpu", ScalingSpec(0, 4, 10)),), interval_s=5.0,
    )  # fmt: skip
    assert ScalerConfig.from_json(json.loads(config.dumps())) == config
    assert config.endpoint == "https://api.sagemaker.us-west-2.amazonaws.com/"
    assert endpoint_of("us-west-2", "http://10.89.0.1:8080/") == "http://10.89.0.1:8080/"
    broken = dict(config.to_json(), naming="dns", groups=[{"name": "gpu", "partition": "gpu", "min": 5, "max": 2}])
    with pytest.raises(ConfigError) as raised:
        ScalerConfig.from_json(broken)
    assert "naming" in str(raised.value) and "min 5 is above max 2" in str(raised.value)


def test_the_scaler_metrics_are_the_catalogs() -> None:
    from training_runtime.metrics import catalog
    from training_runtime.metrics.exposition import render
    from training_runtime.metrics.scaler import scaler_families

    families = scaler_families({"requested": 3}, {"add": 1}, {"gpu": (1, 3, 0, 8)}, {"gpu": 2}, "quota", 5.0)
    assert [f.name for f in families] == list(catalog.METRICS["scaler"])
    text = render(families)
    assert 'hyperpod_scaler_group_nodes{count="target",group="gpu"} 3' in text
    assert 'hyperpod_scaler_last_error{kind="quota"} 1' in text
    assert 'hyperpod_scaler_in_flight_operations{kind="add"} 1' in text


def test_slurm_names_follow_the_naming_rule_over_the_resource_config() -> None:
    from training_runtime.resources import ResourceConfig
    from training_runtime.scaler.sagemaker import Node
    from training_runtime.scaler.service import slurm_names

    resources = ResourceConfig.from_json(
        {
            "ClusterConfig": {"ClusterName": "demo", "ClusterArn": "arn:aws:sagemaker:us-west-2:1:cluster/x"},
            "InstanceGroups": [
                {
                    "Name": "gpu",
                    "Instances": [
                        {"InstanceName": "gpu-1", "CustomerIpAddress": "10.0.0.1", "InstanceId": "i-1"},
                        {"InstanceName": "gpu-2", "CustomerIpAddress": "10.0.0.2"},
                    ],
                }
            ],
        }
    )
    listed = [
        Node("i-1", "gpu", "Running", "ip-10-0-0-1.us-west-2.compute.internal"),
        Node("i-2", "gpu", "Running", "ip-10-0-0-2.us-west-2.compute.internal"),
        Node("i-3", "gpu", "Pending", "ip-10-0-0-3.us-west-2.compute.internal"),
    ]
    assert slurm_names("instance", listed, resources) == {"gpu-1": ("gpu", "i-1"), "gpu-2": ("gpu", "i-2")}
    assert slurm_names("ip", listed, resources) == {
        "ip-10-0-0-1": ("gpu", "i-1"),
        "ip-10-0-0-2": ("gpu", "i-2"),
        "ip-10-0-0-3": ("gpu", "i-3"),
    }
    assert slurm_names("ip", listed, None)["ip-10-0-0-3"] == ("gpu", "i-3")
