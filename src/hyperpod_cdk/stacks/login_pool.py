"""The config's ``login_pool`` as a :class:`~hyperpod_cdk.constructs.login_pool.LoginPool` and the stack's outputs
that ``hyperpod-cdk ssh-config`` reads."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from hyperpod_cdk.constructs.interfaces import NodeNetwork
from hyperpod_cdk.constructs.login_pool import LoginPool
from hyperpod_cdk.core import stack_outputs as out
from hyperpod_cdk.core.config import ClusterConfig
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.core.login_pool_config import INTERNET_FACING

PUBLISHED_REFUSAL = (
    "login_pool: a published template's parameters file is fixed when it is published, and the pool's host keys are "
    "a secret each launch creates (its ARN is known only then). Fix: remove login_pool from the published config; "
    "deploy the cluster with cdk deploy to have it"
)


def login_pool_of(
    scope: Construct, config: ClusterConfig, network: NodeNetwork, *, published: bool, source: str
) -> LoginPool | None:
    """The login pool ``config.login_pool`` asks for (None when off), in ``scope`` (the rules checked the section)."""
    pool = config.login_pool
    if pool is None:
        return None
    if published:
        raise_if_any(source, [PUBLISHED_REFUSAL])
    users = [
        ec2.SecurityGroup.from_security_group_id(scope, f"LoginPoolUsers{index}", group, mutable=False)
        for index, group in enumerate(pool.allowed_security_groups)
    ]
    return LoginPool(
        scope,
        "LoginPool",
        network=network,
        internet_facing=pool.scheme == INTERNET_FACING,
        allowed_cidrs=pool.allowed_cidrs,
        allowed_security_groups=users,
        host_name=pool.domain_name,
        health_port=pool.health_port,
        drain_grace_s=pool.drain_grace_s,
    )


def login_pool_outputs(pool: LoginPool | None) -> dict[str, tuple[str, str]]:
    """The login pool's stack outputs (none without it)."""
    if pool is None:
        return {}
    return {
        out.LOGIN_POOL_HOST_NAME: (pool.host_name, "ssh here: the login pool's name (hyperpod-cdk ssh-config)"),
        out.LOGIN_POOL_LOAD_BALANCER: (
            pool.load_balancer.load_balancer_dns_name,
            "The login pool's load balancer (point the pool's domain name at it)",
        ),
        out.LOGIN_POOL_HOST_KEYS_SECRET: (pool.host_keys.secret_arn, "The login pool's SSH host keys (retained)"),
    }
