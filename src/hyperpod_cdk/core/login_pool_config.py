"""The config's ``login_pool:`` section: the login nodes behind one Network Load Balancer (SSH on TCP 22), sharing
one set of SSH host keys kept in Secrets Manager, so users reach every login node by one name without a host-key
warning.

What each field builds is in docs/login-pool.md; the rules are :mod:`hyperpod_cdk.rules.login_pool`; the construct is
:class:`hyperpod_cdk.constructs.login_pool.LoginPool`.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from training_runtime.login_pool.params import DEFAULT_HEALTH_PORT

__all__ = ["DEFAULT_HEALTH_PORT", "INTERNAL", "INTERNET_FACING", "MAX_DRAIN_GRACE_S", "LoginPoolConfig"]

INTERNAL: Final = "internal"
INTERNET_FACING: Final = "internet-facing"
MAX_DRAIN_GRACE_S = 360000
"""``target_health_state.unhealthy.draining_interval_seconds``: "The range is 0-360000 seconds. The default value is
0 seconds" (Elastic Load Balancing API reference, TargetGroupAttribute)."""


class LoginPoolConfig(BaseModel):
    """The login group's nodes behind one Network Load Balancer: users ``ssh`` to one name, every login node shows
    the same host key, a drained node takes no new session (docs/login-pool.md). Needs a login group. Default:
    none (off)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    scheme: Literal["internal", "internet-facing"] = INTERNAL
    """``internal``: the load balancer has private addresses only, in the nodes' subnet (reach it over the VPC, a
    VPN, Direct Connect). ``internet-facing``: public addresses, in the new VPC's public subnet; then
    ``allowed_cidrs`` is required. Changing it replaces the load balancer (a new DNS name)."""
    allowed_cidrs: list[str] = Field(default_factory=list)
    """IPv4 CIDRs that may open SSH sessions through the load balancer. 0.0.0.0/0 is refused. Default (internal,
    with no ``allowed_security_groups``): the VPC's CIDR."""
    allowed_security_groups: list[str] = Field(default_factory=list)
    """Security groups (``sg-...``) whose members may open SSH sessions through the load balancer (e.g. a bastion's
    or a workstation fleet's)."""
    domain_name: str | None = None
    """The DNS name users ssh to (``ssh-config`` writes it), which you point at the load balancer's DNS name (a
    CNAME or alias record: no Route 53 record is made). Default: the load balancer's own DNS name."""
    health_port: int = DEFAULT_HEALTH_PORT
    """The TCP port of each login node's health endpoint (HTTP ``GET /health``: 200 while sshd answers and the node
    is not drained, 503 otherwise), which the target group checks. Not 22."""
    drain_grace_s: int | None = None
    """Seconds a login node that fails its health check (drained, or sshd down) keeps its open sessions in
    ``unhealthy.draining`` before the load balancer calls it ``unhealthy``: the target group's
    ``target_health_state.unhealthy.draining_interval_seconds``, 0 to 360000. New sessions go elsewhere at once
    either way. Default: AWS's default (0)."""
