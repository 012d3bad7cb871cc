"""Synth's look-ups of the deployed cluster, cached in CDK's context so that a synth is reproducible.

A scaled group's template count is the deployed cluster's (:func:`hyperpod_cdk.deployed.scaler_counts.counts_for_synth`,
DescribeCluster at synth), and so is each deployed group's execution role
(:func:`hyperpod_cdk.deployed.roles.roles_for_synth`). CDK's rule for values an app reads from the account is to
record them in ``cdk.context.json`` and reuse them: "The CDK Toolkit uses context to cache values retrieved from
your AWS account during synthesis ... The CDK Toolkit's caching behavior 'freezes' these values for your CDK app
until you decide to accept the new values" (https://docs.aws.amazon.com/cdk/v2/guide/context.html); the CDK CLI's
``cdk context --reset KEY`` forgets one, so the next synth looks it up again. CDK's guide asks that a key set by
other code "start with the name of the CDK package that set them" (v1 guide, same page): :func:`context_key`,
:func:`roles_key`.

The CDK CLI resolves only its own built-in context providers (Availability Zones, AMIs, VPCs, ...): an app cannot
register another, so :func:`cached_counts` and :func:`cached_roles` do what the CLI does for them, themselves. They
read the value through the context the CLI gives the app (``try_get_context``; the CLI loads ``cdk.context.json``
into it) and, when the key is missing, look the cluster up and write the answer into ``cdk.context.json`` in the
app's working directory (the project's, where ``cdk synth`` runs it), keeping every other key. A cluster that does
not exist yet is not recorded: the first synth after it is created reads it again, and records it then.

No ``aws_cdk`` import.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.deployed.roles import CONFIG_ROLES, ROLES_CONTEXT, lookup_failed, roles_for_synth, wrong_account
from hyperpod_cdk.deployed.scaler_counts import CONFIG_COUNTS, COUNTS_CONTEXT, counts_for_synth, sagemaker_client

if TYPE_CHECKING:
    from hyperpod_cdk.core.deployment import Deployment

CONTEXT_FILE = "cdk.context.json"
KEY_PREFIX = "hyperpod-cdk:deployed-counts"
ROLES_KEY_PREFIX = "hyperpod-cdk:deployed-roles"


def context_key(cluster_name: str, region: str | None) -> str:
    """The context key of a cluster's deployed counts, in CDK's provider-key style
    (``availability-zones:account=...:region=...``): ``hyperpod-cdk:deployed-counts:region=R:cluster=NAME``."""
    return f"{KEY_PREFIX}:region={region or 'default'}:cluster={cluster_name}"


def roles_key(cluster_name: str, region: str | None) -> str:
    """The context key of a cluster's deployed execution roles:
    ``hyperpod-cdk:deployed-roles:region=R:cluster=NAME``."""
    return f"{ROLES_KEY_PREFIX}:region={region or 'default'}:cluster={cluster_name}"


def write_context(path: Path, key: str, value: Any) -> None:
    """``key`` set to ``value`` in the JSON file at ``path`` (created if missing), every other key kept; written
    whole to a temporary file and renamed, so a reader never sees half a file."""
    found: dict[str, Any] = {}
    if path.exists():
        loaded = json.loads(path.read_text() or "{}")
        found = loaded if isinstance(loaded, dict) else {}
    found[key] = value
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as stream:
        json.dump(found, stream, indent=2, sort_keys=True)
        stream.write("\n")
    os.replace(temporary, path)


def _region() -> str | None:
    """The Region synth's look-up asks (:func:`hyperpod_cdk.deployed.scaler_counts.sagemaker_client`'s): the CDK CLI's
    ``CDK_DEFAULT_REGION``, else the standard AWS settings' (``AWS_REGION``, the profile)."""
    from hyperpod_cdk.aws.session import make_session

    return os.environ.get("CDK_DEFAULT_REGION") or make_session(None, None).region_name


