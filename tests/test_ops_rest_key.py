"""``hyperpod-cdk rest rotate-key``: a new AWSCURRENT version Secrets Manager generated (moto), the controller's
refresh run through an SSM session (the command it is given is checked), the key never printed."""

from __future__ import annotations

import json

import boto3
import pytest

from hyperpod_cdk.aws.session import make_session
from hyperpod_cdk.core import stack_outputs as out
from hyperpod_cdk.ops.context import Captured
from ops_support import MotoCluster, Operator, aws_env, moto_url, stack_with_outputs  # noqa: F401

OLD = "o" * 64


@pytest.fixture
def secret(aws_env: str) -> str:  # noqa: F811
    MotoCluster("ml", {"controller": ("ml.m5.xlarge", 1, "Controller"), "workers": ("ml.c5.xlarge", 1, None)}).create()
    arn = boto3.client("secretsmanager", region_name="us-west-2").create_secret(Name="key", SecretString=OLD)["ARN"]
    stack_with_outputs("hyperpod-ml", {out.CLUSTER_NAME: "ml", out.REST_API_KEY_SECRET: arn})
    return arn


def controller_says(code: int) -> Operator:
    line = json.dumps({"event": "key", "result": "rotated"})
    return Operator(
        ssm_command=lambda argv: Captured(0, f"### hyperpod-cdk begin\n{line}\n### hyperpod-cdk exit {code}\n", "")
    )


def current(arn: str) -> str:
    client = boto3.client("secretsmanager", region_name="us-west-2")
    return str(client.get_secret_value(SecretId=arn)["SecretString"])


def test_a_new_generated_key_is_current_and_the_controller_loads_it(secret: str) -> None:
    operator = controller_says(0)
    result = operator("rest", "rotate-key", "ml", "--json")
    assert result.code == 0, result.err
    key = current(secret)
    assert key != OLD and len(key) == 64 and key.isalnum()
    assert key not in result.out + result.err  # never printed
    assert result.json()["controller"] == {"event": "key", "result": "rotated"}
    (argv,) = operator.captured
    assert "/opt/hyperpod-cdk/bin/rest-key-refresh" in " ".join(argv) and key not in " ".join(argv)
    previous = boto3.client("secretsmanager", region_name="us-west-2").get_secret_value(
        SecretId=secret, VersionStage="AWSPREVIOUS"
    )
    assert previous["SecretString"] == OLD


def test_a_failed_refresh_says_the_key_rotated_and_exits_1(secret: str) -> None:
    result = controller_says(2)("rest", "rotate-key", "ml")
    assert result.code == 1 and "was rotated" in result.err and current(secret) != OLD


def test_dry_run_and_no_refresh(secret: str) -> None:
    operator = Operator()
    assert operator("rest", "rotate-key", "ml", "--dry-run").code == 0 and current(secret) == OLD
    assert operator("rest", "rotate-key", "ml", "--no-refresh").code == 0 and current(secret) != OLD
    assert operator.captured == []


def test_a_stack_without_the_rest_api_exits_3(aws_env: str) -> None:  # noqa: F811
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": {"ClusterName": {"Value": "x"}}}
    cloudformation = make_session(None, None).client("cloudformation")
    cloudformation.create_stack(StackName="hyperpod-x", TemplateBody=json.dumps(template))
    assert Operator()("rest", "rotate-key", "x").code == 3
