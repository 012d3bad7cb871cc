"""``hyperpod_cdk.rest_api`` in the parameters file: written only when the REST API is on, read back exactly,
and every malformed value named at once."""

from __future__ import annotations

import dataclasses

import pytest

from training_runtime.groups import GroupSpec
from training_runtime.params import ParametersError, ProvisioningParameters
from training_runtime.rest.params import RestApiParams

ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:hyperpod-rest-key-AbCdEf"


def base() -> ProvisioningParameters:
    return ProvisioningParameters(
        cluster_name="c",
        mode="api-driven",
        groups=(GroupSpec("ctl", "controller", "ml.m5.large"), GroupSpec("cpu", "compute", "ml.c5.4xlarge")),
    )


def test_off_writes_no_key_and_reads_as_none() -> None:
    plain = base()
    assert "rest_api" not in plain.to_json()["hyperpod_cdk"]
    assert ProvisioningParameters.from_json(plain.to_json()).rest_api is None


def test_the_key_round_trips_with_the_shared_contracts_shape() -> None:
    on = dataclasses.replace(base(), rest_api=RestApiParams(ARN, "us-east-1"))
    assert on.to_json()["hyperpod_cdk"]["rest_api"] == {
        "key_secret_arn": ARN,
        "region": "us-east-1",
        "port": 6820,
        "token_lifetime_s": 900,
    }
    assert ProvisioningParameters.from_json(on.to_json()) == on
    custom = dataclasses.replace(base(), rest_api=RestApiParams(ARN, "eu-west-1", port=8443, token_lifetime_s=300))
    assert ProvisioningParameters.from_json(custom.to_json()).rest_api == RestApiParams(ARN, "eu-west-1", 8443, 300)


def test_a_synthesized_files_marker_or_a_name_is_taken_as_the_secret() -> None:
    """At synth the ARN is a CloudFormation value (a marker in the file); GetSecretValue takes a name too."""
    for secret in ("<<marker:0xbaba:4>>", "ml-cluster-rest-api-key"):
        data = base().to_json()
        data["hyperpod_cdk"]["rest_api"] = {"key_secret_arn": secret, "region": "us-east-1"}
        api = ProvisioningParameters.from_json(data).rest_api
        assert api is not None and api.key_secret_arn == secret


def test_defaults_apply_when_port_and_lifetime_are_absent() -> None:
    data = base().to_json()
    data["hyperpod_cdk"]["rest_api"] = {"key_secret_arn": ARN, "region": "us-east-1"}
    assert ProvisioningParameters.from_json(data).rest_api == RestApiParams(ARN, "us-east-1", 6820, 900)


@pytest.mark.parametrize(
    "raw, count, fragment",
    [
        ("on", 1, "rest_api: got 'on'; expected an object"),
        (
            {"key_secret_arn": "arn:aws:s3:::bucket", "region": "us-east-1"},
            1,
            "key_secret_arn: got 'arn:aws:s3:::bucket'",
        ),
        ({"key_secret_arn": "", "region": "us-east-1"}, 1, "key_secret_arn: got ''"),
        ({"key_secret_arn": "a secret", "region": "us-east-1"}, 1, "key_secret_arn: got 'a secret'"),
        ({"key_secret_arn": ARN, "region": ""}, 1, "region: got ''"),
        ({"key_secret_arn": ARN, "region": "r", "port": 0}, 1, "port: got 0; expected a TCP port"),
        ({"key_secret_arn": ARN, "region": "r", "port": True}, 1, "port: got True"),
        ({"key_secret_arn": ARN, "region": "r", "port": 70000}, 1, "port: got 70000"),
        ({"key_secret_arn": ARN, "region": "r", "token_lifetime_s": 0}, 1, "token_lifetime_s: got 0"),
        ({"key_secret_arn": ARN, "region": "r", "key": "s3cr3t"}, 1, "rest_api.key: unknown key"),
        ({"key_secret_arn": 3, "region": None, "port": "x", "token_lifetime_s": -1}, 4, "key_secret_arn: got 3"),
    ],
)
def test_malformed_values_are_each_named(raw: object, count: int, fragment: str) -> None:
    data = base().to_json()
    data["hyperpod_cdk"]["rest_api"] = raw
    with pytest.raises(ParametersError) as error:
        ProvisioningParameters.from_json(data)
    problems = [p for p in error.value.problems if "rest_api" in p]
    assert len(problems) == count, problems
    assert any(fragment in p for p in problems), problems
