"""``events``: ListClusterEvents, which the service offers for clusters with Continuous node provisioning.

"This functionality is only supported when the NodeProvisioningMode is set to Continuous" (API reference,
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ListClusterEvents.html); "Cluster events are
available for HyperPod clusters with NodeProvisioningMode set to Continuous"
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-cluster-events-reference.html). So on
any other cluster the command says so, and where to look instead, without calling the API; a
ValidationException from the call itself is explained the same way.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from hyperpod_cdk.aws.clients import Aws, error_code, error_message
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.logs import parse_since
from hyperpod_cdk.ops.lookup import get_cluster, list_nodes, resolve_nodes
from hyperpod_cdk.ops.render import print_json, table, when

LEVEL_STYLE = {"Error": "red", "Warn": "yellow"}


def events(args: argparse.Namespace, ctx: OpsContext) -> int:
    from botocore.exceptions import ClientError

    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    if not cluster.continuous:
        raise _no_events(cluster.name, cluster.raw.get("NodeProvisioningMode"))
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
    try:
        for page in paginator.paginate(**params, PaginationConfig={"MaxItems": args.limit}):
            found.extend(page.get("Events", []))
    except ClientError as error:
        if error_code(error) not in ("ValidationException", "ValidationError"):
            raise
        raise OpsError(
            f"ListClusterEvents refused cluster {cluster.name} ({error_message(error)}): cluster events exist only "
            f"with Continuous node provisioning; read `hyperpod-cdk logs {cluster.name}` and `status` instead",
            Exit.UNSUPPORTED,
        ) from None
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


def _no_events(name: str, mode: object) -> OpsError:
    return OpsError(
        f"cluster {name} has NodeProvisioningMode {mode or 'unset'}: HyperPod keeps cluster events only for "
        f"clusters with Continuous provisioning; read `hyperpod-cdk logs {name}` (lifecycle and health agent) and "
        f"`hyperpod-cdk status {name}` instead",
        Exit.UNSUPPORTED,
    )


def _level(level: str) -> str:
    style = LEVEL_STYLE.get(level)
    return f"[{style}]{level}[/{style}]" if style else level
