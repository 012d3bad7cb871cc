"""The emulated control plane's SigV4 check is strict where AWS's is (review finding L8): the host, the operation and
the session token must be signed, the credential must be scoped to the endpoint's Region, and a malformed
Content-Length is a 400 answer, never a dropped connection."""

from __future__ import annotations

import datetime
import http.client
import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from test_control_plane import KEY, Harness, code, make
from training_runtime.scaler.sigv4 import Credentials, sign

cp = pytest.fixture(make())
BODY = json.dumps({"ClusterName": "ml-cluster"}).encode()


def post(url: str, headers: dict[str, str], body: bytes = BODY) -> tuple[int, dict[str, Any]]:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.putrequest("POST", "/", skip_host=True, skip_accept_encoding=True)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def signed(
    url: str, headers: dict[str, str], region: str = "us-west-2", token: str | None = KEY.token
) -> dict[str, str]:
    now = datetime.datetime.now(datetime.UTC)
    credentials = Credentials(KEY.access_key, KEY.secret_key, token)
    return sign("POST", url + "/", headers, BODY, credentials, region, "sagemaker", now)


JSON = {"Content-Type": "application/x-amz-json-1.1"}
DESCRIBE = {**JSON, "X-Amz-Target": "SageMaker.DescribeCluster"}


def test_a_request_signed_as_the_sdk_signs_it_is_answered(cp: Harness) -> None:
    status, answer = post(cp.url, signed(cp.url, DESCRIBE))
    assert status == 200 and answer["ClusterName"] == "ml-cluster"


def test_the_operation_must_be_signed(cp: Harness) -> None:
    """Signed without X-Amz-Target, a captured request could be replayed as any operation (here, a delete)."""
    headers = {**signed(cp.url, JSON), "X-Amz-Target": "SageMaker.BatchDeleteClusterNodes"}
    status, answer = post(cp.url, headers)
    assert (status, answer["__type"]) == (403, "IncompleteSignatureException")
    assert "'x-amz-target' must be a 'SignedHeader'" in answer["message"]


def test_the_session_token_must_be_signed(cp: Harness) -> None:
    headers = {**signed(cp.url, DESCRIBE, token=None), "X-Amz-Security-Token": str(KEY.token)}
    status, answer = post(cp.url, headers)
    assert (status, answer["__type"]) == (403, "IncompleteSignatureException")
    assert "'x-amz-security-token'" in answer["message"]


def test_the_host_must_be_signed(cp: Harness) -> None:
    headers = signed(cp.url, DESCRIBE)
    authorization = headers["Authorization"]
    names = authorization.split("SignedHeaders=")[1].split(",")[0]
    headers["Authorization"] = authorization.replace(names, ";".join(n for n in names.split(";") if n != "host"))
    status, answer = post(cp.url, headers)
    assert (status, answer["__type"]) == (403, "IncompleteSignatureException")
    assert "'host' must be a 'SignedHeader'" in answer["message"]


def test_the_credential_is_scoped_to_the_endpoints_region(cp: Harness) -> None:
    """The cluster's ARN says us-west-2: a request signed for another Region is refused, as AWS refuses one."""
    status, answer = post(cp.url, signed(cp.url, DESCRIBE, region="eu-west-1"))
    assert (status, answer["__type"]) == (403, "InvalidSignatureException")
    assert answer["message"] == "Credential should be scoped to a valid region, not 'eu-west-1'."
    with pytest.raises(ClientError) as error:
        _client_in(cp, "us-east-1").describe_cluster(ClusterName="ml-cluster")
    assert code(error) == "InvalidSignatureException"


def _client_in(cp: Harness, region: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "sagemaker",
        region_name=region,
        endpoint_url=cp.url,
        aws_access_key_id=KEY.access_key,
        aws_secret_access_key=KEY.secret_key,
        aws_session_token=KEY.token,
        config=Config(retries={"max_attempts": 1}),
    )


@pytest.fixture
def answered(cp: Harness) -> Iterator[Harness]:
    """The control plane, checked to still answer a good request after the test's bad one."""
    yield cp
    assert post(cp.url, signed(cp.url, DESCRIBE))[0] == 200


@pytest.mark.parametrize(("length", "status"), [("abc", 400), ("-5", 400), ("1e3", 400), (str(2 << 20), 413)], ids=str)
def test_a_malformed_content_length_is_an_answer_not_a_crash(answered: Harness, length: str, status: int) -> None:
    headers = {**signed(answered.url, DESCRIBE), "Content-Length": length}
    got, answer = post(answered.url, headers, b"")
    assert (got, answer["__type"]) == (status, "SerializationException")
    assert answer["message"].startswith("Content-Length: got")
