"""The config's ``rest_api:`` section: Slurm's REST API behind an internal TLS load balancer, tokens from IAM.

What each field builds is in docs/rest-api.md; the rules are :mod:`hyperpod_cdk.rules.rest_api`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from training_runtime.rest.params import DEFAULT_PORT, DEFAULT_TOKEN_LIFETIME_S

__all__ = ["DEFAULT_PORT", "DEFAULT_TOKEN_LIFETIME_S", "KEY_LENGTH", "MAX_TOKEN_LIFETIME_S", "RestApiConfig"]
MAX_TOKEN_LIFETIME_S = 3600
"""The longest lifetime a config may ask for (the minting function caps it too)."""
KEY_LENGTH = 64
"""The signing key: 64 characters Secrets Manager generates (letters and digits, about 381 bits; at creation and by
``hyperpod-cdk rest rotate-key``), whose UTF-8 bytes are the HS256 key (SchedMD's jwt.html example key is 32 random
bytes)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class RestApiIdentity(_Model):
    """One IAM role or user and the Slurm user its tokens are for."""

    principal_arn: str
    """The role's or user's ARN, ``arn:aws:iam::<account>:role/<name>`` (a path may stand before the name); every
    session of the role is mapped too."""
    slurm_user: str
    """The Slurm (POSIX) user the tokens name; one of ``users`` when the config declares users."""


class RestApiConfig(_Model):
    """Slurm's REST API (slurmrestd) on the controller, reached through an internal Network Load Balancer with a TLS
    listener, and a minting function that gives an IAM caller a short-lived token for its Slurm user
    (docs/rest-api.md). Default: none (off)."""

    enabled: bool = True
    """Build it. ``false`` keeps the section but builds nothing."""
    port: int = DEFAULT_PORT
    """The TCP port of the load balancer's listener and of slurmrestd's TLS endpoint on the controller."""
    certificate_arn: str | None = None
    """The ACM certificate of the listener (``arn:aws:acm:<region>:<account>:certificate/<id>``), in the cluster's
    Region. Required."""
    domain_name: str | None = None
    """The name on the certificate that clients verify TLS against (they connect to the load balancer's DNS name,
    or to this name once you point it at the load balancer). Required."""
    allowed_cidrs: list[str] = Field(default_factory=list)
    """IPv4 CIDRs that may reach the load balancer (e.g. the VPC's, a VPN's). 0.0.0.0/0 is refused."""
    allowed_security_groups: list[str] = Field(default_factory=list)
    """Security groups (``sg-...``) whose members may reach the load balancer (e.g. a notebook's)."""
    token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S
    """Seconds a minted token is valid: 60 to 3600. Default: 900."""
    identities: list[RestApiIdentity] = Field(default_factory=list)
    """Which IAM role or user gets tokens for which Slurm user."""
    principal_tag: str | None = None
    """An IAM tag key: a caller whose role or user (in the cluster's account) carries it gets tokens for the Slurm
    user its value names (one of ``users`` when the config declares users). Whoever may tag roles then chooses
    Slurm users: keep ``iam:TagRole`` to administrators. Default: none, ``identities`` only."""