def cached_counts(
    deployed: Deployment,
    try_get_context: Callable[[str], Any],
    *,
    client: Callable[[], Any] = sagemaker_client,
    context_file: Path | None = None,
    region: str | None = None,
) -> dict[str, int] | None:
    """What an app passes as ``deployed_counts``: :func:`counts_for_synth`'s answer, read from CDK's context when
    recorded there, else looked up and recorded (``cdk.context.json``). ``try_get_context`` is the app's
    (``app.node.try_get_context``); ``region`` defaults to the look-up's (:func:`_region`)."""
    choice = try_get_context(COUNTS_CONTEXT)
    if choice == CONFIG_COUNTS or not any(g.scaling is not None for g in deployed.config.instance_groups):
        return counts_for_synth(deployed, choice, client)
    key = context_key(deployed.cluster_name, region or _region())
    cached = try_get_context(key)
    if isinstance(cached, Mapping):
        return {str(name): int(count) for name, count in cached.items()}
    counts = counts_for_synth(deployed, choice, client)
    if counts is not None:
        write_context(context_file or Path.cwd() / CONTEXT_FILE, key, counts)
    return counts


def has_credentials() -> bool:
    """Whether the standard AWS settings find credentials (botocore's chain; nothing is called)."""
    from hyperpod_cdk.aws.session import make_session

    return make_session(None, None).get_credentials() is not None


def caller_account() -> str:
    """The account of the standard AWS settings' credentials: STS GetCallerIdentity ("No permissions are required
    to perform this operation", https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html)."""
    from hyperpod_cdk.aws.session import make_session

    return str(make_session(None, None).client("sts").get_caller_identity()["Account"])


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def cached_roles(
    deployed: Deployment,
    try_get_context: Callable[[str], Any],
    *,
    client: Callable[[], Any] = sagemaker_client,
    credentials: Callable[[], bool] = has_credentials,
    account: Callable[[], str] = caller_account,
    target_account: str | None = None,
    context_file: Path | None = None,
    region: str | None = None,
    say: Callable[[str], None] = _say,
) -> dict[str, str] | None:
    """What an app passes as ``deployed_roles``: each deployed group's ``ExecutionRole``, read from CDK's context when
    recorded there (:func:`roles_key`), else looked up (:func:`hyperpod_cdk.deployed.roles.roles_for_synth`) and
    recorded in ``cdk.context.json``. Nothing is looked up, and None returned, with ``-c execution_roles=config``,
    or (with one line through ``say``) without a Region or credentials: no cluster can be read or deployed to then
    (``make synth`` on a fresh machine), and each group gets the role its ``execution_role`` says. The credentials
    must be of the account the CDK CLI deploys to (``target_account``, default ``CDK_DEFAULT_ACCOUNT``, which the CLI
    sets; ``account``: the credentials'), else a cluster there would be missed: the CLI passes ``cdk --profile`` on
    to no app (it sets only ``CDK_DEFAULT_ACCOUNT`` and ``CDK_DEFAULT_REGION``)."""
    if try_get_context(ROLES_CONTEXT) == CONFIG_ROLES:
        return None
    try:
        where = region or _region()
    except Exception as error:  # the AWS settings themselves are broken (a profile that does not exist)
        raise lookup_failed(deployed.cluster_name, error) from None
    key = roles_key(deployed.cluster_name, where)
    cached = try_get_context(key)
    if isinstance(cached, Mapping):
        return {str(name): str(arn) for name, arn in cached.items()}
    try:
        found = where is not None and credentials()
    except Exception as error:
        raise lookup_failed(deployed.cluster_name, error) from None
    if not found:
        say(
            f"info: hyperpod-cdk: no AWS {'Region' if where is None else 'credentials'}: the deployed cluster "
            f"{deployed.cluster_name!r} is not read, so each instance group gets the execution role its config says "
            "(deploying over a cluster, synthesize with credentials: a deployed group keeps its role)"
        )
        return None
    expected = target_account or os.environ.get("CDK_DEFAULT_ACCOUNT")
    if expected:
        try:
            actual = account()
        except Exception as error:
            raise lookup_failed(deployed.cluster_name, error) from None
        if actual != expected:
            raise wrong_account(deployed.cluster_name, actual, expected)
    roles = roles_for_synth(deployed, client)
    if roles is not None:
        write_context(context_file or Path.cwd() / CONTEXT_FILE, key, roles)
    return roles
