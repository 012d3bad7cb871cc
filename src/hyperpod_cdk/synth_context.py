"""Synth's look-up of the deployed cluster, cached in CDK's context so that a synth is reproducible.

A scaled group's template count is the deployed cluster's (:func:`hyperpod_cdk.scaler_counts.counts_for_synth`,
DescribeCluster at synth). CDK's rule for values an app reads from the account is to record them in
``cdk.context.json`` and reuse them: "The CDK Toolkit uses context to cache values retrieved from your AWS
account during synthesis ... The CDK Toolkit's caching behavior 'freezes' these values for your CDK app until you
decide to accept the new values" (https://docs.aws.amazon.com/cdk/v2/guide/context.html); the CDK CLI's
``cdk context --reset KEY`` forgets one, so the next synth looks it up again. CDK's guide asks that a key set by
other code "start with the name of the CDK package that set them" (v1 guide, same page): :func:`context_key`.

The CDK CLI resolves only its own built-in context providers (Availability Zones, AMIs, VPCs, ...): an app cannot
register another, so :func:`cached_counts` does what the CLI does for them, itself. It reads the value through the
context the CLI gives the app (``try_get_context``; the CLI loads ``cdk.context.json`` into it) and, when the key
is missing, looks the cluster up and writes the answer into ``cdk.context.json`` in the app's working directory
(the project's, where ``cdk synth`` runs it), keeping every other key. A cluster that does not exist yet is not
recorded: the first synth after it is created reads it again, and records it then.

No ``aws_cdk`` import.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.scaler_counts import CONFIG_COUNTS, COUNTS_CONTEXT, counts_for_synth, sagemaker_client

if TYPE_CHECKING:
    from hyperpod_cdk.deployment import Deployment

CONTEXT_FILE = "cdk.context.json"
KEY_PREFIX = "hyperpod-cdk:deployed-counts"


def context_key(cluster_name: str, region: str | None) -> str:
    """The context key of a cluster's deployed counts, in CDK's provider-key style
    (``availability-zones:account=...:region=...``): ``hyperpod-cdk:deployed-counts:region=R:cluster=NAME``."""
    return f"{KEY_PREFIX}:region={region or 'default'}:cluster={cluster_name}"


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
    """The Region synth's look-up asks (:func:`hyperpod_cdk.scaler_counts.sagemaker_client`'s): the CDK CLI's
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
