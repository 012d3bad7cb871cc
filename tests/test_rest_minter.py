"""The minting function: an IAM caller in, a JWT for its mapped Slurm user out, against moto's Secrets Manager and
IAM on a moto server (real boto3 over HTTP); every refusal is a 403 without a token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from hyperpod_cdk.core.rest_api_config import MAX_TOKEN_LIFETIME_S
from hyperpod_cdk.rest.minter import handler as minter
from hyperpod_cdk.rest.minter.identity import principal_key
from hyperpod_cdk.rest.minter.token import verify
from ops_support import ACCOUNT, REGION, aws_env, moto_url  # noqa: F401

KEY = "k" * 64
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/pipelines/ml-pipeline"
ROLE_KEY = f"arn:aws:iam::{ACCOUNT}:role/ml-pipeline"
SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/ml-pipeline/airflow-run-17"
CONTEXT = SimpleNamespace(invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:minter")


def event(arn: str | None, method: str = "POST") -> dict[str, Any]:
    """A Function URL request with AWS_IAM auth, as Lambda's payload format 2.0 gives it."""
    iam = {"accountId": ACCOUNT, "userArn": arn, "callerId": "AROAEXAMPLE:airflow-run-17"} if arn else None
    return {
        "version": "2.0",
        "rawPath": "/",
        "requestContext": {"http": {"method": method, "path": "/"}, "authorizer": {"iam": iam} if iam else None},
    }


@pytest.fixture
def secret(aws_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:  # noqa: F811
    minter._CLIENTS.clear()  # the handler's clients were made for another moto state
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)  # Lambda sets it; botocore reads it
    client = boto3.client("secretsmanager")
    arn = client.create_secret(Name="slurm-jwt", SecretString=KEY)["ARN"]
    monkeypatch.setenv(minter.SECRET_ENV, arn)
    monkeypatch.setenv(minter.LIFETIME_ENV, "900")
    monkeypatch.setenv(minter.IDENTITIES_ENV, json.dumps({ROLE_KEY: "alice"}))
    monkeypatch.delenv(minter.TAG_ENV, raising=False)
    monkeypatch.delenv(minter.TAG_USERS_ENV, raising=False)
    yield arn
    minter._CLIENTS.clear()


