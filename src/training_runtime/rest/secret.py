"""The JWT signing key, read from Secrets Manager with the instance role (stdlib SigV4, no AWS CLI).

The secret's ``SecretString`` is the HS256 key itself (Secrets Manager generates it when the stack creates the
secret; the template never holds it): the key's bytes are that string encoded UTF-8, the same bytes the minting
function signs with. ``GetSecretValue`` with ``VersionStage`` ``AWSCURRENT`` (Secrets Manager API reference,
GetSecretValue: "VersionStage ... If you don't specify either a VersionStage or VersionId, Secrets Manager returns
the AWSCURRENT version"), so a rotation is a new ``AWSCURRENT`` version and nothing else.

The value is returned to the caller only: never logged, never in an exception's message, never on a command line.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from training_runtime.aws_secrets import SecretsManager, endpoint_for
from training_runtime.scaler.credentials import RoleCredentials
from training_runtime.scaler.sagemaker import ApiError
from training_runtime.scaler.sigv4 import Credentials
from training_runtime.spot import IMDS_URL

CURRENT = "AWSCURRENT"
MIN_KEY_BYTES = 32
"""RFC 7518 §3.2: "A key of the same size as the hash output (for instance, 256 bits for "HS256") or larger MUST be
used with this algorithm." The stack's secret has 64 characters."""
PRINTABLE = re.compile(r"^[\x21-\x7e]+\Z")
"""What Secrets Manager's generated passwords are made of (printable ASCII, no space): a value with anything else
(a newline a hand edit added) would sign differently in the minting function and in Slurm, which reads the file's
bytes as they are."""


class SecretError(RuntimeError):
    """The key could not be read, or the secret does not hold a usable key; the message says which and the fix
    (never the value)."""


def client_for(
    region: str,
    endpoint: Optional[str] = None,
    imds_url: Optional[str] = None,
    credentials: Optional[Callable[[], Credentials]] = None,
) -> SecretsManager:
    """A client for ``region`` with the instance role's credentials (``imds_url``: the metadata service; the local
    cluster's fake there), at ``endpoint`` (None: AWS's)."""
    role = credentials if credentials is not None else RoleCredentials(imds_url or IMDS_URL)
    return SecretsManager(endpoint or endpoint_for(region), region, role, attempts=4)


def check_key(value: object, secret: str) -> bytes:
    """The key bytes of ``value`` (a ``SecretString``), or :class:`SecretError` saying what is wrong with it."""
    if not isinstance(value, str):
        raise SecretError(
            "secret {} has no SecretString (a binary secret?); the REST API's key is the secret's string. Fix: "
            "let the stack create the secret, or put-secret-value --secret-string with a generated value".format(secret)
        )
    data = value.encode("utf-8")
    if len(data) < MIN_KEY_BYTES or not PRINTABLE.match(value):
        raise SecretError(
            "secret {}: its AWSCURRENT value is not a usable HS256 key ({} bytes; needed: at least {} printable ASCII "
            "characters without spaces; the value is not shown). Fix: rotate it with a generated value: aws "
            'secretsmanager put-secret-value --secret-id {} --secret-string "$(aws secretsmanager get-random-password '
            '--password-length 64 --exclude-punctuation --query RandomPassword --output text)"'.format(
                secret, len(data), MIN_KEY_BYTES, secret
            )
        )
    return data


def fetch_key(client: SecretsManager, secret: str) -> bytes:
    """The ``AWSCURRENT`` key of ``secret`` (an ARN); :class:`SecretError` naming the secret, the error and the fix."""
    try:
        data = client.call("GetSecretValue", {"SecretId": secret, "VersionStage": CURRENT})
    except ApiError as error:
        fixes = {
            "auth": "the controller's instance role needs secretsmanager:GetSecretValue on this secret (the stack's "
            "grant); check the role and the secret's resource policy",
            "not-found": "the secret is gone or in another Region; redeploy the stack, which creates it",
            "credentials": "the node could not get its instance role's credentials from the metadata service",
        }
        fix = fixes.get(error.kind, "check the node's network path to Secrets Manager (a VPC endpoint or NAT)")
        raise SecretError("GetSecretValue {}: {} {}. Fix: {}".format(secret, error.code, error.message, fix)) from None
    return check_key(data.get("SecretString"), secret)
