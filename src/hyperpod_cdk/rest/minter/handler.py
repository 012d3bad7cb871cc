"""The token-minting function behind a Function URL with ``AWS_IAM`` auth: a caller's IAM identity in, a short-lived
Slurm JWT for the one Slurm user the config maps it to out, or 403 and no token.

Lambda's "Invoking Lambda function URLs" page: with ``AWS_IAM`` "you must sign each HTTP request using AWS Signature
Version 4 (SigV4)", and the request payload's ``requestContext.authorizer.iam`` carries the caller (``userArn``,
``accountId``). The mapping is the function's environment (no secret: role/user ARNs and Slurm user names); the key
is read from Secrets Manager on every call (``AWSCURRENT``), so a rotated key signs the next token. Stdlib and boto3
only: Lambda's Python runtimes include the AWS SDK for Python (docs/rest-api.md quotes the page).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .identity import ROLE, USER, parts, principal_key
from .token import TokenError, mint

SECRET_ENV = "HYPERPOD_REST_KEY_SECRET_ARN"
LIFETIME_ENV = "HYPERPOD_REST_TOKEN_LIFETIME_S"
IDENTITIES_ENV = "HYPERPOD_REST_IDENTITIES"
TAG_ENV = "HYPERPOD_REST_PRINCIPAL_TAG"
TAG_USERS_ENV = "HYPERPOD_REST_TAG_USERS"
MAX_LIFETIME_S = 3600
"""The longest token the function mints, whatever its environment says (the config's maximum too)."""
REFUSED_USERS = frozenset({"root", "slurm"})
"""Never minted for: SchedMD's jwt.html says "The root account, or SlurmUser account can be used to generate tokens
for any user" (HyperPod's SlurmUser is ``slurm``), so their tokens could act as anyone."""


@dataclass(frozen=True)
class Settings:
    """The function's environment, read once per call."""

    key_secret_arn: str
    lifetime_s: int
    identities: Mapping[str, str]
    """Principal key (:func:`~.identity.principal_key`) -> Slurm user name."""
    principal_tag: str | None = None
    """The IAM tag whose value on the caller's role or user names its Slurm user; None: no mapping by tag."""
    tag_users: frozenset[str] = frozenset()
    """The Slurm users a tag may name; empty: any POSIX name but :data:`REFUSED_USERS`."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        identities = json.loads(env.get(IDENTITIES_ENV) or "{}")
        lifetime = int(env[LIFETIME_ENV])
        return cls(
            key_secret_arn=env[SECRET_ENV],
            lifetime_s=min(lifetime, MAX_LIFETIME_S),
            identities={str(k): str(v) for k, v in identities.items()},
            principal_tag=env.get(TAG_ENV) or None,
            tag_users=frozenset(json.loads(env.get(TAG_USERS_ENV) or "[]")),
        )


class Refused(Exception):
    """No token for this caller: the message says why (returned to the caller, who can act on it)."""


def _reply(status: int, body: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", "Cache-Control": "no-store"},
        "body": json.dumps(body, sort_keys=True),
    }


def caller_arn(event: Mapping[str, Any]) -> str:
    """``requestContext.authorizer.iam.userArn`` of a Function URL event with ``AWS_IAM`` auth."""
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    authorizer = context.get("authorizer") if isinstance(context, Mapping) else None
    iam = authorizer.get("iam") if isinstance(authorizer, Mapping) else None
    arn = iam.get("userArn") if isinstance(iam, Mapping) else None
    if not isinstance(arn, str) or not arn:
        raise Refused("no IAM caller in the request: call the function URL signed with SigV4 (service lambda)")
    return arn


def slurm_user(
    arn: str,
    settings: Settings,
    tags_of: Callable[[str, str, str], Mapping[str, str] | None],
    own_account: str | None,
) -> str:
    """The Slurm user ``arn`` is mapped to: by its role's or user's ARN, else by the principal tag; Refused else.

    ``tags_of(account, kind, name)`` gives a role's or user's IAM tags (None: cannot be read); only principals of
    ``own_account`` are looked up (IAM answers for its own account only)."""
    key = principal_key(arn)
    if key is None:
        raise Refused(f"{arn} is not an IAM role, role session or user: only those are mapped to Slurm users")
    user = settings.identities.get(key)
    if user is None and settings.principal_tag is not None:
        account, kind, name = parts(key)
        if account == own_account and kind in (ROLE, USER):
            tags = tags_of(account, kind, name) or {}
            user = tags.get(settings.principal_tag)
            if user is not None and settings.tag_users and user not in settings.tag_users:
                raise Refused(f"{key} carries tag {settings.principal_tag}={user}, which names no allowed Slurm user")
    if user is None:
        raise Refused(f"{key} is mapped to no Slurm user (rest_api.identities or its principal tag)")
    if user in REFUSED_USERS:
        raise Refused(f"{key} is mapped to {user}, for whom no token is minted (it could act as any user)")
    return user


def respond(
    event: Mapping[str, Any],
    settings: Settings,
    *,
    key: Callable[[], bytes],
    tags_of: Callable[[str, str, str], Mapping[str, str] | None],
    own_account: str | None,
    now: int,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The Function URL response to ``event``: 200 with the token; 403 (no token), 405, or 500 (the key unread)."""
    method = ((event.get("requestContext") or {}).get("http") or {}).get("method", "POST")
    if method != "POST":
        return _reply(405, {"message": "POST to mint a token"})
    try:
        arn = caller_arn(event)
        user = slurm_user(arn, settings, tags_of, own_account)
    except Refused as refused:
        log(json.dumps({"refused": str(refused)}))
        return _reply(403, {"message": str(refused)})
    try:
        signing_key = key()
    except Exception as error:  # the caller learns nothing of the secret; the log says what failed
        log(json.dumps({"caller": arn, "error": f"the signing key could not be read: {type(error).__name__}"}))
        return _reply(500, {"message": "the signing key could not be read; see the function's log"})
    try:
        token = mint(signing_key, user, settings.lifetime_s, now)
    except TokenError as refused:
        log(json.dumps({"refused": str(refused)}))
        return _reply(403, {"message": str(refused)})
    expires = now + settings.lifetime_s
    log(json.dumps({"caller": arn, "user": user, "expires_at": expires}))  # the audit line; never the token
    return _reply(200, {"token": token, "user": user, "expires_at": expires, "lifetime_s": settings.lifetime_s})


_CLIENTS: dict[str, Any] = {}


def _client(name: str) -> Any:
    if name not in _CLIENTS:
        import boto3  # the Lambda runtime's own

        _CLIENTS[name] = boto3.client(name)
    return _CLIENTS[name]


def _secret_key(arn: str) -> bytes:
    return str(_client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]).encode("utf-8")


def _tags(account: str, kind: str, name: str) -> dict[str, str] | None:
    iam = _client("iam")
    call = iam.list_role_tags if kind == ROLE else iam.list_user_tags
    argument = {"RoleName": name} if kind == ROLE else {"UserName": name}
    tags: dict[str, str] = {}
    marker: dict[str, str] = {}
    while True:
        page = call(**argument, **marker)
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
        if not page.get("IsTruncated"):
            return tags
        marker = {"Marker": page["Marker"]}


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Lambda's entry point (``minter.handler.handler``)."""
    settings = Settings.from_env(os.environ)
    function_arn = getattr(context, "invoked_function_arn", "") or ""
    own_account = function_arn.split(":")[4] if function_arn.count(":") >= 5 else None
    return respond(
        event,
        settings,
        key=lambda: _secret_key(settings.key_secret_arn),
        tags_of=_tags,
        own_account=own_account,
        now=int(time.time()),
    )
