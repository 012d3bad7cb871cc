"""``logs``: lifecycle-script and health-agent output from the cluster's CloudWatch Logs group."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from hyperpod_cdk.aws.clients import Aws, error_code
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.lookup import LOG_STREAM_PREFIXES, Cluster, get_cluster, list_nodes, log_stream, resolve_nodes

DURATION = re.compile(r"^(\d+)([smhd])$")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str) -> float:
    """'30m' -> 1800.0 seconds."""
    match = DURATION.fullmatch(text.strip())
    if not match:
        raise OpsError(f"--since {text!r}: give a number and a unit s, m, h or d (30m, 2h, 1d)", Exit.USAGE)
    return int(match.group(1)) * SECONDS[match.group(2)]


def _filter(args: argparse.Namespace, aws: Aws, cluster: Cluster) -> tuple[dict[str, Any], set[str]]:
    """FilterLogEvents parameters for --node / --group / --source, and the stream prefixes to keep."""
    sources = list(LOG_STREAM_PREFIXES) if args.source == "all" else [args.source]
    params: dict[str, Any] = {"logGroupName": cluster.log_group}
    if args.node:
        node = resolve_nodes(list_nodes(aws.sagemaker, cluster.name), [args.node], cluster.name)[0]
        params["logStreamNames"] = [log_stream(source, node) for source in sources]
    elif len(sources) == 1:
        params["logStreamNamePrefix"] = f"{LOG_STREAM_PREFIXES[sources[0]]}/" + (f"{args.group}/" if args.group else "")
    if args.group:
        cluster.group(args.group)
    return params, {LOG_STREAM_PREFIXES[source] for source in sources}


def _events(logs: Any, params: dict[str, Any], prefixes: set[str], group: str | None) -> Iterator[dict[str, Any]]:
    try:
        for page in logs.get_paginator("filter_log_events").paginate(**params):
            for event in page.get("events", []):
                # The API filters already; this keeps endpoints that ignore the prefix (moto) to the selection.
                parts = str(event.get("logStreamName", "")).split("/")
                if parts[0] not in prefixes or (group and (len(parts) < 3 or parts[-2] != group)):
                    continue
                yield event
    except Exception as error:
        if error_code(error) == "ResourceNotFoundException":
            raise OpsError(
                f"log group {params['logGroupName']} does not exist (yet): HyperPod creates it when the first "
                "node runs its lifecycle script; check `hyperpod-cdk status`",
                Exit.NOT_FOUND,
            ) from None
        raise


def _line(event: dict[str, Any], as_json: bool) -> str:
    stream = str(event.get("logStreamName", ""))
    parts = stream.split("/")
    stamp = datetime.fromtimestamp(int(event.get("timestamp", 0)) / 1000, UTC).isoformat(timespec="milliseconds")
    message = str(event.get("message", "")).rstrip("\n")
    if as_json:
        source = next((k for k, v in LOG_STREAM_PREFIXES.items() if parts[0] == v), parts[0])
        return json.dumps(
            {
                "timestamp": stamp,
                "source": source,
                "group": parts[-2] if len(parts) >= 3 else None,
                "instance_id": parts[-1] if len(parts) >= 3 else None,
                "stream": stream,
                "message": message,
            },
            sort_keys=True,
        )
    return f"{stamp} {'/'.join(parts[-2:])} {message}"


def logs(args: argparse.Namespace, ctx: OpsContext) -> int:
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    params, prefixes = _filter(args, aws, cluster)
    if args.since:
        params["startTime"] = int((ctx.now() - parse_since(args.since)) * 1000)
    client = aws.client("logs")
    seen: set[str] = set()
    latest = int(params.get("startTime", 0))
    printed = 0
    try:
        while True:
            for event in _events(client, params, prefixes, args.group):
                key = str(event.get("eventId") or (event.get("timestamp"), event.get("logStreamName")))
                if key in seen:
                    continue
                seen.add(key)
                latest = max(latest, int(event.get("timestamp", 0)))
                ctx.write(_line(event, args.json))
                printed += 1
            if not args.follow:
                break
            params["startTime"] = latest
            ctx.sleep(args.interval)
    except KeyboardInterrupt:
        return Exit.OK  # Ctrl-C is how --follow ends
    if printed == 0:
        ctx.err.print(f"no log events in {cluster.log_group} for this selection")
    return Exit.OK
