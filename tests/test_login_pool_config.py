"""The config's ``login_pool`` section: its rules (every problem at once, with field paths) and what a deployment
writes under ``hyperpod_cdk.login_pool`` in the parameters file once the stack's secret exists."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_cdk.aws_data.update_policy import Kind, policy_for
from hyperpod_cdk.core.config import parse_config
from hyperpod_cdk.core.deployment import deployment
from hyperpod_cdk.core.errors import ConfigurationError
from hyperpod_cdk.core.parameters import with_resources
from training_runtime.login_pool.params import DEFAULT_HEALTH_PORT, LoginPoolParams
from training_runtime.params import ProvisioningParameters

ARN = "arn:aws:secretsmanager:us-west-2:111122223333:secret:login-host-keys-AbCdEf"
GROUPS = [
    {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
    {"name": "workers", "instance_type": "ml.c5.xlarge", "count": 2},
    {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 2},
]


def config(**pool: Any) -> dict[str, Any]:
    return {"instance_groups": GROUPS, "login_pool": pool}


def problems(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    with pytest.raises(ConfigurationError) as raised:
        parse_config(data)
    return [(p.rule, p.path, str(p)) for p in raised.value.problems]


def test_the_defaults_are_an_internal_pool_with_the_contracts_health_port() -> None:
    pool = parse_config(config()).login_pool
    assert pool is not None
    assert (pool.scheme, pool.allowed_cidrs, pool.health_port, pool.drain_grace_s) == (
        "internal",
        [],
        DEFAULT_HEALTH_PORT,
        None,
    )


def test_every_problem_of_the_section_is_reported_at_once_with_its_path() -> None:
    found = problems(
        config(
            scheme="internet-facing",
            allowed_cidrs=["0.0.0.0/0", "::/0", "2001:db8::/32", "10.0.0.1/16"],
            allowed_security_groups=["sg-12"],
            health_port=6818,
            domain_name="*.example.com",
            drain_grace_s=-1,
        )
    )
    paths = {(rule, path) for rule, path, _ in found}
    assert paths == {
        ("LOGIN-POOL-CALLERS", "login_pool.allowed_cidrs[0]"),
        ("LOGIN-POOL-CALLERS", "login_pool.allowed_cidrs[1]"),
        ("LOGIN-POOL-CALLERS", "login_pool.allowed_cidrs[2]"),
        ("LOGIN-POOL-CALLERS", "login_pool.allowed_cidrs[3]"),
        ("LOGIN-POOL-CALLERS", "login_pool.allowed_security_groups[0]"),
        ("LOGIN-POOL-HEALTH-PORT", "login_pool.health_port"),
        ("LOGIN-POOL-DOMAIN", "login_pool.domain_name"),
        ("LOGIN-POOL-DRAIN", "login_pool.drain_grace_s"),
    }
    said = {path: text for _, path, text in found}
    assert "admits every address" in said["login_pool.allowed_cidrs[0]"]
    assert "admits every address" in said["login_pool.allowed_cidrs[1]"]
    assert "ipv4" in said["login_pool.allowed_cidrs[2]"]
    assert "host bits zero" in said["login_pool.allowed_cidrs[3]"]
    assert "slurmd" in said["login_pool.health_port"]


def test_internet_facing_needs_an_allow_list_and_internal_does_not() -> None:
    assert [r for r, _, _ in problems(config(scheme="internet-facing"))] == ["LOGIN-POOL-CALLERS"]
    assert parse_config(config(scheme="internet-facing", allowed_cidrs=["203.0.113.0/24"])).login_pool is not None
    assert parse_config(config(allowed_security_groups=["sg-0123456789abcdef0"])).login_pool is not None


def test_internet_facing_in_an_existing_vpc_is_refused_with_the_way_out() -> None:
    network = {
        "vpc_id": "vpc-0123456789abcdef0",
        "subnet_id": "subnet-0123456789abcdef0",
        "availability_zone": "us-west-2a",
    }
    data = {**config(scheme="internet-facing", allowed_cidrs=["203.0.113.0/24"]), "network": network}
    found = [f for f in problems(data) if f[0] == "LOGIN-POOL-PUBLIC-SUBNET"]
    assert [(r, p) for r, p, _ in found] == [("LOGIN-POOL-PUBLIC-SUBNET", "login_pool.scheme")]
    assert "keep scheme: internal" in found[0][2]
    internal = parse_config({**config(), "network": network})
    assert internal.login_pool is not None


def test_a_pool_without_a_login_group_is_refused() -> None:
    data = {"instance_groups": GROUPS[:2], "login_pool": {}}
    assert [(r, p) for r, p, _ in problems(data)] == [("LOGIN-POOL-GROUP", "login_pool")]


@pytest.mark.parametrize("port", [1023, 65536, 22, 6817])
def test_the_health_port_is_unprivileged_and_not_a_daemons(port: int) -> None:
    assert [r for r, _, _ in problems(config(health_port=port))] == ["LOGIN-POOL-HEALTH-PORT"]


def test_the_drain_grace_is_the_target_groups_range() -> None:
    assert parse_config(config(drain_grace_s=360000)).login_pool is not None
    assert [r for r, _, _ in problems(config(drain_grace_s=360001))] == ["LOGIN-POOL-DRAIN"]


def test_update_policies_say_what_changes_in_place() -> None:
    assert policy_for("login_pool.scheme").kind is Kind.REPLACES_RESOURCE
    assert "AWS::ElasticLoadBalancingV2::LoadBalancer" in policy_for("login_pool.scheme").why
    assert policy_for("login_pool.health_port").kind is Kind.NEW_NODES_ONLY
    assert policy_for("login_pool").kind is Kind.NEW_NODES_ONLY
    for field in ("allowed_cidrs", "allowed_security_groups", "domain_name", "drain_grace_s"):
        assert policy_for(f"login_pool.{field}").kind is Kind.IN_PLACE, field


def test_a_deployment_leaves_the_secret_to_the_resources_and_says_what_to_write() -> None:
    made = deployment(parse_config(config(health_port=2300)))
    assert made.parameters.login_pool is None  # the secret's ARN is a stack resource's
    params = made.login_pool_parameters(ARN, "us-west-2")
    assert params == LoginPoolParams(ARN, "us-west-2", health_port=2300)
    written = made.with_resources(fsx_dns_name=None, fsx_mountname=None, fsx=None, metrics=None, login_pool=params)
    assert ProvisioningParameters.from_json(written.to_json()).login_pool == params
    again = with_resources(written, fsx_dns_name=None, fsx_mountname=None, fsx=None, metrics=None)
    assert again.login_pool == params


def test_no_section_means_no_pool() -> None:
    made = deployment(parse_config({}))
    assert made.login_pool_parameters(ARN, "us-west-2") is None
    assert "login_pool" not in made.parameters.to_json()["hyperpod_cdk"]
