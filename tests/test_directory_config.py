"""The directory on the construct's side (issue #41): what the nodes' parameters file carries (the secret's ARN,
never a password), and what every group's execution role may read (that one secret, its key only through Secrets
Manager, the CA certificate's one object), each a named assertion on the synthesized template."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from hyperpod_cdk import TrainingClusterStack
from hyperpod_cdk.core.config import parse_config, parse_model
from hyperpod_cdk.core.deployment import deployment
from iam_support import group_roles, role_statements, statements_with
from support import fast_app

REGION, ACCOUNT = "us-west-2", "111122223333"
SECRET = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:hpc-ldap-bind-AbCdEf"
KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
DIRECTORY = {
    "uris": ["ldaps://corp.example.com"],
    "search_base": "dc=corp,dc=example,dc=com",
    "bind_dn": "cn=hpc-reader,ou=Users,ou=CORP,dc=corp,dc=example,dc=com",
    "bind_password_secret_arn": SECRET,
    "bind_password_kms_key_arn": KEY,
    "ca_certificate": "s3://corp-pki/ad-root-ca.pem",
    "schema": "ad",
}
CONFIG = {
    "cluster_name": "dir",
    "instance_groups": [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
        {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 1},
        {"name": "cpu", "role": "compute", "instance_type": "ml.c5.xlarge", "count": 2},
    ],
    "directory": DIRECTORY,
}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    stack = TrainingClusterStack(
        fast_app(), "dir", config=parse_model(CONFIG), env=cdk.Environment(account=ACCOUNT, region=REGION)
    )
    return Template.from_stack(stack).to_json()


def test_the_parameters_file_names_the_secret_and_holds_no_password() -> None:
    text = deployment(parse_config(CONFIG, region=REGION)).parameters.dumps()
    assert json.loads(text)["hyperpod_cdk"]["directory"]["bind_password_secret_arn"] == SECRET
    assert 'password"' not in text.replace("bind_password_secret_arn", "").replace("bind_password_kms_key_arn", "")


@pytest.mark.parametrize("group", ["controller", "login", "cpu"])
def test_every_groups_role_reads_the_bind_password_secret_and_no_other(template: dict[str, Any], group: str) -> None:
    role = group_roles(template)[group]
    (read,) = statements_with(template, role, "secretsmanager:GetSecretValue")
    assert read["Resource"] == SECRET and read["Action"] == "secretsmanager:GetSecretValue"
    secrets = [s for s in role_statements(template, role) if "secretsmanager" in json.dumps(s.get("Action"))]
    assert secrets == [read], "no other Secrets Manager action, no wildcard"


@pytest.mark.parametrize("group", ["controller", "login", "cpu"])
def test_the_key_decrypts_only_through_secrets_manager_and_the_ca_is_one_object(
    template: dict[str, Any], group: str
) -> None:
    role = group_roles(template)[group]
    (decrypt,) = statements_with(template, role, "kms:Decrypt")
    assert decrypt["Resource"] == KEY
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com"}}
    (ca,) = statements_with(template, role, "s3:GetObject")
    assert ca["Resource"] == "arn:aws:s3:::corp-pki/ad-root-ca.pem"


def test_without_a_directory_no_role_reads_a_directory_secret() -> None:
    plain = {k: v for k, v in CONFIG.items() if k != "directory"}
    stack = TrainingClusterStack(fast_app(), "plain", config=parse_model(plain), env=cdk.Environment(region=REGION))
    assert "ReadDirectoryBindPassword" not in json.dumps(Template.from_stack(stack).to_json())


def test_a_partial_secret_arn_is_granted_with_the_six_random_characters() -> None:
    partial = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:hpc-ldap-bind"
    data = {**CONFIG, "directory": {**DIRECTORY, "bind_password_secret_arn": partial}}
    stack = TrainingClusterStack(fast_app(), "partial", config=parse_model(data), env=cdk.Environment(region=REGION))
    found = Template.from_stack(stack).to_json()
    (read,) = statements_with(found, group_roles(found)["cpu"], "secretsmanager:GetSecretValue")
    assert read["Resource"] == partial + "-??????"
