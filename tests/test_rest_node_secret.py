"""The controller's read of the REST API's key (:mod:`training_runtime.rest.secret`) against moto's Secrets Manager on
a moto server on 127.0.0.1: the runtime's stdlib SigV4 client, real HTTP, the secret as the stack creates it
(generated, ``GetRandomPassword``'s alphabet) and rotated (``PutSecretValue``)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from ops_support import REGION, aws_env, moto_url  # noqa: F401
from training_runtime.rest.secret import SecretError, client_for, fetch_key
from training_runtime.scaler.sigv4 import Credentials


@pytest.fixture
def moto(request: pytest.FixtureRequest) -> str:
    """moto's endpoint, its state reset (ops_support's ``aws_env``)."""
    return str(request.getfixturevalue("aws_env"))


def runtime(url: str) -> Any:
    return client_for(REGION, url, credentials=lambda: Credentials("testing", "testing"))


def test_the_current_version_is_read_and_a_rotation_is_seen(moto: str) -> None:
    secrets = boto3.client("secretsmanager", region_name=REGION)
    value = secrets.get_random_password(PasswordLength=64, ExcludePunctuation=True)["RandomPassword"]
    arn = secrets.create_secret(Name="ml-cluster-rest-api-key", SecretString=value)["ARN"]
    assert fetch_key(runtime(moto), arn) == value.encode("utf-8")
    secrets.put_secret_value(SecretId=arn, SecretString="R" * 64)
    assert fetch_key(runtime(moto), arn) == b"R" * 64


def test_a_binary_secret_is_not_a_key(moto: str) -> None:
    arn = boto3.client("secretsmanager", region_name=REGION).create_secret(Name="binary", SecretBinary=b"\x00" * 64)[
        "ARN"
    ]
    with pytest.raises(SecretError, match="has no SecretString"):
        fetch_key(runtime(moto), arn)


def test_a_missing_secret_is_named_with_the_fix(moto: str) -> None:
    arn = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:gone-AbCdEf"
    with pytest.raises(SecretError) as error:
        fetch_key(runtime(moto), arn)
    assert arn in str(error.value) and "ResourceNotFoundException" in str(error.value)
