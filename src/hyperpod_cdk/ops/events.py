"""``events``: ListClusterEvents, which the service offers for clusters with Continuous node provisioning."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.logs import parse_since
from hyperpod_cdk.ops.lookup import get_cluster, list_nodes, resolve_nodes
from hyperpod_cdk.ops.render import print_json, table, when

LEVEL_STYLE = {"Error": "red", "Warn": "yellow"}


def events(args: argparse.Namespace, ctx: OpsContext) -> int:
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    mode = cluster.raw.get("NodeProvisioningMode")
    if mode != "Continuous":
        raise OpsError(
            f"cluster {cluster.name} has NodeProvisioningMode {mode or 'unset'}: the service keeps events only for "
            f"Continuous provisioning; read `hyperpod-cdk logs {cluster.name}` and `status` instead",
            Exit.UNSUPPORTED,
        )
    params: dict[str, Any] = {"ClusterName": cluster.name, "SortBy": "EventTime", "SortOrder": "Descending"}
    if args.group:
        cluster.group(args.group)
        params["InstanceGroupName"] = args.group
    if args.node:
        params["NodeId"] = resolve_nodes(list_nodes(aws.sagemaker, cluster.name), [args.node], cluster.name)[
            0
        ].instance_id
    if args.since:
        params["EventTimeAfter"] = datetime.fromtimestamp(ctx.now() - parse_since(args.since), UTC)
    found: list[dict[str, Any]] = []
    paginator = aws.sagemaker.get_paginator("list_cluster_events")
    for page in paginator.paginate(**params, PaginationConfig={"MaxItems": args.limit}):
        found.extend(page.get("Events", []))
    found = found[: args.limit]
    if args.json:
        print_json(ctx, {"cluster": cluster.name, "events": found})
        return Exit.OK
    if not found:
        ctx.err.print(f"no events for cluster {cluster.name} in this selection")
        return Exit.OK
    ctx.out.print(
        table(
            f"Events of {cluster.name} (newest first)",
            ["Time", "Level", "Resource", "Group", "Instance", "Description"],
            [
                [
                    when(e.get("EventTime")),
                    _level(str(e.get("EventLevel", ""))),
                    str(e.get("ResourceType", "")),
                    str(e.get("InstanceGroupName", "")),
                    str(e.get("InstanceId", "")),
                    str(e.get("Description", "")),
                ]
                for e in found
            ],
        )
    )
    return Exit.OK


def _level(level: str) -> str:
    style = LEVEL_STYLE.get(level)
    return f"[{style}]{level}[/{style}]" if style else level
