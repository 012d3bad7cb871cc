"""``hyperpod-cdk``: offline commands (config validation, JSON Schema export), publishing and the local cluster."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hyperpod_cdk import ops as operator_commands
from hyperpod_cdk.preflight import command as preflight
from hyperpod_cdk.publishing import command as publishing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hyperpod-cdk")
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser(
        "validate",
        help="check a cluster config file offline; every problem is listed",
        description="Runs every rule the config decides (docs/rules.md) without AWS credentials, CDK or Node.js. "
        "Exit status: 0 valid, 1 errors (or warnings with --strict), 2 usage.",
    )
    validate.add_argument("config")
    validate.add_argument("--region", help="check instance types and the AZ against this Region (default: any)")
    validate.add_argument(
        "--previous", metavar="FILE", help="the deployed config: warn about changes that replace resources"
    )
    validate.add_argument("--strict", action="store_true", help="warnings fail too")
    validate.add_argument("--json", action="store_true", help="print the problems as JSON")
    preflight.add_online_arguments(validate)
    preflight.register(commands)
    commands.add_parser("schema", help="print the config file's JSON Schema")
    publishing.register(commands)
    _add_local_commands(commands)
    operator_commands.register(commands)
    args = parser.parse_args(argv)
    if getattr(args, "operator", None):
        return operator_commands.run(args)
    if args.command == "local":
        return _run_local(args)
    if getattr(args, "preflight", False) or getattr(args, "online", False):
        return preflight.dispatch(args)
    if args.command == "publish":
        return publishing.run(args)
    if args.command == "schema":
        from hyperpod_cdk.config import json_schema  # pydantic loads only for the commands that use it

        json.dump(json_schema(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    from hyperpod_cdk.validate import validate_command

    return validate_command(
        args.config, region=args.region, previous=args.previous, strict=args.strict, as_json=args.json
    )


# --- hyperpod-cdk local ...: the emulator's own command line (the hyperpod-local distribution) ---------------
def _add_local_commands(commands: Any) -> None:
    local = commands.add_parser(
        "local", help="a HyperPod Slurm cluster emulated on this machine (root; the hyperpod-local package)"
    )
    try:
        from hyperpod_local.cli import add_commands
    except ImportError:  # the emulator is a separate distribution
        local.add_argument("rest", nargs=argparse.REMAINDER)
        return
    add_commands(local)


def _run_local(args: argparse.Namespace) -> int:
    try:
        from hyperpod_local.cli import run
    except ImportError:
        print("error: the local cluster is the hyperpod-local package: pip install ./hyperpod-local", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
