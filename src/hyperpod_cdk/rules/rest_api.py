"""Rules on the ``rest_api`` section: Slurm's REST API behind an internal TLS load balancer, tokens from IAM
(built by ``hyperpod_cdk.constructs.rest_api``; docs/rest-api.md). Every problem of the section is reported at once."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator, Mapping, Sequence

from hyperpod_cdk.core.rest_api_config import MAX_TOKEN_LIFETIME_S, RestApiConfig
from hyperpod_cdk.rest.minter.handler import REFUSED_USERS
from hyperpod_cdk.rest.minter.identity import principal_key
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

rule = REGISTRY.rule

CERTIFICATE_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]{36}$")
"""An ACM certificate's ARN (Service Authorization Reference, AWS Certificate Manager, resource type certificate)."""
DOMAIN = re.compile(r"^(?=.{1,253}$)(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
SECURITY_GROUP = re.compile(r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
"""A name the runtime gives a cluster user (training_runtime.users), so one Slurm knows."""
TAG_KEY = re.compile(r"^[\w.:/=+\-@ ]{1,128}$")
"""IAM's tag keys: 1-128 characters, letters, digits, spaces and _.:/=+-@ (IAM User Guide, "Tagging IAM
resources", tag naming rules); ``aws:`` is reserved."""
SLURM_PORTS = {6817: "slurmctld", 6818: "slurmd", 6819: "slurmdbd"}
"""Slurm's default ports (slurm.conf SlurmctldPort, SlurmdPort; slurmdbd.conf DbdPort), taken on the controller."""
WIDEST_VPC_PREFIX = 16
"""Amazon VPC: a VPC's IPv4 CIDR block is a /16 at the widest (VPC User Guide, "VPC CIDR blocks")."""
LAMBDA_ENV_BYTES = 4096
"""Lambda quotas (docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html): function environment variables,
4 KB for all of a function's variables together."""
ENV_OVERHEAD_BYTES = 600
"""The minting function's other variables (the secret's ARN, the lifetime, the tag and their names), at most."""
DOC = "docs/rest-api.md"


def _at(view: ClusterView, field: str) -> str:
    return view.path("rest_api", field)


def _on(view: ClusterView) -> RestApiConfig | None:
    rest = view.rest_api
    return rest if rest is not None and rest.enabled else None


def declared_users(view: ClusterView) -> list[str] | None:
    """The names of the config's ``users``; None when it declares none (then any POSIX name may be mapped)."""
    names = [u.get("name") for u in view.users if isinstance(u, Mapping)]
    return [n for n in names if isinstance(n, str)] or None


@rule("REST-CERTIFICATE", "rest_api", "rest_api.{certificate_arn,domain_name}", source=DOC)
def certificate(view: ClusterView) -> Iterator[Problem]:
    """The TLS listener needs an ACM certificate and the name on it that clients verify."""
    rest = _on(view)
    if rest is None:
        return
    arn = rest.certificate_arn
    if arn is None:
        yield Problem(
            _at(view, "certificate_arn"),
            "missing: the load balancer's TLS listener needs the ACM certificate of rest_api.domain_name",
            fix="request or import one in ACM (aws acm request-certificate --domain-name NAME) and give its ARN",
        )
    elif view.concrete(arn) and not CERTIFICATE_ARN.fullmatch(arn):
        yield Problem(
            _at(view, "certificate_arn"),
            "expected an ACM certificate ARN, arn:aws:acm:<region>:<account>:certificate/<id>",
            got=arn,
            fix="copy it from aws acm list-certificates",
        )
    name = rest.domain_name
    if name is None:
        yield Problem(
            _at(view, "domain_name"),
            "missing: clients verify TLS against the name on the certificate (the load balancer's own DNS name is "
            "not on it)",
            fix="give the name the certificate is for, e.g. slurm.example.com",
        )
    elif view.concrete(name) and not DOMAIN.fullmatch(name):
        yield Problem(_at(view, "domain_name"), "expected a DNS name such as slurm.example.com", got=name)


@rule(
    "REST-PORT", "rest_api", "rest_api.port", source="slurm.conf and slurmdbd.conf (SlurmctldPort, SlurmdPort, DbdPort)"
)
def port(view: ClusterView) -> Iterator[Problem]:
    """The port is an unprivileged TCP port Slurm's own daemons do not use."""
    rest = _on(view)
    if rest is None or not view.concrete(rest.port):
        return
    if not 1024 <= rest.port <= 65535:
        yield Problem(_at(view, "port"), "expected a TCP port from 1024 to 65535", got=rest.port)
    elif rest.port in SLURM_PORTS:
        yield Problem(
            _at(view, "port"),
            f"is {SLURM_PORTS[rest.port]}'s port on the controller",
            got=rest.port,
            fix="keep the default 6820",
        )


@rule("REST-TOKEN-LIFETIME", "rest_api", "rest_api.token_lifetime_s", source=DOC)
def lifetime(view: ClusterView) -> Iterator[Problem]:
    """Tokens live a minute to an hour: a leaked token is worth little for long."""
    rest = _on(view)
    value = rest.token_lifetime_s if rest is not None else None
    if view.concrete(value) and not 60 <= value <= MAX_TOKEN_LIFETIME_S:  # type: ignore[operator]
        yield Problem(
            _at(view, "token_lifetime_s"),
            f"expected 60 to {MAX_TOKEN_LIFETIME_S} seconds",
            got=value,
            fix="keep the default 900 (15 minutes): the client mints a new token when one runs out",
        )


@rule("REST-CALLERS", "rest_api", "rest_api.{allowed_cidrs,allowed_security_groups}", source=DOC)
def callers(view: ClusterView) -> Iterator[Problem]:
    """Someone may reach the load balancer, and not everyone: no 0.0.0.0/0, valid CIDRs and security group ids."""
    rest = _on(view)
    if rest is None:
        return
    if not rest.allowed_cidrs and not rest.allowed_security_groups:
        yield Problem(
            _at(view, "allowed_cidrs"),
            "none, and no rest_api.allowed_security_groups: nothing could reach the load balancer",
            fix="give the CIDRs of the networks that call the API (the VPC's, a VPN's), or their security groups",
        )
    yield from caller_problems(
        view,
        "rest_api",
        rest.allowed_cidrs,
        rest.allowed_security_groups,
        everyone="the load balancer is internal, but anything routed into the VPC (peering, VPN, Direct Connect, a "
        "transit gateway) could then call the API",
        example="10.0.0.0/16",
    )


def caller_problems(
    view: ClusterView,
    section: str,
    cidrs: Sequence[str],
    groups: Sequence[str],
    *,
    everyone: str,
    example: str,
) -> Iterator[Problem]:
    """The checks of a load balancer's allow-list (``<section>.allowed_cidrs``, ``.allowed_security_groups``; the REST
    API's and the login pool's): IPv4 CIDRs (the load balancer's address type is ipv4, the default), none admitting
    every address (``everyone`` says what that would expose), and valid security group ids."""
    for index, cidr in enumerate(cidrs):
        where = view.path(section, f"allowed_cidrs[{index}]")
        if not view.concrete(cidr):
            continue
        try:
            network = ipaddress.ip_network(cidr)
        except ValueError:
            yield Problem(where, f"expected an IPv4 CIDR such as {example} (host bits zero)", got=cidr)
            continue
        if network.prefixlen == 0:
            yield Problem(where, "admits every address: " + everyone, got=cidr, fix="give the callers' own CIDRs")
        elif network.version == 6:
            yield Problem(
                where,
                "is IPv6: the load balancer's address type is ipv4 (the default), so an IPv6 rule admits no one",
                got=cidr,
                fix="give IPv4 CIDRs",
            )
    for index, group in enumerate(groups):
        if view.concrete(group) and not SECURITY_GROUP.fullmatch(group):
            where = view.path(section, f"allowed_security_groups[{index}]")
            yield Problem(where, "expected sg- and 8 or 17 hex digits", got=group)


@rule(
    "REST-CIDR-WIDE",
    "rest_api",
    "rest_api.allowed_cidrs",
    level=WARNING,
    source="Amazon VPC User Guide, VPC CIDR blocks",
)
def wide(view: ClusterView) -> Iterator[Problem]:
    """A CIDR wider than any VPC (/16) admits networks beyond the cluster's VPC."""
    rest = _on(view)
    for index, cidr in enumerate(rest.allowed_cidrs if rest is not None else []):
        try:
            network = ipaddress.IPv4Network(cidr)
        except ValueError:
            continue
        if 0 < network.prefixlen < WIDEST_VPC_PREFIX:
            yield Problem(
                _at(view, f"allowed_cidrs[{index}]"),
                f"is wider than any VPC (a /{WIDEST_VPC_PREFIX} at most), so it admits addresses beyond the "
                "cluster's VPC (peered networks, on-premises)",
                got=cidr,
                fix="narrow it to the callers' networks, or suppress REST-CIDR-WIDE with the reason",
                level=WARNING,
            )


@rule("REST-IDENTITY", "rest_api", "rest_api.identities", source=DOC)
def identities(view: ClusterView) -> Iterator[Problem]:
    """Each identity is one IAM role or user, mapped once, to a Slurm user the cluster has; never root or slurm."""
    rest = _on(view)
    if rest is None:
        return
    if not rest.identities and rest.principal_tag is None:
        yield Problem(
            _at(view, "identities"),
            "none, and no rest_api.principal_tag: no caller could get a token",
            fix="map the IAM roles that call the API to Slurm users",
        )
    users = declared_users(view)
    seen: dict[str, int] = {}
    for index, identity in enumerate(rest.identities):
        where = _at(view, f"identities[{index}]")
        arn = identity.principal_arn
        key = principal_key(arn) if view.concrete(arn) else None
        if view.concrete(arn) and (key is None or ":sts::" in arn):
            yield Problem(
                f"{where}.principal_arn",
                "expected an IAM role's or user's ARN, arn:aws:iam::<account>:role/<name> (a role session's "
                "assumed-role ARN maps to its role's ARN)",
                got=arn,
                fix="give the role's ARN: aws iam get-role --role-name NAME --query Role.Arn",
            )
        elif key is not None:
            if key in seen:
                yield Problem(
                    f"{where}.principal_arn",
                    f"names the same principal as identities[{seen[key]}] (paths do not tell roles apart)",
                    got=arn,
                    fix="map each principal to one Slurm user",
                )
            seen.setdefault(key, index)
        yield from _user(view, f"{where}.slurm_user", identity.slurm_user, users)


def _user(view: ClusterView, where: str, user: str, users: list[str] | None) -> Iterator[Problem]:
    if not view.concrete(user):
        return
    if user in REFUSED_USERS:
        yield Problem(
            where,
            "can act as any user (SchedMD's jwt.html: root and SlurmUser tokens), so the minting function never mints "
            "for it",
            got=user,
            fix="map to the person's or the pipeline's own Slurm user",
        )
    elif not USER_NAME.fullmatch(user):
        yield Problem(where, "expected a user name: a lowercase letter or _, then a-z, 0-9, _ or -", got=user)
    elif users is not None and user not in users:
        yield Problem(
            where,
            f"is not one of the config's users ({', '.join(users)}): Slurm would run its jobs as nobody it knows",
            got=user,
            fix="add the user to users, or map to one of them",
        )


@rule("REST-PRINCIPAL-TAG", "rest_api", "rest_api.principal_tag", source="IAM User Guide, Tagging IAM resources")
def principal_tag(view: ClusterView) -> Iterator[Problem]:
    """The principal tag is an IAM tag key of our own (not aws:)."""
    rest = _on(view)
    tag = rest.principal_tag if rest is not None else None
    if tag is None or not view.concrete(tag):
        return
    if not TAG_KEY.fullmatch(tag) or tag.lower().startswith("aws:"):
        yield Problem(
            _at(view, "principal_tag"),
            "expected an IAM tag key: 1-128 letters, digits, spaces and _.:/=+-@, not starting with aws:",
            got=tag,
        )


@rule("REST-MAPPING-SIZE", "rest_api", "rest_api.identities", source="Lambda quotas: function environment variables")
def mapping_size(view: ClusterView) -> Iterator[Problem]:
    """The mapping fits the minting function's environment (4 KB for all its variables)."""
    rest = _on(view)
    if rest is None:
        return
    mapping = {principal_key(i.principal_arn) or i.principal_arn: i.slurm_user for i in rest.identities}
    size = len(json.dumps(mapping, separators=(",", ":"))) + len(json.dumps(sorted(declared_users(view) or [])))
    if size + ENV_OVERHEAD_BYTES > LAMBDA_ENV_BYTES:
        yield Problem(
            _at(view, "identities"),
            f"takes {size} bytes of the minting function's environment, more than Lambda's 4 KB allows with its other "
            "variables",
            fix="map roles rather than many users, or use rest_api.principal_tag",
        )
