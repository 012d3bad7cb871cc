"""``jobs submit|list|show|cancel``: Slurm jobs through the cluster's REST API (``rest_api`` in the config).

The endpoint and the minting URL come from the stack's outputs; the token from the minting function, signed with
the caller's AWS credentials (:mod:`hyperpod_cdk.rest.client`). Refusals keep the operator commands' statuses:
4 when the token is refused (HTTP 401/403), 3 for a job or stack that is not there, 1 for anything else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.core.deployment import STACK_NAME_PREFIX
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.render import to_json
from hyperpod_cdk.ops.training_job import stack_outputs
from hyperpod_cdk.rest.client import Endpoints, RestApiError, SlurmRestClient, summary

ACTIONS = ("submit", "list", "show", "cancel")


def exit_of(error: RestApiError) -> Exit:
    if error.status in (401, 403):
        return Exit.ACCESS
    if error.status == 404:
        return Exit.NOT_FOUND
    return Exit.FAILED


def client_of(args: argparse.Namespace, ctx: OpsContext) -> SlurmRestClient:
    """The REST client of the cluster's stack (``--stack``, default ``hyperpod-<cluster>``)."""
    session = ctx.session(args.profile, args.region)
    stack = args.stack or f"{STACK_NAME_PREFIX}{args.cluster}"
    outputs = stack_outputs(Aws(session).client("cloudformation"), stack)
    try:
        endpoints = Endpoints.of_outputs(outputs, stack)
    except RestApiError as error:
        raise OpsError(str(error), Exit.NOT_FOUND) from None
    return SlurmRestClient.of_endpoints(endpoints, session, ca_certs=args.ca_bundle)


def _script(args: argparse.Namespace) -> str:
    if args.wrap is not None:
        return f"#!/bin/bash\n{args.wrap}\n"
    if args.script in (None, "-"):
        return sys.stdin.read()
    try:
        return Path(args.script).read_text()
    except OSError as error:
        raise OpsError(f"{args.script}: {error.strerror}", Exit.NOT_FOUND) from None


def _environment(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise OpsError(f"--env {pair!r}: expected NAME=VALUE", Exit.USAGE)
        found[key] = value
    return found


def jobs(args: argparse.Namespace, ctx: OpsContext) -> int:
    """The ``jobs`` command: one of :data:`ACTIONS`."""
    client = client_of(args, ctx)
    try:
        return _run(args, ctx, client)
    except RestApiError as error:
        raise OpsError(str(error), exit_of(error)) from None


def _run(args: argparse.Namespace, ctx: OpsContext, client: SlurmRestClient) -> int:
    if args.action == "submit":
        job_id = client.submit(
            _script(args),
            name=args.name,
            partition=args.partition,
            nodes=args.nodes,
            time_limit_min=args.time,
            cwd=args.cwd,
            account=args.account,
            environment=_environment(args.env),
            output=args.output,
        )
        ctx.write(to_json({"job_id": job_id}) if args.json else f"Submitted batch job {job_id}")
        return Exit.OK
    if args.action == "list":
        rows = [summary(j) for j in client.jobs()]
        if args.json:
            ctx.write(to_json(rows))
        else:
            _table(ctx, rows)
        return Exit.OK
    if args.action == "show":
        job = client.job(args.job_id)
        ctx.write(to_json(job if args.json else summary(job)))
        return Exit.OK
    client.cancel(args.job_id, signal=args.signal)
    ctx.write(to_json({"job_id": args.job_id, "cancelled": True}) if args.json else f"Cancelled job {args.job_id}")
    return Exit.OK


def _table(ctx: OpsContext, rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table(*("JOBID", "NAME", "USER", "ACCOUNT", "PARTITION", "STATE", "NODES"), box=None)
    for row in rows:
        table.add_row(*(str(row[k] if row[k] is not None else "") for k in row))
    ctx.out.print(table)
