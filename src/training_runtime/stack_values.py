"""Checks of the values the stack writes into the parameters file for a section's resources (the REST API's key, the
login pool's host keys): a secret's ARN and a TCP port. A synthesized file holds a marker in the ARN's place (a
CloudFormation value, resolved at deploy), so only a value that reads as an ARN is held to Secrets Manager's form."""

from __future__ import annotations

from typing import Any, Optional

from training_runtime.option_types import SECRET_ARN


def secret_arn_problem(path: str, arn: Any) -> Optional[str]:
    """What is wrong with ``arn`` at ``path`` (None: nothing): a non-empty string without spaces, and where it is an
    ARN, a Secrets Manager secret's (GetSecretValue's SecretId: "The ARN or name of the secret")."""
    if (
        isinstance(arn, str)
        and arn.strip()
        and not any(c.isspace() for c in arn)
        and (not arn.startswith("arn:") or SECRET_ARN.fullmatch(arn))
    ):
        return None
    return (
        "{}: got {!r}; expected a Secrets Manager secret's ARN (arn:aws:secretsmanager:<region>:<account>:secret:"
        "<name>). Fix: regenerate the parameters with hyperpod-cdk".format(path, arn)
    )


def is_port(value: Any) -> bool:
    """A TCP port: an int (not a bool) from 1 to 65535."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535
