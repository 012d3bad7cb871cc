"""``hyperpod_cdk.rest_api`` in the parameters file: Slurm's REST API on the controller, or absent (off).

The constructs write it from the config's ``rest_api:`` section; the controller reads it at boot. It names where the
JWT signing key lives (a Secrets Manager secret whose ``SecretString`` is the key) and never holds the key itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from training_runtime.stack_values import is_port, secret_arn_problem

REST_API_KEY = "rest_api"
"""The key under ``hyperpod_cdk`` in the parameters file."""

DEFAULT_PORT = 6820
"""slurmrestd's customary port (Slurm's REST quick start runs it on 6820); here the node's TLS endpoint, and the load
balancer's (the config's default, :mod:`hyperpod_cdk.core.rest_api_config`)."""

DEFAULT_TOKEN_LIFETIME_S = 900
"""Tokens live 15 minutes unless the config says otherwise: a leaked token is worth little for long."""

KEYS = ("key_secret_arn", "region", "port", "token_lifetime_s")


@dataclass(frozen=True)
class RestApiParams:
    """Where the REST API listens and where its signing key is kept."""

    key_secret_arn: str
    """The Secrets Manager secret whose ``SecretString`` is the HS256 key (its ``AWSCURRENT`` version)."""
    region: str
    """The secret's Region: the node signs ``GetSecretValue`` with SigV4 for it."""
    port: int = DEFAULT_PORT
    """The TCP port the controller serves HTTPS on (the load balancer's target port)."""
    token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S
    """How long a minted token lives; the node tells slurmrestd nothing of it (the token's ``exp`` does)."""

    def to_json(self) -> Dict[str, Any]:
        return {
            "key_secret_arn": self.key_secret_arn,
            "region": self.region,
            "port": self.port,
            "token_lifetime_s": self.token_lifetime_s,
        }

    @classmethod
    def from_json(cls, raw: Any, path: str, problems: List[str]) -> Optional["RestApiParams"]:
        """The REST API of a parameters file's ``raw`` value (None or absent: off); problems are appended."""
        return parse_rest_api(raw, path, problems)


def parse_rest_api(raw: Any, path: str, problems: List[str]) -> Optional[RestApiParams]:
    """See :meth:`RestApiParams.from_json`."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected an object with {}, or absent".format(path, raw, ", ".join(KEYS)))
        return None
    before = len(problems)
    for key in raw:
        if key not in KEYS:
            problems.append("{}.{}: unknown key; allowed: {}".format(path, key, ", ".join(KEYS)))
    arn, region = raw.get("key_secret_arn"), raw.get("region")
    arn_problem = secret_arn_problem(path + ".key_secret_arn", arn)
    if arn_problem is not None:
        problems.append(arn_problem)
    if not isinstance(region, str) or not region:
        problems.append("{}.region: got {!r}; expected an AWS Region such as us-east-1".format(path, region))
    port = raw.get("port", DEFAULT_PORT)
    if not is_port(port):
        problems.append("{}.port: got {!r}; expected a TCP port, 1 to 65535".format(path, port))
    lifetime = raw.get("token_lifetime_s", DEFAULT_TOKEN_LIFETIME_S)
    if isinstance(lifetime, bool) or not isinstance(lifetime, int) or lifetime < 1:
        problems.append("{}.token_lifetime_s: got {!r}; expected whole seconds >= 1".format(path, lifetime))
    if len(problems) != before:
        return None
    return RestApiParams(str(arn), str(region), int(port), int(lifetime))
