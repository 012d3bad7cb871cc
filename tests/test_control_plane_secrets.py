"""The emulated control plane answers Secrets Manager's GetSecretValue for the secrets it was given (the directory's
bind password on a local cluster, issue #41), to botocore's own secretsmanager client: signed for the service
``secretsmanager`` by the role's key, any other secret ResourceNotFoundException, a SageMaker-signed request
refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from hyperpod_local.control_plane.protocol import Endpoint
from test_control_plane import KEY, Harness, code, make

cp = pytest.fixture(make())
ARN = "arn:aws:secretsmanager:us-west-2:111122223333:secret:ldap-bind-AbCdEf"


@pytest.fixture
def url(cp: Harness) -> Iterator[str]:
    endpoint = Endpoint(cp.plane, lambda: [KEY], secrets=lambda: {ARN: "s3cr3t"})
    try:
        yield endpoint.serve()
    finally:
        endpoint.stop()


def client(url: str, service: str = "secretsmanager") -> Any:
    return boto3.session.Session().client(
        service,
        region_name="us-west-2",
        endpoint_url=url,
        aws_access_key_id=KEY.access_key,
        aws_secret_access_key=KEY.secret_key,
        aws_session_token=KEY.token,
        config=Config(retries={"max_attempts": 1}),
    )


def test_a_given_secret_is_served_by_arn_and_by_name(url: str) -> None:
    answer = client(url).get_secret_value(SecretId=ARN)
    assert (answer["ARN"], answer["SecretString"]) == (ARN, "s3cr3t")
    assert client(url).get_secret_value(SecretId="ldap-bind-AbCdEf")["SecretString"] == "s3cr3t"


def test_another_secret_is_not_found(url: str) -> None:
    with pytest.raises(ClientError) as error:
        client(url).get_secret_value(SecretId=ARN.replace("ldap", "db"))
    assert code(error) == "ResourceNotFoundException"


def test_a_request_signed_for_another_service_is_refused(url: str) -> None:
    sagemaker = client(url, "sagemaker")
    sagemaker.meta.events.register(
        "before-sign.sagemaker.*",
        lambda request, **_: request.headers.__setitem__("X-Amz-Target", "secretsmanager.GetSecretValue"),
    )
    with pytest.raises(ClientError) as error:
        sagemaker.describe_cluster(ClusterName="ml-cluster")
    assert code(error) == "InvalidSignatureException"
