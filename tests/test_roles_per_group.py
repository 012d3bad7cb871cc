"""A role per instance group (security review 2026-12-04, H1 and M5), each property a named assertion on the
synthesized template: what only the controller's role may do, what every role has, and the conditions on the ENI
and KMS grants that AWS's own examples use (docs/execution-roles.md)."""

from __future__ import annotations

import json
import warnings
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from builders import CONTROLLER, WORKERS, cluster_stack
from hyperpod_cdk import InstanceGroup, NodeRole, TrainingClusterStack
from hyperpod_cdk.constructs.execution_role import ENI_ACTIONS, VOLUME_GRANT_OPERATIONS
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.model import OverrideVpc
from iam_support import allowed_actions, group_roles, mentions, resources, role_statements, statements_with
from support import fast_app

REGION = "us-west-2"
ACCOUNT = "111122223333"
SECRET = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:slurm-db-AbCdEf"
KEYS = {g: f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{n}234abcd-12ab-34cd-56ef-1234567890ab" for n, g in enumerate("clg")}
CONTROLLER_KEY, LOGIN_KEY, GPU_KEY = KEYS["c"], KEYS["l"], KEYS["g"]
SHARED_ROLE_ID = "ClusterExecutionRole766E14D2"
"""The logical ID of the one role every group shared before roles per group (tests/snapshots of main 9211ce2): the
controller's role keeps it, so a deployed controller group's ExecutionRole does not change."""
SCALER_ACTIONS = {"sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes", "sagemaker:AddTags"}
AWS_GRANT_OPERATIONS = [
    "CreateGrant",
    "Decrypt",
    "DescribeKey",
    "GenerateDataKeyWithoutPlaintext",
    "ReEncryptTo",
    "ReEncryptFrom",
    "RetireGrant",
]
"""AWS's HyperPod autoscaling role example, written out (sagemaker-hyperpod-eks-autoscaling-iam)."""


def config(**extra: Any) -> dict[str, Any]:
    """Every group with its own volume key, a scaled compute group, an external accounting database."""
    return {
        "cluster_name": "roles",
        "node_provisioning_mode": "continuous",
        "instance_groups": [
            {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1,
             "volume_kms_key_arn": CONTROLLER_KEY},
            {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 1,
             "volume_kms_key_arn": LOGIN_KEY},
            {"name": "gpu", "instance_type": "ml.c5.xlarge", "count": 1, "scaling": {"min": 0, "max": 4},
             "volume_kms_key_arn": GPU_KEY, **extra},
        ],
        "runtime": {
            "accounting": {"enabled": True, "database": "external", "host": "acct.example.com",
                           "password_secret_arn": SECRET}
        },
    }  # fmt: skip


def synth(data: dict[str, Any]) -> dict[str, Any]:
    stack = TrainingClusterStack(
        fast_app(), "roles", config=parse_model(data), env=cdk.Environment(account=ACCOUNT, region=REGION)
    )
    return Template.from_stack(stack).to_json()


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return synth(config())


@pytest.fixture(scope="module")
def roles(template: dict[str, Any]) -> dict[str, str]:
    return group_roles(template)


# --- one role per group ----------------------------------------------------------------------------------------


def test_each_group_assumes_a_role_of_its_own(roles: dict[str, str]) -> None:
    assert len(set(roles.values())) == 3, roles


def test_the_controllers_role_keeps_the_shared_roles_logical_id(roles: dict[str, str]) -> None:
    assert roles["controller"] == SHARED_ROLE_ID
    assert SHARED_ROLE_ID not in (roles["login"], roles["gpu"])


def test_a_group_set_to_controller_assumes_the_controllers_role() -> None:
    shared = group_roles(synth(config(execution_role="controller")))
    assert shared["gpu"] == shared["controller"] == SHARED_ROLE_ID
    assert shared["login"] != SHARED_ROLE_ID


# --- only the controller's role: the scaler and the accounting secret -----------------------------------------


@pytest.mark.parametrize("group", ["login", "gpu"])
def test_the_login_and_compute_roles_cannot_add_delete_or_tag_the_clusters_nodes(
    template: dict[str, Any], roles: dict[str, str], group: str
) -> None:
    assert allowed_actions(template, roles[group]) & SCALER_ACTIONS == set()
    assert not any(a.startswith("sagemaker:") for a in allowed_actions(template, roles[group]))


def test_only_the_controllers_role_carries_the_scalers_policy(template: dict[str, Any], roles: dict[str, str]) -> None:
    assert allowed_actions(template, roles["controller"]) >= SCALER_ACTIONS
    (scaler,) = [
        r for k, r in resources(template).items() if r["Type"] == "AWS::IAM::Policy" and k.startswith("ClusterScaler")
    ]
    assert scaler["Properties"]["Roles"] == [{"Ref": roles["controller"]}]


def test_only_the_controllers_role_may_write_the_heartbeat_tag(template: dict[str, Any], roles: dict[str, str]) -> None:
    """The scaler's heartbeat tag (which ``scale`` and ``status`` read) can be written by no login or compute node:
    AddTags is on the controller's role alone, and only for the heartbeat's key."""
    tagging = {group: statements_with(template, role, "sagemaker:AddTags") for group, role in roles.items()}
    assert tagging["login"] == tagging["gpu"] == []
    (statement,) = tagging["controller"]
    assert statement["Condition"] == {"ForAllValues:StringEquals": {"aws:TagKeys": ["hyperpod-cdk:scaler"]}}


@pytest.mark.parametrize("group", ["login", "gpu"])
def test_the_login_and_compute_roles_cannot_read_the_accounting_secret(
    template: dict[str, Any], roles: dict[str, str], group: str
) -> None:
    assert not any(mentions(s, SECRET) for s in role_statements(template, roles[group]))
    assert "secretsmanager:GetSecretValue" not in allowed_actions(template, roles[group])


def test_the_controllers_role_reads_the_accounting_secret(template: dict[str, Any], roles: dict[str, str]) -> None:
    (statement,) = statements_with(template, roles["controller"], "secretsmanager:GetSecretValue")
    assert statement["Resource"] == SECRET


# --- what every node needs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("group", ["controller", "login", "gpu"])
def test_every_role_reads_the_lifecycle_prefix_writes_metrics_and_has_the_managed_policy(
    template: dict[str, Any], roles: dict[str, str], group: str
) -> None:
    (read,) = statements_with(template, roles[group], "s3:GetObject*")
    assert "/lifecycle/*" in json.dumps(read["Resource"])
    assert "aps:RemoteWrite" in allowed_actions(template, roles[group])
    managed = json.dumps(resources(template)[roles[group]]["Properties"]["ManagedPolicyArns"])
    assert "AmazonSageMakerClusterInstanceRolePolicy" in managed


# --- M5: the ENI and KMS grants carry AWS's conditions ----------------------------------------------------------


def test_each_role_may_create_grants_on_its_own_groups_volume_key_only(
    template: dict[str, Any], roles: dict[str, str]
) -> None:
    keys = {
        group: {s["Resource"] for s in role_statements(template, role) if mentions(s, "kms:")}
        for group, role in roles.items()
    }
    assert keys == {"controller": {CONTROLLER_KEY}, "login": {LOGIN_KEY}, "gpu": {GPU_KEY}}


@pytest.mark.parametrize("group", ["controller", "login", "gpu"])
def test_create_grant_carries_the_three_kms_conditions(
    template: dict[str, Any], roles: dict[str, str], group: str
) -> None:
    (grant,) = statements_with(template, roles[group], "kms:CreateGrant")
    assert grant["Action"] == "kms:CreateGrant"  # alone: DescribeKey has its own statement
    assert grant["Condition"] == {
        "StringEquals": {"kms:ViaService": f"sagemaker.{REGION}.amazonaws.com"},
        "Bool": {"kms:GrantIsForAWSResource": "true"},
        "ForAllValues:StringEquals": {"kms:GrantOperations": AWS_GRANT_OPERATIONS},
    }
    (describe,) = statements_with(template, roles[group], "kms:DescribeKey")
    assert describe["Condition"] == {"StringEquals": {"kms:ViaService": f"sagemaker.{REGION}.amazonaws.com"}}
    assert list(VOLUME_GRANT_OPERATIONS) == AWS_GRANT_OPERATIONS


@pytest.mark.parametrize("group", ["controller", "login", "gpu"])
def test_the_eni_actions_are_allowed_only_on_interfaces_in_the_node_subnets(
    template: dict[str, Any], roles: dict[str, str], group: str
) -> None:
    on_enis = [s for s in role_statements(template, roles[group]) if set(ENI_ACTIONS) & set(_actions(s))]
    (statement,) = on_enis
    assert {"ec2:DeleteNetworkInterface", "ec2:DetachNetworkInterface", "ec2:CreateNetworkInterfacePermission"} <= set(
        statement["Action"]
    )
    (subnet,) = statement["Condition"]["ArnEquals"]["ec2:Subnet"]
    rendered = json.dumps(subnet)
    assert ":subnet/" in rendered and "NetworkVpcNodesSubnet" in rendered


def test_no_statement_of_any_stack_policy_allows_an_eni_action_without_the_subnet_condition(
    template: dict[str, Any],
) -> None:
    for resource in resources(template).values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            if set(ENI_ACTIONS) & set(_actions(statement)):
                assert "ec2:Subnet" in statement["Condition"]["ArnEquals"], statement


def test_a_group_with_its_own_subnets_manages_interfaces_there_and_no_other_group_does() -> None:
    own = InstanceGroup(
        name="isolated",
        instance_type="ml.c5.xlarge",
        count=1,
        override_vpc=OverrideVpc(subnet_ids=["subnet-0123456789abcdef1"], security_group_ids=["sg-0123456789abcdef1"]),
    )
    stack, _ = cluster_stack(storage=False, groups=(CONTROLLER, WORKERS, own))
    template = Template.from_stack(stack).to_json()
    roles = group_roles(template)

    def subnets(group: str) -> str:
        (statement,) = [s for s in role_statements(template, roles[group]) if s.get("Sid") == "ManageNodeInterfaces"]
        return json.dumps(statement["Condition"]["ArnEquals"]["ec2:Subnet"])

    assert "subnet-0123456789abcdef1" in subnets("isolated")
    assert "subnet-0123456789abcdef1" not in subnets("workers") and "subnet-0123456789abcdef1" not in subnets(
        "controller"
    )


# --- the construct's API for embedding ---------------------------------------------------------------------------


def test_execution_roles_by_group_controller_role_and_roles_of() -> None:
    _, cluster = cluster_stack(storage=False)
    assert set(cluster.execution_roles) == {"controller", "workers"}
    assert cluster.controller_role is cluster.execution_roles["controller"]
    assert cluster.roles_of(NodeRole.COMPUTE, NodeRole.LOGIN) == [cluster.execution_roles["workers"]]
    assert cluster.node_roles == [cluster.controller_role, cluster.execution_roles["workers"]]


def test_the_deprecated_execution_role_is_the_controllers_and_says_so() -> None:
    _, cluster = cluster_stack(storage=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        role = cluster.execution_role
    assert role is cluster.controller_role
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "execution_roles" in str(caught[0].message)


def _actions(statement: dict[str, Any]) -> list[str]:
    value = statement["Action"]
    return [value] if isinstance(value, str) else value
