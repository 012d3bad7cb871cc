"""Who a caller is, as the minting function matches it: an IAM role or user, its ARN without path or session.

IAM's "IAM identifiers" page (IAM ARNs) gives the forms: a role's ARN carries its path before its name
(``arn:aws:iam::123456789012:role/application_abc/component_xyz/RDSAccess``), a user's too, and a role session is
``arn:aws:sts::123456789012:assumed-role/Accounting-Role/Mary``: the role's name and the session's, without the path.
A role's or user's name is unique in its account whatever its path (IAM refuses a second role of the same name), so
account + kind + name names one principal, and the ARN a Function URL reports for a role session maps to the role
the config names with or without its path. Stdlib only (the Lambda's code).
"""

from __future__ import annotations

import re

# IAM's CreateRole/CreateUser: RoleName/UserName "[\w+=,.@-]+", 1-64 characters; a path "/" or "/.../".
_NAME = r"[\w+=,.@-]{1,64}"
_PRINCIPAL = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):iam::(?P<account>\d{12}):(?P<kind>role|user)(?:/[!-~]*)?/(?P<name>" + _NAME + ")"
)
_SESSION = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):sts::(?P<account>\d{12}):assumed-role/(?P<name>" + _NAME + r")/[\w+=,.@-]{2,64}"
)
ROLE, USER = "role", "user"


def principal_key(arn: str) -> str | None:
    """``arn:<partition>:iam::<account>:<role|user>/<name>`` for a role, a role session or a user; None otherwise
    (an account root, a federated user, a service, anything that is not an ARN)."""
    if not isinstance(arn, str):
        return None
    found = _SESSION.fullmatch(arn)
    kind = ROLE
    if found is None:
        found = _PRINCIPAL.fullmatch(arn)
        if found is None:
            return None
        kind = found["kind"]
    return f"arn:{found['partition']}:iam::{found['account']}:{kind}/{found['name']}"


def parts(key: str) -> tuple[str, str, str]:
    """(account, kind, name) of a :func:`principal_key`."""
    _, _, tail = key.partition(":iam::")
    account, _, rest = tail.partition(":")
    kind, _, name = rest.partition("/")
    return account, kind, name
