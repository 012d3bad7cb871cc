"""The scaler's SageMaker client against a local JSON-protocol fake (tests/scaler_fakes.py says why a fake)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scaler_fakes import FakeImds, FakeSageMaker
from training_runtime.scaler.credentials import RoleCredentials, parse_expiration
from training_runtime.scaler.policy import AddNodes
from training_runtime.scaler.sagemaker import (
    AUTH,
    CAPACITY,
    QUOTA,
    THROTTLING,
    ApiError,
    SageMaker,
    classify,
    region_of,
)
from training_runtime.scaler.sigv4 import Credentials

NOW = 1_795_000_000.0  # the client's and the credential cache's injected clock: they read no other time


@pytest.fixture()
def fake() -> Iterator[FakeSageMaker]:
    server = FakeSageMaker()
    yield server
    server.close()


def client(fake: FakeSageMaker, sleeps: list[float]) -> SageMaker:
    creds = Credentials("AKID", "secret", "session")
    return SageMaker(fake.url, "us-west-2", lambda: creds, clock=lambda: NOW, sleep=sleeps.append)


def test_requests_use_the_json_protocol_and_are_signed(fake: FakeSageMaker) -> None:
    fake.groups["gpu"] = [1, 1]
    arn, groups = client(fake, []).describe_cluster("demo")
    operation, body, headers = fake.requests[0]
    assert operation == "DescribeCluster" and body == {"ClusterName": "demo"}
    assert headers["X-Amz-Target"] == "SageMaker.DescribeCluster"
    assert headers["Content-Type"] == "application/x-amz-json-1.1"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID/")
    assert "/us-west-2/sagemaker/aws4_request" in headers["Authorization"]
    assert headers["X-Amz-Security-Token"] == "session"
    assert groups[0].name == "gpu" and groups[0].target == 1
    assert region_of(arn) == "us-west-2"


def test_list_cluster_nodes_follows_next_token(fake: FakeSageMaker) -> None:
    fake.nodes = [
        {"InstanceId": f"i-{n:017x}", "InstanceGroupName": "gpu", "InstanceStatus": {"Status": "Running"}}
        for n in range(230)
    ]
    nodes = client(fake, []).list_cluster_nodes("demo")
    assert len(nodes) == 230 and len(fake.calls("ListClusterNodes")) == 3


def test_batch_add_sends_the_token_and_counts(fake: FakeSageMaker) -> None:
    fake.groups["gpu"] = [0, 0]
    sm = client(fake, [])
    sm.batch_add("demo", [AddNodes("gpu", 2, 0, ("7",))], "tok-1")
    sm.batch_add("demo", [AddNodes("gpu", 2, 0, ("7",))], "tok-1")
    body = fake.calls("BatchAddClusterNodes")[0]
    assert body["ClientToken"] == "tok-1"
    assert body["NodesToAdd"] == [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 2}]
    assert fake.groups["gpu"] == [0, 2]


def test_batch_add_refuses_calls_above_the_api_limits(fake: FakeSageMaker) -> None:
    with pytest.raises(ValueError):
        client(fake, []).batch_add("demo", [AddNodes("gpu", 51, 0, ())], "t")
    assert fake.requests == []


def test_a_failed_entry_of_batch_add_is_an_error(fake: FakeSageMaker) -> None:
    failed = {"InstanceGroupName": "gpu", "ErrorCode": "InvalidInstanceGroupStatus", "FailedCount": 2, "Message": "x"}
    fake.script("BatchAddClusterNodes", 200, {"Failed": [failed]})
    with pytest.raises(ApiError) as raised:
        client(fake, []).batch_add("demo", [AddNodes("gpu", 2, 0, ())], "t")
    assert raised.value.code == "InvalidInstanceGroupStatus"


def test_batch_delete_reads_the_failed_list(fake: FakeSageMaker) -> None:
    fake.groups["gpu"] = [1, 1]
    fake.nodes = [{"InstanceId": "i-0123456789abcdef0", "InstanceGroupName": "gpu"}]
    result = client(fake, []).batch_delete("demo", ["i-0123456789abcdef0", "i-0fffffffffffffff0"])
    assert result.deleted == ("i-0123456789abcdef0",)
    assert result.failed["i-0fffffffffffffff0"].startswith("NodeIdNotFound")


def test_throttling_and_5xx_are_retried_with_backoff(fake: FakeSageMaker) -> None:
    fake.script("DescribeCluster", 400, {"__type": "ThrottlingException", "message": "slow down"})
    fake.script("DescribeCluster", 503, {"__type": "ServiceUnavailable", "message": "later"})
    sleeps: list[float] = []
    client(fake, sleeps).describe_cluster("demo")
    assert len(fake.calls("DescribeCluster")) == 3 and len(sleeps) == 2


def test_quota_errors_are_not_retried_and_are_classified(fake: FakeSageMaker) -> None:
    fake.script("BatchAddClusterNodes", 400, {"__type": "com.amazon#ResourceLimitExceeded", "message": "quota"})
    sleeps: list[float] = []
    with pytest.raises(ApiError) as raised:
        client(fake, sleeps).batch_add("demo", [AddNodes("gpu", 1, 0, ())], "t")
    assert raised.value.kind == QUOTA and sleeps == []


def test_retries_stop_after_the_attempts(fake: FakeSageMaker) -> None:
    for _ in range(6):
        fake.script("DescribeCluster", 500, {"__type": "InternalFailure", "message": "x"})
    with pytest.raises(ApiError):
        client(fake, []).describe_cluster("demo")
    assert len(fake.calls("DescribeCluster")) == 5


def test_classification() -> None:
    assert classify(400, "ThrottlingException") == THROTTLING
    assert classify(400, "InsufficientInstanceCapacity") == CAPACITY
    assert classify(403, "Whatever") == AUTH
    assert classify(400, "InvalidSignatureException") == AUTH


def test_role_credentials_are_cached_until_near_expiry() -> None:
    imds = FakeImds("2026-11-26T07:00:00Z")
    expires = parse_expiration("2026-11-26T07:00:00Z")
    now = [expires - 3600]
    try:
        creds = RoleCredentials(imds.url, clock=lambda: now[0])
        assert creds().access_key == "ASIA1" and creds().token == "t"
        assert imds.fetches == 1
        now[0] = expires - 60
        creds()
        assert imds.fetches == 2
    finally:
        imds.server.shutdown()
        imds.server.server_close()