def body(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["headers"]["Cache-Control"] == "no-store"
    return json.loads(reply["body"])


def test_a_role_session_gets_a_token_for_its_mapped_user_signed_with_the_secret(secret: str) -> None:
    reply = minter.handler(event(SESSION), CONTEXT)
    assert reply["statusCode"] == 200
    answer = body(reply)
    claims = verify(KEY.encode(), answer["token"], answer["expires_at"] - 1)
    assert claims["sun"] == answer["user"] == "alice"
    assert claims["exp"] - claims["iat"] == 900 == answer["lifetime_s"]


def test_the_next_token_is_signed_with_the_rotated_key(secret: str) -> None:
    boto3.client("secretsmanager").put_secret_value(SecretId=secret, SecretString="n" * 64)  # a new AWSCURRENT
    answer = body(minter.handler(event(SESSION), CONTEXT))
    verify(b"n" * 64, answer["token"], answer["expires_at"] - 1)


def test_the_lifetime_is_capped_whatever_the_environment_says(secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(minter.LIFETIME_ENV, "86400")
    claims = verify(KEY.encode(), body(minter.handler(event(SESSION), CONTEXT))["token"], 0)
    assert claims["exp"] - claims["iat"] == minter.MAX_LIFETIME_S
    # the function's cap is the config's maximum: one fact, written twice because the function's code is an asset
    # that cannot import the library
    assert minter.MAX_LIFETIME_S == MAX_TOKEN_LIFETIME_S


@pytest.mark.parametrize(
    "arn",
    [
        f"arn:aws:sts::{ACCOUNT}:assumed-role/other-role/s1",  # another role
        f"arn:aws:iam::{ACCOUNT}:user/ml-pipeline",  # a user of the role's name
        f"arn:aws:sts::{ACCOUNT}:federated-user/ml-pipeline",
        f"arn:aws:iam::{ACCOUNT}:root",
        "arn:aws:sts::999999999999:assumed-role/ml-pipeline/s1",  # the same name in another account
    ],
)
def test_an_unmapped_caller_is_refused_without_a_token(secret: str, arn: str) -> None:
    reply = minter.handler(event(arn), CONTEXT)
    assert reply["statusCode"] == 403
    assert "token" not in body(reply)


def test_no_iam_caller_and_other_methods_are_refused(secret: str) -> None:
    assert minter.handler(event(None), CONTEXT)["statusCode"] == 403
    assert minter.handler(event(SESSION, method="GET"), CONTEXT)["statusCode"] == 405


@pytest.mark.parametrize("user", sorted(minter.REFUSED_USERS))
def test_root_and_the_slurm_user_are_never_minted_for(secret: str, monkeypatch: pytest.MonkeyPatch, user: str) -> None:
    monkeypatch.setenv(minter.IDENTITIES_ENV, json.dumps({ROLE_KEY: user}))
    reply = minter.handler(event(SESSION), CONTEXT)
    assert reply["statusCode"] == 403 and "token" not in body(reply)


def test_a_principal_tag_maps_a_role_of_the_functions_account(secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    iam = boto3.client("iam")
    trust = json.dumps({"Version": "2012-10-17", "Statement": []})
    iam.create_role(
        RoleName="notebook",
        Path="/teams/",
        AssumeRolePolicyDocument=trust,
        Tags=[{"Key": "slurm-user", "Value": "bob"}],
    )
    iam.create_role(RoleName="intruder", AssumeRolePolicyDocument=trust, Tags=[{"Key": "slurm-user", "Value": "eve"}])
    monkeypatch.setenv(minter.TAG_ENV, "slurm-user")
    monkeypatch.setenv(minter.TAG_USERS_ENV, json.dumps(["alice", "bob"]))
    answer = body(minter.handler(event(f"arn:aws:sts::{ACCOUNT}:assumed-role/notebook/s1"), CONTEXT))
    assert verify(KEY.encode(), answer["token"], 0)["sun"] == "bob"
    refused = minter.handler(event(f"arn:aws:sts::{ACCOUNT}:assumed-role/intruder/s1"), CONTEXT)
    assert refused["statusCode"] == 403 and "eve" in body(refused)["message"]
    elsewhere = SimpleNamespace(invoked_function_arn=f"arn:aws:lambda:{REGION}:999999999999:function:minter")
    assert minter.handler(event(f"arn:aws:sts::{ACCOUNT}:assumed-role/notebook/s1"), elsewhere)["statusCode"] == 403


def test_an_unreadable_key_is_a_500_that_names_no_secret(secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(minter.SECRET_ENV, secret + "-gone")
    reply = minter.handler(event(SESSION), CONTEXT)
    assert reply["statusCode"] == 500
    assert "secret" not in body(reply)["message"].replace("function's log", "")


@pytest.mark.parametrize(
    "arn, key",
    [
        (f"arn:aws:iam::{ACCOUNT}:role/a/b/Name", f"arn:aws:iam::{ACCOUNT}:role/Name"),
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/Name/session@x", f"arn:aws:iam::{ACCOUNT}:role/Name"),
        (f"arn:aws:iam::{ACCOUNT}:user/division/JaneDoe", f"arn:aws:iam::{ACCOUNT}:user/JaneDoe"),
        (f"arn:aws-cn:iam::{ACCOUNT}:role/R", f"arn:aws-cn:iam::{ACCOUNT}:role/R"),
        (f"arn:aws:iam::{ACCOUNT}:root", None),
        (f"arn:aws:iam::{ACCOUNT}:group/admins", None),
        ("not an arn", None),
    ],
)
def test_principal_keys(arn: str, key: str | None) -> None:
    assert principal_key(arn) == key
