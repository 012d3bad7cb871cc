"""``hyperpod_cdk.login_pool`` in the parameters file: the login pool's host keys and health endpoint, or absent (off).

The constructs write it from the config's ``login_pool:`` section; every login node reads it at boot. It names where
the pool's SSH host keys live (a Secrets Manager secret) and never holds a key itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from training_runtime.stack_values import is_port, secret_arn_problem

LOGIN_POOL_KEY = "login_pool"
"""The key under ``hyperpod_cdk`` in the parameters file."""

DEFAULT_HEALTH_PORT = 2223
"""The TCP port of each login node's health endpoint (HTTP ``GET /health``), which the load balancer's target group
checks: 200 while sshd answers and the node is not drained, 503 otherwise."""

KEYS = ("host_keys_secret_arn", "region", "health_port")


@dataclass(frozen=True)
class LoginPoolParams:
    """Where the pool's host keys are kept and where each login node answers the load balancer's health check."""

    host_keys_secret_arn: str
    """The Secrets Manager secret holding the pool's SSH host keys (its ``AWSCURRENT`` version)."""
    region: str
    """The secret's Region: the node signs its Secrets Manager calls with SigV4 for it."""
    health_port: int = DEFAULT_HEALTH_PORT
    """The TCP port of the node's health endpoint (the target group's health-check port)."""

    def to_json(self) -> Dict[str, Any]:
        return {
            "host_keys_secret_arn": self.host_keys_secret_arn,
            "region": self.region,
            "health_port": self.health_port,
        }

    @classmethod
    def from_json(cls, raw: Any, path: str, problems: List[str]) -> Optional["LoginPoolParams"]:
        """The login pool of a parameters file's ``raw`` value (None or absent: off); problems are appended."""
        return parse_login_pool(raw, path, problems)


def parse_login_pool(raw: Any, path: str, problems: List[str]) -> Optional[LoginPoolParams]:
    """See :meth:`LoginPoolParams.from_json`."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected an object with {}, or absent".format(path, raw, ", ".join(KEYS)))
        return None
    before = len(problems)
    for key in raw:
        if key not in KEYS:
            problems.append("{}.{}: unknown key; allowed: {}".format(path, key, ", ".join(KEYS)))
    arn, region = raw.get("host_keys_secret_arn"), raw.get("region")
    arn_problem = secret_arn_problem(path + ".host_keys_secret_arn", arn)
    if arn_problem is not None:
        problems.append(arn_problem)
    if not isinstance(region, str) or not region:
        problems.append("{}.region: got {!r}; expected an AWS Region such as us-east-1".format(path, region))
    port = raw.get("health_port", DEFAULT_HEALTH_PORT)
    if not is_port(port) or port == 22:
        problems.append("{}.health_port: got {!r}; expected a TCP port, 1 to 65535, not 22".format(path, port))
    if len(problems) != before:
        return None
    return LoginPoolParams(str(arn), str(region), int(port))
