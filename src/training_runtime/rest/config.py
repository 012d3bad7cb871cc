"""The REST API service's settings on the controller (:data:`CONFIG_PATH`), written at bootstrap and read by the
service (``rest serve``) and the key refresh (``rest refresh-key``), so neither needs the lifecycle prefix after the
boot. No secret is in it: it names the secret, not its value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from training_runtime.render.jwt_keys import JWT_KEY_PATH

CONFIG_PATH = "/etc/hyperpod-cdk/rest-api.json"
REST_USER = "slurmrestd"
"""slurmrestd's own account: rest.html, "While using JWT authentication, slurmrestd should be run as a unique,
unprivileged user and group"; slurmrestd(8), -u: "Do not set this user to SlurmUser or root or the daemon won't start
with the default settings". The TLS terminator in front of it runs as this user too, in the same process tree."""
SOCKET_DIR = "/run/hyperpod-cdk-rest"
"""slurmrestd's UNIX socket lives here (0700, :data:`REST_USER`): plain HTTP never leaves the controller, and no
other local account can reach slurmrestd except through the TLS endpoint."""
SOCKET_NAME = "slurmrestd.socket"
TLS_DIR = "/etc/hyperpod-cdk/rest"
"""The endpoint's certificate and private key (root only, 0700): made on the controller at bootstrap."""
CERTIFICATE = TLS_DIR + "/tls.crt"
PRIVATE_KEY = TLS_DIR + "/tls.key"


class RestConfigError(ValueError):
    """The settings file is unreadable or malformed; the message names the field."""


@dataclass(frozen=True)
class RestServiceConfig:
    port: int
    """The TLS endpoint's TCP port (``rest_api.port``), on every address of the controller."""
    slurmrestd: str
    slurm_conf: str
    openapi_plugins: Tuple[str, ...]
    """``slurmrestd -s``: ``openapi/slurmctld``, and ``openapi/slurmdbd`` where the cluster has accounting
    (slurmrestd(8): the slurmdbd plugin "will fail if accounting_storage/slurmdbd is not used")."""
    secret_arn: str
    region: str
    scontrol: str
    secretsmanager_url: Optional[str] = None
    """None: AWS's regional endpoint; the local cluster's emulated Secrets Manager otherwise."""
    imds_url: Optional[str] = None
    """None: EC2's metadata service (the instance role's credentials); the local cluster's fake otherwise."""
    slurmdbd: Optional[Dict[str, Any]] = None
    """The runtime's slurmdbd (a :func:`training_runtime.services.daemon_record`), restarted when the key changes
    (slurmdbd reads it at start only); None: slurmdbd is HyperPod's or there is none."""
    systemd: bool = True
    certificate: str = CERTIFICATE
    private_key: str = PRIVATE_KEY
    key_file: str = JWT_KEY_PATH
    user: str = REST_USER
    slurm_user: str = "slurm"
    socket_dir: str = SOCKET_DIR

    @property
    def socket_path(self) -> str:
        return "{}/{}".format(self.socket_dir, SOCKET_NAME)

    def slurmrestd_argv(self) -> List[str]:
        """slurmrestd with JWT authentication only (no ``rest_auth/local``: no identity from the socket's peer),
        listening on its UNIX socket only."""
        return [
            self.slurmrestd,
            "-a",
            "rest_auth/jwt",
            "-s",
            ",".join(self.openapi_plugins),
            "unix:" + self.socket_path,
        ]

    def to_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {name: getattr(self, name) for name in FIELDS}
        data["openapi_plugins"] = list(self.openapi_plugins)
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, data: Any) -> "RestServiceConfig":
        if not isinstance(data, Mapping):
            raise RestConfigError("{}: expected a JSON object".format(CONFIG_PATH))
        missing = [name for name in REQUIRED if name not in data]
        unknown = sorted(set(data) - set(FIELDS))
        if missing or unknown:
            raise RestConfigError(
                "{}: missing {}; unknown {}. Fix: re-run the bootstrap, which writes it".format(
                    CONFIG_PATH, missing or "nothing", unknown or "nothing"
                )
            )
        port = data["port"]
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise RestConfigError("{}: port: got {!r}; expected a TCP port".format(CONFIG_PATH, port))
        values = {name: data[name] for name in FIELDS if name in data}
        values["openapi_plugins"] = tuple(str(p) for p in data["openapi_plugins"])
        return cls(**values)

    @classmethod
    def loads(cls, text: str) -> "RestServiceConfig":
        try:
            return cls.from_json(json.loads(text))
        except ValueError as error:
            if isinstance(error, RestConfigError):
                raise
            raise RestConfigError("{}: not JSON ({})".format(CONFIG_PATH, error)) from None


REQUIRED = ("port", "slurmrestd", "slurm_conf", "openapi_plugins", "secret_arn", "region", "scontrol")
FIELDS = (
    *REQUIRED,
    "secretsmanager_url",
    "imds_url",
    "slurmdbd",
    "systemd",
    "certificate",
    "private_key",
    "key_file",
    "user",
    "slurm_user",
    "socket_dir",
)
