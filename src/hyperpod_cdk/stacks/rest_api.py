"""The config's ``rest_api`` as a :class:`~hyperpod_cdk.constructs.rest_api.SlurmRestApi` and the stack's outputs
that the client and ``hyperpod-cdk jobs`` read."""

from __future__ import annotations

from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from hyperpod_cdk.constructs.interfaces import NodeNetwork
from hyperpod_cdk.constructs.rest_api import SlurmRestApi
from hyperpod_cdk.core import stack_outputs as out
from hyperpod_cdk.core.config import ClusterConfig
from hyperpod_cdk.core.errors import raise_if_any

PUBLISHED_REFUSAL = (
    "rest_api: a published template's parameters file is fixed when it is published, and the REST API's signing "
    "key is a secret each launch creates (its ARN is known only then). Fix: remove rest_api from the published "
    "config; deploy the cluster with cdk deploy to have it"
)


def rest_api_of(
    scope: Construct, config: ClusterConfig, network: NodeNetwork, *, published: bool, source: str
) -> SlurmRestApi | None:
    """The REST API ``config.rest_api`` asks for (None when off), in ``scope`` (the rules checked the section)."""
    rest = config.rest_api
    if rest is None or not rest.enabled:
        return None
    if published:
        raise_if_any(source, [PUBLISHED_REFUSAL])
    assert rest.certificate_arn is not None and rest.domain_name is not None  # REST-CERTIFICATE
    callers = [
        ec2.SecurityGroup.from_security_group_id(scope, f"RestApiCallers{index}", group, mutable=False)
        for index, group in enumerate(rest.allowed_security_groups)
    ]
    return SlurmRestApi(
        scope,
        "RestApi",
        network=network,
        certificate=acm.Certificate.from_certificate_arn(scope, "RestApiCertificate", rest.certificate_arn),
        tls_name=rest.domain_name,
        port=rest.port,
        token_lifetime_s=rest.token_lifetime_s,
        allowed_cidrs=rest.allowed_cidrs,
        allowed_security_groups=callers,
        identities={i.principal_arn: i.slurm_user for i in rest.identities},
        principal_tag=rest.principal_tag,
        tag_users=[u.name for u in config.cluster_users()],
    )


def rest_outputs(rest: SlurmRestApi | None) -> dict[str, tuple[str, str]]:
    """The REST API's stack outputs (none without it)."""
    if rest is None:
        return {}
    return {
        out.REST_API_ENDPOINT: (rest.endpoint, "Slurm REST API (v0.0.42): connect here, verify RestApiTlsName"),
        out.REST_API_TLS_NAME: (
            rest.tls_name,
            "The name on the REST API's certificate (point it at the load balancer)",
        ),
        out.REST_API_TOKEN_URL: (rest.token_url, "Mints a Slurm JWT for your IAM identity: POST signed with SigV4"),
        out.REST_API_LOAD_BALANCER: (rest.load_balancer.load_balancer_dns_name, "The REST API's load balancer"),
        out.REST_API_KEY_SECRET: (rest.key.secret_arn, "The REST API's signing key (hyperpod-cdk rest rotate-key)"),
    }
