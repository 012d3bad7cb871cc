"""The stack's values in the parameters file, as a node reads them (:mod:`training_runtime.stack_values`): the REST
API's key secret and the login pool's host-keys secret are Secrets Manager ARNs (or a synthesized file's marker),
their ports TCP ports; every problem is reported with its path, none is silently defaulted."""

from __future__ import annotations

from typing import Any

import pytest

from training_runtime.login_pool.params import LoginPoolParams, parse_login_pool
from training_runtime.rest.params import RestApiParams, parse_rest_api
from training_runtime.stack_values import is_port, secret_arn_problem

ARN = "arn:aws:secretsmanager:us-west-2:111122223333:secret:cluster-key-AbCdEf"


@pytest.mark.parametrize(
    "arn",
    [
        ARN,
        "arn:aws-cn:secretsmanager:cn-north-1:111122223333:secret:k-AbCdEf",
        "${Token[TOKEN.123]}",  # a synthesized file's marker: resolved at deploy
    ],
)
def test_a_secret_arn_or_a_stack_marker_is_taken(arn: str) -> None:
    assert secret_arn_problem("x.arn", arn) is None


@pytest.mark.parametrize(
    "arn",
    [
        "",
        "   ",
        None,
        7,
        ARN + " ",
        "arn:aws:s3:::bucket/key",  # an ARN, not a secret's
        "arn:aws:secretsmanager:us-west-2:1111:secret:short-account",
    ],
)
def test_anything_else_is_a_problem_naming_the_path_and_the_fix(arn: Any) -> None:
    problem = secret_arn_problem("hyperpod_cdk.rest_api.key_secret_arn", arn)
    assert problem is not None
    assert problem.startswith("hyperpod_cdk.rest_api.key_secret_arn: got ") and "Fix: regenerate" in problem


@pytest.mark.parametrize(("value", "ok"), [(1, True), (65535, True), (0, False), (65536, False), (True, False)])
def test_a_port_is_an_int_from_1_to_65535_and_not_a_bool(value: Any, ok: bool) -> None:
    assert is_port(value) is ok


def test_both_sections_round_trip_and_report_every_problem_at_once() -> None:
    problems: list[str] = []
    rest = RestApiParams(ARN, "us-west-2", port=8443)
    pool = LoginPoolParams(ARN, "us-west-2", health_port=2300)
    assert parse_rest_api(rest.to_json(), "r", problems) == rest
    assert parse_login_pool(pool.to_json(), "p", problems) == pool
    assert problems == []
    bad_rest = {"key_secret_arn": "arn:aws:s3:::b/k", "region": "us-west-2", "port": True}
    assert parse_rest_api(bad_rest, "r", problems) is None
    bad_pool = {"host_keys_secret_arn": ARN + " x", "region": "", "health_port": 22}
    assert parse_login_pool(bad_pool, "p", problems) is None
    assert [p.split(":")[0] for p in problems] == [
        "r.key_secret_arn",
        "r.port",
        "p.host_keys_secret_arn",
        "p.region",
        "p.health_port",
    ]
