"""``hyperpod-cdk preflight CONFIG`` and ``validate --online``: the online rules' command line.

Exit statuses are ``validate``'s (0 no errors, 1 errors, or warnings with ``--strict``, 2 usage), plus the operator
commands' 4 when there are no usable credentials (docs/operations.md). A check the account will not answer is a
warning naming the IAM action, never a failure of the command.
"""

from __future__ import annotations

import argparse
import json
import sys

from hyperpod_cdk.aws.errors import Exit, OpsError
from training_runtime.problems import Problem, errors, warnings

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (`hyperpod-cdk --help` stays light)
if TYPE_CHECKING:
    from typing import Any

    from hyperpod_cdk.ops.context import OpsContext


def register(commands: Any) -> None:
    """Adds ``preflight`` to ``hyperpod-cdk``'s sub-commands."""
    parser = commands.add_parser(
        "preflight",
        help="check a cluster config against the AWS account before deploying (read-only calls)",
        description="Runs the rules that need the account (docs/rules.md, needs 'aws'): quotas, subnets, training "
        "plans, file systems, buckets, keys, the accounting secret, AMIs, the permission boundary, the workspace. "
        "Exit status: 0 no errors, 1 errors (or warnings with --strict), 2 usage, 4 no usable credentials.",
    )
    parser.set_defaults(preflight=True)
    parser.add_argument("config", nargs="?", help="the cluster config file")
    parser.add_argument("--region", help="AWS Region (default: AWS_REGION or the profile's)")
    parser.add_argument("--profile", help="AWS profile (default: AWS_PROFILE)")
    parser.add_argument("--json", action="store_true", help="print the problems as JSON")
    parser.add_argument("--strict", action="store_true", help="warnings fail too")
    parser.add_argument("--policy", action="store_true", help="print the IAM policy preflight needs, and exit")


def add_online_arguments(validate: Any) -> None:
    """``validate --online [--profile P]``."""
    validate.add_argument("--online", action="store_true", help="also run the checks against the AWS account")
    validate.add_argument("--profile", help="AWS profile for --online (default: AWS_PROFILE)")


def open_account(profile: str | None, region: str | None, ctx: OpsContext) -> Any:
    """The account behind the credentials: OpsError (exit 4 or 2) when there are none or no Region."""
    from hyperpod_cdk.aws.clients import aws_errors
    from hyperpod_cdk.preflight.account import Account

    with aws_errors():
        session = ctx.session(profile, region)
        if not session.region_name:
            raise OpsError("no AWS Region: pass --region or set AWS_REGION", Exit.USAGE)
        identity = session.client("sts").get_caller_identity()
    account = Account(session, now=ctx.now)
    account.once(("account",), lambda: identity["Account"])
    return account


def check_config(config: Any, account: Any) -> list[Problem]:
    from hyperpod_cdk.preflight.runner import run_online
    from hyperpod_cdk.rules import ClusterView

    return run_online(ClusterView.of_config(config, region=account.region), account)


def run(args: argparse.Namespace, ctx: OpsContext | None = None) -> int:
    """``hyperpod-cdk preflight``."""
    from hyperpod_cdk.ops.context import OpsContext

    ctx = ctx or OpsContext()
    if args.policy:
        from hyperpod_cdk.preflight.online import policy

        ctx.write(json.dumps(policy(), indent=2))
        return 0
    if not args.config:
        (ctx.stderr or sys.stderr).write("error: preflight needs a CONFIG file (or --policy)\n")
        return int(Exit.USAGE)
    from hyperpod_cdk.core.config import load_file, parse_model
    from hyperpod_cdk.core.errors import ConfigurationError

    try:
        config = parse_model(load_file(args.config), args.config)
        account = open_account(args.profile, args.region, ctx)
    except ConfigurationError as error:
        found = [p if isinstance(p, Problem) else Problem.from_text(p) for p in error.problems]
        return report(ctx, args.config, None, found, strict=args.strict, as_json=args.json)
    except OpsError as error:
        (ctx.stderr or sys.stderr).write(f"error: {error}\n")
        return int(error.code)
    return report(ctx, args.config, account, check_config(config, account), strict=args.strict, as_json=args.json)


def report(ctx: OpsContext, path: str, account: Any, found: list[Problem], *, strict: bool, as_json: bool) -> int:
    failing = errors(found) + (warnings(found) if strict else [])
    status = 1 if failing else 0
    if as_json:
        found_in = {"account": account.account_id, "region": account.region} if account is not None else {}
        value = {"config": path, **found_in, "valid": not failing, "problems": [p.as_dict() for p in found]}
        ctx.write(json.dumps(value, indent=2, default=str))
        return status
    if found:
        from rich.markup import escape

        from hyperpod_cdk.ops.render import table

        rows = [
            [escape(c) for c in (p.level, p.rule, p.path, "" if p.got is None else str(p.got), p.expected, p.fix)]
            for p in errors(found) + warnings(found)
        ]
        ctx.out.print(table(f"preflight: {path}", ("level", "rule", "field", "found", "problem", "fix"), rows))
    where = f" in account {account.account_id}, {account.region}" if account is not None else ""
    summary = f"{len(errors(found))} error(s), {len(warnings(found))} warning(s){where}"
    if failing:
        ctx.err.print(f"{path}: {summary}; fix them before cdk deploy", markup=False)
    else:
        ctx.out.print(f"{path}: passed preflight: {summary}", markup=False)
    return status


def validate_online(args: argparse.Namespace, ctx: OpsContext | None = None) -> int:
    """``hyperpod-cdk validate --online``: every offline rule, then the account's, in validate's output."""
    from hyperpod_cdk.ops.context import OpsContext
    from hyperpod_cdk.validate import validate_command

    ctx = ctx or OpsContext()
    try:
        account = open_account(args.profile, args.region, ctx)
    except OpsError as error:
        (ctx.stderr or sys.stderr).write(f"error: {error}\n")
        return int(error.code)
    return validate_command(
        args.config,
        region=account.region,
        previous=args.previous,
        strict=args.strict,
        as_json=args.json,
        out=ctx.stdout,
        err=ctx.stderr,
        online=lambda config: check_config(config, account),
    )


def dispatch(args: argparse.Namespace, ctx: OpsContext | None = None) -> int:
    """What ``hyperpod-cdk`` runs for ``preflight`` and for ``validate --online``."""
    return validate_online(args, ctx) if getattr(args, "online", False) else run(args, ctx)


def main(argv: list[str] | None = None, ctx: OpsContext | None = None) -> int:
    """``preflight`` alone, with an injected context (tests)."""
    parser = argparse.ArgumentParser(prog="hyperpod-cdk")
    register(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv), ctx)
