"""``hyperpod-cdk``: offline commands (config validation, JSON Schema export)."""

from __future__ import annotations

import argparse
import json
import sys

from hyperpod_cdk.config import json_schema, load_config
from hyperpod_cdk.errors import ConfigurationError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hyperpod-cdk")
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a cluster config file; every problem is listed")
    validate.add_argument("config")
    commands.add_parser("schema", help="print the config file's JSON Schema")
    args = parser.parse_args(argv)
    if args.command == "schema":
        json.dump(json_schema(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    try:
        config = load_config(args.config)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{args.config}: cluster {config.cluster_name!r} is valid ({len(config.instance_groups)} instance groups)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
