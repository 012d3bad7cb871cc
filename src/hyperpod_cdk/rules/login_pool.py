"""Rules on the ``login_pool`` section: the login nodes behind one Network Load Balancer with shared host keys
(built by ``hyperpod_cdk.constructs.login_pool``; docs/login-pool.md). Every problem of the section is reported at
once."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.core.login_pool_config import INTERNET_FACING, MAX_DRAIN_GRACE_S, LoginPoolConfig
from hyperpod_cdk.model import NodeRole
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.rest_api import DOMAIN, SLURM_PORTS, caller_problems
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

rule = REGISTRY.rule

DOC = "docs/login-pool.md"
SSH_PORT = 22
NLB_GUIDE = "Network Load Balancers guide"


def _at(view: ClusterView, field: str) -> str:
    return view.path("login_pool", field)


def _on(view: ClusterView) -> LoginPoolConfig | None:
    pool: LoginPoolConfig | None = view.login_pool
    return pool


@rule("LOGIN-POOL-GROUP", "login_pool", "login_pool", needs=("instance_groups",), source=DOC)
def login_group(view: ClusterView) -> Iterator[Problem]:
    """The pool's targets are the login group's nodes: the config has a login group (at most one, GRP-LOGIN)."""
    if _on(view) is None:
        return
    if not any(g.role == NodeRole.LOGIN for g in view.groups):
        yield Problem(
            view.path("login_pool"),
            "needs a login group: the load balancer sends SSH sessions to the login group's nodes, and the config "
            "has none",
            fix="add an instance group with role: login (count 2 or more to spread sessions), or remove login_pool",
        )


@rule("LOGIN-POOL-CALLERS", "login_pool", "login_pool.{allowed_cidrs,allowed_security_groups}", source=DOC)
def callers(view: ClusterView) -> Iterator[Problem]:
    """Who may open SSH sessions: an allow-list when internet-facing, never every address, IPv4 CIDRs, valid
    security group ids."""
    pool = _on(view)
    if pool is None:
        return
    public = pool.scheme == INTERNET_FACING
    if public and not pool.allowed_cidrs:
        yield Problem(
            _at(view, "allowed_cidrs"),
            "none: an internet-facing load balancer needs the list of networks that may ssh to it (a security "
            "group admits only addresses inside the VPC)",
            fix="give your offices' or VPN's public CIDRs, or keep scheme: internal",
        )
    existing_vpc = view.network is not None and view.network.vpc_id is not None
    if not public and existing_vpc and not pool.allowed_cidrs and not pool.allowed_security_groups:
        yield Problem(
            _at(view, "allowed_cidrs"),
            "none: an internal pool admits the VPC's CIDR by default, and hyperpod-cdk does not know the CIDR of an "
            "existing VPC (network.vpc_id)",
            fix="give the CIDRs your users connect from (the VPC's, a VPN's), or their security groups",
        )
    yield from caller_problems(
        view,
        "login_pool",
        pool.allowed_cidrs,
        pool.allowed_security_groups,
        everyone="sshd on the login nodes would face every scanner on the network (internet-facing: the whole "
        "internet; internal: anything routed into the VPC)",
        example="203.0.113.0/24",
    )


@rule("LOGIN-POOL-PUBLIC-SUBNET", "login_pool", "login_pool.scheme", needs=("network",), source=NLB_GUIDE)
def public_subnet(view: ClusterView) -> Iterator[Problem]:
    """An internet-facing load balancer lives in a public subnet: hyperpod-cdk knows one only in the VPC it builds."""
    pool = _on(view)
    if pool is None or pool.scheme != INTERNET_FACING:
        return
    if view.network is not None and view.network.vpc_id is not None:
        yield Problem(
            _at(view, "scheme"),
            "internet-facing needs a public subnet (a route to an internet gateway), and hyperpod-cdk knows one only "
            "in the VPC it builds: network.vpc_id names an existing VPC",
            got=pool.scheme,
            fix="keep scheme: internal and reach the pool over your VPN or Direct Connect, or let hyperpod-cdk build "
            "the VPC (remove network.vpc_id and network.subnet_id)",
        )


@rule("LOGIN-POOL-HEALTH-PORT", "login_pool", "login_pool.health_port", source=DOC)
def health_port(view: ClusterView) -> Iterator[Problem]:
    """The health endpoint's port is an unprivileged TCP port that is neither sshd's nor a Slurm daemon's."""
    pool = _on(view)
    if pool is None or not view.concrete(pool.health_port):
        return
    port = pool.health_port
    if not 1024 <= port <= 65535:
        yield Problem(
            _at(view, "health_port"),
            "expected a TCP port from 1024 to 65535 (not sshd's 22)",
            got=port,
            fix="keep the default 2223",
        )
    elif port in SLURM_PORTS:
        yield Problem(_at(view, "health_port"), f"is {SLURM_PORTS[port]}'s port", got=port, fix="keep the default 2223")


@rule("LOGIN-POOL-DOMAIN", "login_pool", "login_pool.domain_name", source=DOC)
def domain(view: ClusterView) -> Iterator[Problem]:
    """The name users ssh to is a DNS name."""
    pool = _on(view)
    name = pool.domain_name if pool is not None else None
    if name is not None and view.concrete(name) and (name.startswith("*.") or not DOMAIN.fullmatch(name)):
        yield Problem(_at(view, "domain_name"), "expected a DNS name such as login.example.com", got=name)


@rule(
    "LOGIN-POOL-DRAIN",
    "login_pool",
    "login_pool.drain_grace_s",
    source="Elastic Load Balancing API reference, TargetGroupAttribute",
)
def drain(view: ClusterView) -> Iterator[Problem]:
    """The drain grace is the target group's unhealthy draining interval: "The range is 0-360000 seconds"."""
    pool = _on(view)
    value = pool.drain_grace_s if pool is not None else None
    if value is not None and view.concrete(value) and not 0 <= value <= MAX_DRAIN_GRACE_S:
        yield Problem(
            _at(view, "drain_grace_s"),
            f"expected 0 to {MAX_DRAIN_GRACE_S} seconds (the target group's unhealthy draining interval)",
            got=value,
        )
