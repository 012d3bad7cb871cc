"""The emulated control plane's API through real botocore clients: shapes, AWS's validation, limits, statuses,
errors and SigV4 checks, against the in-memory backend (no root, no nodes)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.client import Config
from botocore.exceptions import ClientError

from hyperpod_local.control_plane.fleet import Fleet, Settings
from hyperpod_local.control_plane.memory import MemoryBackend
from hyperpod_local.control_plane.model import ClusterInfo, Group, Instance, Node
from hyperpod_local.control_plane.operations import ControlPlane
from hyperpod_local.control_plane.protocol import Endpoint
from hyperpod_local.control_plane.sigv4 import Key

ARN = "arn:aws:sagemaker:us-west-2:000000000000:cluster/abcdef012345"
KEY = Key("ASIAEMULATEDKEY00001", "secret/emulated/key", "session-token")
ROLE = "arn:aws:iam::000000000000:role/hyperpod-execution"
LIFECYCLE = {"SourceS3Uri": "s3://bucket/lifecycle/", "OnCreate": "on_create.sh"}
GPU = "ml.g5.8xlarge"


@dataclass
class Harness:
    plane: ControlPlane
    backend: MemoryBackend
    settings: Settings
    clock: list[float]
    url: str
    skew: list[float]

    def client(self, key: Key = KEY, **config: Any) -> Any:
        return boto3.session.Session().client(
            "sagemaker",
            region_name="us-west-2",
            endpoint_url=self.url,
            aws_access_key_id=key.access_key,
            aws_secret_access_key=key.secret_key,
            aws_session_token=key.token,
            config=Config(retries={"max_attempts": 1}, **config),
        )

    def later(self, seconds: float) -> None:
        self.clock[0] += seconds


def make(continuous: bool = True) -> Callable[[], Iterator[Harness]]:
    def fixture() -> Iterator[Harness]:
        clock = [1_795_000_000.0]  # the fleet's injected clock, moved by later(); SigV4 uses the real one
        backend = MemoryBackend()
        groups = [
            Group("controller", "Controller", "ml.m5.xlarge", 1, ROLE, LIFECYCLE),
            Group("gpu", "Compute", GPU, 2, ROLE, LIFECYCLE, partition="gpu"),
        ]
        nodes: list[Node] = []
        for group in groups:
            for _ in range(group.target):
                node = Node(f"logical-{len(nodes)}", group.name, group.instance_type, "Running", clock[0])
                node.instance = backend.allocate(group)
                nodes.append(node)
        settings = Settings(launch_latency=60.0, retry_interval=30.0)
        fleet = Fleet(groups, nodes, backend, settings=lambda: settings, clock=lambda: clock[0], spawn=lambda w: w())
        plane = ControlPlane(ClusterInfo("ml-cluster", ARN, continuous, clock[0]), fleet)
        skew = [0.0]
        endpoint = Endpoint(plane, lambda: [KEY], clock=lambda: time.time() + skew[0])
        url = endpoint.serve()
        try:
            yield Harness(plane, backend, settings, clock, url, skew)
        finally:
            endpoint.stop()

    return fixture


cp = pytest.fixture(make())
classic = pytest.fixture(make(continuous=False))


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def groups(client: Any) -> dict[str, tuple[int, int]]:
    described = client.describe_cluster(ClusterName="ml-cluster")
    return {g["InstanceGroupName"]: (g["CurrentCount"], g["TargetCount"]) for g in described["InstanceGroups"]}


def test_describe_and_list_show_the_nodes_in_botocores_shapes(cp: Harness) -> None:
    client = cp.client()
    described = client.describe_cluster(ClusterName=ARN)
    assert described["ClusterStatus"] == "InService"
    assert described["NodeProvisioningMode"] == "Continuous"
    assert groups(client) == {"controller": (1, 1), "gpu": (2, 2)}
    gpu = next(g for g in described["InstanceGroups"] if g["InstanceGroupName"] == "gpu")
    assert gpu["SlurmConfig"] == {"NodeType": "Compute", "PartitionNames": ["gpu"]}
    pages = list(client.get_paginator("list_cluster_nodes").paginate(ClusterName="ml-cluster", MaxResults=1))
    assert len(pages) == 3  # paging: one node per page, every node once
    ids = [s["InstanceId"] for p in pages for s in p["ClusterNodeSummaries"]]
    assert sorted(ids) == sorted(n.instance_id for n in cp.plane.fleet.nodes if n.instance_id)
    node = client.describe_cluster_node(ClusterName="ml-cluster", NodeId=ids[1])["NodeDetails"]
    assert node["InstanceStatus"] == {"Status": "Running"}
    dashed = node["PrivatePrimaryIp"].replace(".", "-")
    assert node["PrivateDnsHostname"] == f"ip-{dashed}.local.compute.internal"
    assert node["PrivatePrimaryIp"] == next(n.instance.ip for n in cp.plane.fleet.nodes if n.instance_id == ids[1])  # type: ignore[union-attr]


def test_unknown_cluster_and_node_are_resource_not_found(cp: Harness) -> None:
    client = cp.client()
    with pytest.raises(ClientError) as error:
        client.describe_cluster(ClusterName="other")
    assert code(error) == "ResourceNotFound"
    with pytest.raises(client.exceptions.ResourceNotFound):
        client.describe_cluster_node(ClusterName="ml-cluster", NodeId="i-0123456789abcdef0")


def test_requests_must_carry_a_valid_signature(cp: Harness) -> None:
    with pytest.raises(ClientError) as error:
        cp.client(signature_version=UNSIGNED).describe_cluster(ClusterName="ml-cluster")
    assert code(error) == "MissingAuthenticationTokenException"
    with pytest.raises(ClientError) as error:
        cp.client(Key(KEY.access_key, "wrong secret", KEY.token)).describe_cluster(ClusterName="ml-cluster")
    assert code(error) == "InvalidSignatureException"
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as error:
        cp.client(Key("AKIAUNKNOWN000000000", KEY.secret_key, KEY.token)).describe_cluster(ClusterName="ml-cluster")
    assert code(error) == "UnrecognizedClientException"
    with pytest.raises(ClientError) as error:
        cp.client(Key(KEY.access_key, KEY.secret_key, None)).describe_cluster(ClusterName="ml-cluster")
    assert code(error) == "UnrecognizedClientException"
    cp.skew[0] = 600  # a request signed 10 minutes ago (by the server's clock) is refused
    with pytest.raises(ClientError) as error:
        cp.client().describe_cluster(ClusterName="ml-cluster")
    assert code(error) == "InvalidSignatureException"
    assert "expired" in str(error.value)


def test_batch_add_is_pending_for_the_launch_latency_then_running(cp: Harness) -> None:
    client = cp.client()
    added = client.batch_add_cluster_nodes(
        ClusterName="ml-cluster", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 2}]
    )
    assert [s["Status"] for s in added["Successful"]] == ["Pending", "Pending"]
    assert added["Failed"] == []
    assert groups(client) == {"controller": (1, 1), "gpu": (2, 4)}
    listed = client.list_cluster_nodes(ClusterName="ml-cluster")["ClusterNodeSummaries"]
    assert len(listed) == 3  # nodes without an instance are listed by logical id only when asked
    logical = client.list_cluster_nodes(ClusterName="ml-cluster", IncludeNodeLogicalIds=True)["ClusterNodeSummaries"]
    pending = [s for s in logical if s["InstanceStatus"]["Status"] == "Pending"]
    assert {s["NodeLogicalId"] for s in pending} == {s["NodeLogicalId"] for s in added["Successful"]}
    assert not [entry for entry in cp.backend.log if entry[0] == "boot"]
    cp.later(59)
    assert groups(client)["gpu"] == (2, 4)
    cp.later(1)
    assert groups(client)["gpu"] == (4, 4)
    assert len([entry for entry in cp.backend.log if entry[0] == "boot"]) == 2
    first = added["Successful"][0]["NodeLogicalId"]
    node = client.describe_cluster_node(ClusterName="ml-cluster", NodeLogicalId=first)["NodeDetails"]
    assert node["InstanceStatus"]["Status"] == "Running"
    assert node["InstanceId"].startswith("i-")


def test_batch_add_limits_and_per_group_failures(cp: Harness) -> None:
    client = cp.client()
    with pytest.raises(ClientError) as error:
        client.batch_add_cluster_nodes(
            ClusterName="ml-cluster", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 51}]
        )
    assert code(error) == "ValidationException"
    with pytest.raises(ClientError) as error:  # 50 nodes across all groups
        client.batch_add_cluster_nodes(
            ClusterName="ml-cluster",
            NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 26}] * 2,
        )
    assert code(error) == "ValidationException" and "maximum of 50" in str(error.value)
    with pytest.raises(ClientError) as error:  # 5 groups per call
        client.batch_add_cluster_nodes(
            ClusterName="ml-cluster", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}] * 6
        )
    assert code(error) == "ValidationException"
    assert groups(client)["gpu"] == (2, 2)  # nothing of a refused request happened
    answer = client.batch_add_cluster_nodes(
        ClusterName="ml-cluster",
        NodesToAdd=[
            {"InstanceGroupName": "nope", "IncrementTargetCountBy": 3},
            {"InstanceGroupName": "controller", "IncrementTargetCountBy": 1},
        ],
    )
    assert answer["Successful"] == []
    assert [(f["InstanceGroupName"], f["ErrorCode"], f["FailedCount"]) for f in answer["Failed"]] == [
        ("nope", "InstanceGroupNotFound", 3),
        ("controller", "InvalidInstanceGroupStatus", 1),
    ]


def test_batch_add_is_idempotent_by_client_token(cp: Harness) -> None:
    client = cp.client()
    spec = [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
    first = client.batch_add_cluster_nodes(ClusterName="ml-cluster", NodesToAdd=spec, ClientToken="job-42")
    again = client.batch_add_cluster_nodes(ClusterName="ml-cluster", NodesToAdd=spec, ClientToken="job-42")
    assert [s["NodeLogicalId"] for s in again["Successful"]] == [s["NodeLogicalId"] for s in first["Successful"]]
    assert groups(client)["gpu"] == (2, 3)
    with pytest.raises(ClientError) as error:
        client.batch_add_cluster_nodes(
            ClusterName="ml-cluster",
            NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 2}],
            ClientToken="job-42",
        )
    assert code(error) == "ValidationException"
    cp.later(8 * 3600 + 1)  # the token is valid for 8 hours
    third = client.batch_add_cluster_nodes(ClusterName="ml-cluster", NodesToAdd=spec, ClientToken="job-42")
    assert third["Successful"][0]["NodeLogicalId"] != first["Successful"][0]["NodeLogicalId"]
    assert groups(client)["gpu"] == (3, 4)  # the first node runs; the new request's is pending


def test_batch_add_needs_continuous_provisioning(classic: Harness) -> None:
    with pytest.raises(ClientError) as error:
        classic.client().batch_add_cluster_nodes(
            ClusterName="ml-cluster", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
        )
    assert code(error) == "ValidationException" and "Continuous" in str(error.value)
    with pytest.raises(ClientError):
        classic.client().list_cluster_events(ClusterName="ml-cluster")


def test_capacity_shortage_keeps_the_node_pending_with_an_event_and_retries(cp: Harness) -> None:
    client = cp.client()
    cp.settings.capacity[GPU] = 2  # both in use
    client.batch_add_cluster_nodes(
        ClusterName="ml-cluster", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
    )
    cp.later(60)
    assert groups(client)["gpu"] == (2, 3)
    nodes = client.list_cluster_nodes(ClusterName="ml-cluster", IncludeNodeLogicalIds=True)["ClusterNodeSummaries"]
    pending = [n for n in nodes if n["InstanceStatus"]["Status"] == "Pending"]
    assert len(pending) == 1 and "InsufficientCapacity" in pending[0]["InstanceStatus"]["Message"]
    events = client.list_cluster_events(ClusterName="ml-cluster", InstanceGroupName="gpu")["Events"]
    errors = [e for e in events if e["EventLevel"] == "Error"]
    assert len(errors) == 1 and "insufficient capacity" in errors[0]["Description"]
    cp.later(60)
    assert groups(client)["gpu"] == (2, 3)  # still short: retried, one event for the shortage
    cp.settings.capacity[GPU] = 3
    cp.later(30)
    assert groups(client)["gpu"] == (3, 3)


def test_batch_delete_removes_workers_never_controllers(cp: Harness) -> None:
    client = cp.client()
    by_group = {n.group: n.instance_id for n in cp.plane.fleet.nodes}
    answer = client.batch_delete_cluster_nodes(
        ClusterName="ml-cluster", NodeIds=[by_group["controller"], by_group["gpu"], "i-00000000000000000"]
    )
    assert answer["Successful"] == [by_group["gpu"]]
    assert [(f["NodeId"], f["Code"]) for f in answer["Failed"]] == [
        (by_group["controller"], "InvalidNodeStatus"),
        ("i-00000000000000000", "NodeIdNotFound"),
    ]
    assert ("terminate", by_group["gpu"]) in cp.backend.log
    assert groups(client) == {"controller": (1, 1), "gpu": (1, 1)}
    listed = client.list_cluster_nodes(ClusterName="ml-cluster")["ClusterNodeSummaries"]
    assert by_group["gpu"] not in [s["InstanceId"] for s in listed]
    with pytest.raises(ClientError) as error:
        client.batch_delete_cluster_nodes(ClusterName="ml-cluster", NodeIds=["i-0123456789abcdef0"] * 51)
    assert code(error) == "ValidationException"


def test_reboot_and_replace(cp: Harness) -> None:
    client = cp.client()
    controller = next(n.instance_id for n in cp.plane.fleet.nodes if n.group == "controller")
    worker = next(n.instance_id for n in cp.plane.fleet.nodes if n.group == "gpu")
    answer = client.batch_replace_cluster_nodes(ClusterName="ml-cluster", NodeIds=[controller, worker])
    assert answer["Successful"] == [worker]
    assert [(f["NodeId"], f["ErrorCode"]) for f in answer["Failed"]] == [(controller, "InvalidInstanceStatus")]
    assert ("replace", worker) in cp.backend.log
    rebooted = client.batch_reboot_cluster_nodes(ClusterName="ml-cluster", NodeIds=[controller])
    assert rebooted["Successful"] == [controller] and ("reboot", controller) in cp.backend.log
    with pytest.raises(ClientError) as error:
        client.batch_reboot_cluster_nodes(ClusterName="ml-cluster", NodeIds=[worker] * 26)
    assert code(error) == "ValidationException"


def test_update_cluster_changes_compute_counts_only(cp: Harness) -> None:
    client = cp.client()
    spec = {"InstanceGroupName": "gpu", "InstanceCount": 3, "ExecutionRole": ROLE, "InstanceType": GPU}
    client.update_cluster(ClusterName="ml-cluster", InstanceGroups=[spec])
    cp.later(60)
    assert groups(client)["gpu"] == (3, 3)
    client.update_cluster(ClusterName="ml-cluster", InstanceGroups=[{**spec, "InstanceCount": 1}])
    assert groups(client)["gpu"] == (1, 1)
    assert len([e for e in cp.backend.log if e[0] == "terminate"]) == 2
    with pytest.raises(ClientError) as error:
        client.update_cluster(
            ClusterName="ml-cluster",
            InstanceGroups=[{"InstanceGroupName": "controller", "InstanceCount": 2, "ExecutionRole": ROLE}],
        )
    assert code(error) == "ValidationException"
    with pytest.raises(ClientError) as error:
        client.update_cluster(ClusterName="ml-cluster", InstanceGroups=[{**spec, "InstanceType": "ml.p5.48xlarge"}])
    assert code(error) == "ValidationException"


def test_tags_on_the_cluster_arn(cp: Harness) -> None:
    client = cp.client()
    client.add_tags(ResourceArn=ARN, Tags=[{"Key": "hyperpod-cdk:scaler", "Value": "ok gpu=2/0..8"}])
    assert client.list_tags(ResourceArn=ARN)["Tags"] == [{"Key": "hyperpod-cdk:scaler", "Value": "ok gpu=2/0..8"}]
    with pytest.raises(ClientError) as error:
        client.add_tags(ResourceArn=ARN, Tags=[{"Key": "k", "Value": "v" * 257}])
    assert code(error) == "ValidationException"
    with pytest.raises(ClientError) as error:
        client.list_tags(ResourceArn=ARN.replace("abcdef012345", "000000000000"))
    assert code(error) == "ResourceNotFound"


def test_events_page_in_time_order(cp: Harness) -> None:
    client = cp.client()
    for _ in range(3):
        client.batch_add_cluster_nodes(
            ClusterName="ml-cluster", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
        )
        cp.later(1)
    pages = list(client.get_paginator("list_cluster_events").paginate(ClusterName="ml-cluster", MaxResults=2))
    events = [e for p in pages for e in p["Events"]]
    assert len(pages) == 2 and len(events) == 3
    assert [e["EventTime"] for e in events] == sorted(e["EventTime"] for e in events)
    assert all(e["ClusterArn"] == ARN and e["ResourceType"] == "InstanceGroup" for e in events)


def test_a_node_deleted_while_launching_is_terminated_when_its_boot_ends(cp: Harness) -> None:
    queued: list[Callable[[], None]] = []
    cp.plane.fleet.spawn = queued.append
    client = cp.client()
    client.batch_add_cluster_nodes(
        ClusterName="ml-cluster", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
    )
    cp.later(60)
    groups(client)  # starts the launch
    launching = next(n for n in cp.plane.fleet.nodes if n.launching)
    instance: Instance = launching.instance  # type: ignore[assignment]
    client.batch_delete_cluster_nodes(ClusterName="ml-cluster", NodeIds=[instance.instance_id])
    while queued:
        queued.pop(0)()
    assert cp.backend.log[-2:] == [("boot", instance.instance_id), ("terminate", instance.instance_id)]
    assert groups(client)["gpu"] == (2, 2)


def test_the_docs_state_the_limits_the_code_enforces() -> None:
    from pathlib import Path

    from hyperpod_local.control_plane import validation as limits

    docs = (Path(__file__).resolve().parent.parent / "docs" / "local-cluster.md").read_text()
    section = docs.split("## Emulated control plane\n", 1)[1].split("\n## ", 1)[0]
    text = " ".join(section.split())
    for claim in (
        f"at most {limits.ADD_GROUPS_MAX} groups and {limits.ADD_NODES_MAX} nodes per call",
        f"`IncrementTargetCountBy` 1 to {limits.ADD_NODES_MAX}",
        f"a combined maximum of {limits.DELETE_IDS_MAX} identifiers",
        f"1 to {limits.REBOOT_IDS_MAX} `NodeIds` and 1 to {limits.REBOOT_IDS_MAX} `NodeLogicalIds`",
        f"`MaxResults` 1 to {limits.LIST_MAX}",
        f"at most {limits.TAGS_MAX} tags",
    ):
        assert claim in text, claim


def test_the_metadata_service_hands_out_the_role_keys_with_an_imdsv2_token(tmp_path: Any) -> None:
    import json
    import threading
    import urllib.error
    import urllib.request
    from http.server import ThreadingHTTPServer

    from hyperpod_local.imds import CREDENTIALS_PATH, handler
    from training_runtime.spot import TOKEN_PATH

    keys = {"Code": "Success", "AccessKeyId": KEY.access_key, "SecretAccessKey": KEY.secret_key, "Token": KEY.token}
    (tmp_path / "credentials.json").write_text(json.dumps(keys))
    (tmp_path / "notices.json").write_text("{}")
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), handler(tmp_path / "notices.json", tmp_path / "credentials.json", "the-role")
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def get(path: str, headers: dict[str, str], method: str = "GET") -> str:
        request = urllib.request.Request(base + path, headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=5) as answer:
            return str(answer.read().decode())

    try:
        with pytest.raises(urllib.error.HTTPError) as refused:  # IMDSv1 (no token) is refused
            get(CREDENTIALS_PATH, {})
        assert refused.value.code == 401
        token = get(TOKEN_PATH, {"X-aws-ec2-metadata-token-ttl-seconds": "60"}, "PUT")
        assert get(CREDENTIALS_PATH, {"X-aws-ec2-metadata-token": token}) == "the-role"
        found = json.loads(get(CREDENTIALS_PATH + "the-role", {"X-aws-ec2-metadata-token": token}))
        assert (found["AccessKeyId"], found["SecretAccessKey"], found["Token"]) == (
            KEY.access_key,
            KEY.secret_key,
            KEY.token,
        )
    finally:
        server.shutdown()
        server.server_close()


def test_the_command_line_knobs() -> None:
    import argparse

    from hyperpod_local.cli import add_commands
    from hyperpod_local.control_plane.cli import capacity

    assert capacity("ml.g5.8xlarge=2") == ("ml.g5.8xlarge", 2)
    assert capacity("ml.g5.8xlarge=unlimited") == ("ml.g5.8xlarge", None)
    for bad in ("ml.g5.8xlarge", "=2", "ml.g5.8xlarge=-1", "ml.g5.8xlarge=many"):
        with pytest.raises(argparse.ArgumentTypeError):
            capacity(bad)
    parser = argparse.ArgumentParser()
    add_commands(parser)
    up = parser.parse_args(["up", "--launch-latency", "2", "--capacity", "ml.c5.xlarge=0", "--no-control-plane"])
    assert (up.launch_latency, up.capacity, up.control_plane) == (2.0, [("ml.c5.xlarge", 0)], False)
    assert parser.parse_args(["up"]).control_plane is None  # on by default for the HyperPod platform
    knobs = parser.parse_args(["control-plane", "--capacity", "ml.c5.xlarge=unlimited", "--env"])
    assert (knobs.capacity, knobs.env, knobs.launch_latency) == ([("ml.c5.xlarge", None)], True, None)


def test_a_launch_the_backend_cannot_place_is_retried_with_an_event(cp: Harness) -> None:
    from hyperpod_local.control_plane.fleet import LaunchError

    allocate = cp.backend.allocate
    full = [True]

    def refuse(group: Group) -> Instance:
        if full[0]:
            raise LaunchError("subnet 10.1.0.0/24: no free address for another node")
        return allocate(group)

    cp.backend.allocate = refuse  # type: ignore[method-assign]
    client = cp.client()
    client.batch_add_cluster_nodes(
        ClusterName="ml-cluster", NodesToAdd=[{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 1}]
    )
    cp.later(60)
    assert groups(client)["gpu"] == (2, 3)
    events = client.list_cluster_events(ClusterName="ml-cluster", InstanceGroupName="gpu")["Events"]
    assert [e["Description"] for e in events if e["EventLevel"] == "Error"] == [
        "Failed to launch an instance in gpu: subnet 10.1.0.0/24: no free address for another node"
    ]
    full[0] = False
    cp.later(30)
    assert groups(client)["gpu"] == (3, 3)
