"""``hyperpod-cdk cost``: spend per account, user, partition or job in money, idle cost and each account's budget
left, from Slurm's own accounting read on the controller through SSM, the way ``status --slurm`` reads Slurm
(:mod:`hyperpod_cdk.ops.slurm_state`: ``AWS-StartNonInteractiveCommand`` on the ``sagemaker-cluster:`` target).

One read-only command line runs there: ``sacct`` for the jobs of the window, ``scontrol -o show partition`` for
each partition's nodes and billing weights, ``sshare`` for the associations' ``GrpTRESMins`` limits and usage; the
figures are :func:`training_runtime.cost_report.cost_report`'s (docs/cost.md, "The cost report").
Slurm prints times in the controller's local time without a zone; HyperPod's nodes run in UTC, and so do the
window's bounds here.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.access import start_session_argv
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.logs import parse_since
from hyperpod_cdk.ops.lookup import get_cluster, list_nodes, pick_node
from hyperpod_cdk.ops.render import print_json, table
from hyperpod_cdk.ops.slurm_state import NON_INTERACTIVE_DOCUMENT
from training_runtime.billing import money as billing_money
from training_runtime.cost_report import (
    SACCT_FORMAT,
    SSHARE,
    CostReport,
    cost_report,
    parse_budgets,
    parse_partitions,
    parse_sacct,
)

TIMEOUT_S = 300.0
SLURM_TIME = "%Y-%m-%dT%H:%M:%S"
SECTIONS = ("sacct", "partitions", "sshare")


def window(args: argparse.Namespace, now: float) -> tuple[datetime, datetime]:
    """``--since``/``--until``: an ISO date or time (UTC) or an age (30m, 2h, 7d). Default: this month so far."""
    current = datetime.fromtimestamp(now, UTC).replace(tzinfo=None, microsecond=0)

    def at(text: str | None, default: datetime, flag: str) -> datetime:
        if not text:
            return default
        try:
            return datetime.fromisoformat(text).replace(tzinfo=None)
        except ValueError:
            pass
        try:
            return current - timedelta(seconds=parse_since(text))
        except OpsError:
            raise OpsError(
                f"{flag} {text!r}: give an ISO date or time (2026-11-01, 2026-11-01T08:00) or an age (30m, 2h, 7d)",
                Exit.USAGE,
            ) from None

    month = current.replace(day=1, hour=0, minute=0, second=0)
    since = at(args.since, month, "--since")
    # In a month's first second "this month so far" is empty: the default window is that second, not an error.
    until = at(args.until, max(current, month + timedelta(seconds=1)), "--until")
    if until <= since:
        raise OpsError(f"--until {until.isoformat()} is not after --since {since.isoformat()}", Exit.USAGE)
    return since, until


def controller_command(since: datetime, until: datetime) -> str:
    """The one shell line run on the controller; each part's output follows a ``### <name>`` marker."""
    return "; ".join(
        [
            "echo '### sacct'",
            f"sacct -a -X -P -n --format={SACCT_FORMAT} "
            f"-S {since.strftime(SLURM_TIME)} -E {until.strftime(SLURM_TIME)}",
            "echo '### partitions'",
            "scontrol -o show partition",
            "echo '### sshare'",
            " ".join(SSHARE),
        ]
    )


def sections(stdout: str) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.replace("\r\n", "\n").split("\n"):
        if line.startswith("### ") and line[4:].strip() in SECTIONS:
            current = found.setdefault(line[4:].strip(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) for k, v in found.items()}


def read(args: argparse.Namespace, ctx: OpsContext, since: datetime, until: datetime) -> dict[str, str]:
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    controller = pick_node(cluster, list_nodes(aws.sagemaker, cluster.name), None, None)
    target = cluster.ssm_target(controller)
    parameters = json.dumps({"command": [controller_command(since, until)]}, separators=(",", ":"))
    argv = start_session_argv(target, args, "--document-name", NON_INTERACTIVE_DOCUMENT, "--parameters", parameters)
    answer = ctx.capture(argv, TIMEOUT_S)
    found = sections(answer.stdout)
    if set(found) != set(SECTIONS):
        said = (answer.stderr.strip() or answer.stdout.strip() or "no output").splitlines()[-1]
        raise OpsError(f"`aws ssm start-session` to {target} did not return Slurm's accounting: {said}", Exit.FAILED)
    return found


def cost(args: argparse.Namespace, ctx: OpsContext) -> int:
    since, until = window(args, ctx.now())
    found = read(args, ctx, since, until)
    report = cost_report(
        parse_sacct(found["sacct"]),
        parse_partitions(found["partitions"]),
        parse_budgets(found["sshare"]),
        since,
        until,
        args.by,
    )
    if args.json:
        print_json(ctx, {"cluster": args.cluster, **report.to_json()})
        return int(Exit.OK)
    show(ctx, args.cluster, report)
    return int(Exit.OK)


def money(value: float | None) -> str:
    return "" if value is None else f"{value:,.2f}"


def show(ctx: OpsContext, cluster: str, report: CostReport) -> None:
    ctx.out.print(f"Cluster [bold]{cluster}[/bold]: {report.since.isoformat()} to {report.until.isoformat()} (UTC)")
    rows: list[list[str]] = [[x.key, money(x.spend), str(x.jobs), f"{x.node_hours:,.1f}"] for x in report.lines]
    rows.append(["[bold]total[/bold]", f"[bold]{money(report.spend)}[/bold]", "", ""])
    ctx.out.print(table(f"Spend by {report.by}", [report.by.capitalize(), "Spend", "Jobs", "Node-hours"], rows))
    idle: list[list[str]] = [[i.partition, f"{i.node_hours:,.1f}", money(i.cost)] for i in report.idle]
    ctx.out.print(table("Idle (node-hours no job held)", ["Partition", "Node-hours", "Cost"], idle))
    if report.budgets:
        budgets: list[list[str]] = [
            [
                b.account,
                money(None if b.limit is None else billing_money(b.limit)),
                money(billing_money(b.used)),
                money(b.left),
            ]
            for b in report.budgets
        ]
        ctx.out.print(table("Budgets (GrpTRESMins billing)", ["Account", "Limit", "Used", "Left"], budgets))
    for note in report.notes:
        ctx.out.print(f"[yellow]Note:[/yellow] {note}")
