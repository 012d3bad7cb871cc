"""``hyperpod-cdk``: offline commands (config validation, JSON Schema export, a new project), publishing,
the operator commands, and commands other distributions plug in (``local``: the hyperpod-local package).

A plug-in command is an entry point in the group ``hyperpod_cdk.commands``: its name is the command, its object
a function taking the rest of the command line and returning the exit status. It is looked up only when its
command runs, so ``--help`` and the built-in commands import nothing of it (and do not scan installed
distributions' metadata either). So ``--help`` lists the plug-ins of :data:`KNOWN_PLUGINS` only; any other runs
by its name all the same.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from hyperpod_cdk import ops as operator_commands
from hyperpod_cdk.core.node_banner import silence_node_end_of_life_banner
from hyperpod_cdk.preflight import command as preflight
from hyperpod_cdk.publishing import command as publishing

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (`hyperpod-cdk --help` stays light)
if TYPE_CHECKING:
    from typing import Any

PLUGIN_GROUP = "hyperpod_cdk.commands"
Plugin = Callable[[list[str]], int]
KNOWN_PLUGINS = {
    "local": (
        "a HyperPod Slurm cluster emulated on this machine (root; the hyperpod-local package)",
        "the local cluster is the hyperpod-local package: pip install hyperpod-local "
        "(from a checkout of hyperpod-cdk: pip install ./hyperpod-local)",
    ),
}
"""Plug-in commands ``--help`` lists even when their package is not installed: (help, how to install it)."""


def installed_plugin(name: str) -> Plugin | None:
    """The entry point named ``name`` in :data:`PLUGIN_GROUP`, loaded; ``None`` when no distribution has one."""
    from importlib.metadata import entry_points  # scans every installed distribution: only when one runs

    for entry_point in entry_points(group=PLUGIN_GROUP, name=name):
        plugin: Plugin = entry_point.load()
        return plugin
    return None


def _terminal_columns() -> int:
    """What ``shutil.get_terminal_size`` answers (COLUMNS, the terminal, else 80), without importing shutil."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns or 80


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's own, told the width (argparse imports shutil and its compressors for it: a third of the time
    `hyperpod-cdk --help` spends in argparse)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_columns() - 2)


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked (not on every start)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print hyperpod-cdk's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib.metadata import version

        print(f"hyperpod-cdk {version('hyperpod-cdk')}")
        parser.exit()


class _Listed:
    """A command that is not the one running: ``--help`` lists it; its arguments are never built."""

    def __getattr__(self, name: str) -> Callable[..., _Listed]:
        return lambda *args, **kwargs: self


class _Commands:
    """The sub-command parsers, building in full only the command ``running`` (all of them for none)."""

    def __init__(self, action: argparse._SubParsersAction[argparse.ArgumentParser], running: str | None) -> None:
        self.action, self.running = action, running

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser | _Listed:
        if name == self.running:
            return self.action.add_parser(name, **kwargs)  # type: ignore[arg-type]
        self.action.add_parser(name, help=kwargs.get("help"), add_help=False)  # type: ignore[arg-type]
        return _Listed()


def main(argv: list[str] | None = None, plugins: Callable[[str], Plugin | None] = installed_plugin) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    silence_node_end_of_life_banner()  # a command of ours: jsii's banner stays out of it (node_banner.py)
    parser = argparse.ArgumentParser(prog="hyperpod-cdk", formatter_class=_HelpFormatter)
    parser.add_argument("--version", action=_Version)
    action = parser.add_subparsers(dest="command", required=True)
    # Only the command that runs gets its arguments: `--help` lists the others by name and help line.
    commands: Any = _Commands(action, argv[0] if argv and not argv[0].startswith("-") else None)
    validate = commands.add_parser(
        "validate",
        help="check a cluster config file offline; every problem is listed",
        description="Runs every rule the config decides (docs/rules.md) without AWS credentials, CDK or Node.js. "
        "Exit status: 0 valid, 1 errors (or warnings with --strict; infos never fail), 2 usage.",
    )
    validate.add_argument("config")
    validate.add_argument("--region", help="check instance types and the AZ against this Region (default: any)")
    validate.add_argument(
        "--previous",
        metavar="FILE",
        help="the deployed config: refuse changes AWS forbids, warn about ones that replace resources",
    )
    validate.add_argument("--strict", action="store_true", help="warnings fail too")
    validate.add_argument("--json", action="store_true", help="print the problems as JSON")
    validate.add_argument(
        "--show-suppressed", action="store_true", help="also list the findings the config's suppress silences"
    )
    preflight.add_online_arguments(validate)
    preflight.register(commands)
    commands.add_parser("schema", help="print the config file's JSON Schema")
    init = commands.add_parser(
        "init",
        help="create a new CDK app project that deploys a cluster (app.py, cdk.json, cluster.yaml, requirements)",
        description="Writes a CDK app into DIR (new or empty) that `cdk synth` accepts as it is: app.py, cdk.json "
        "with CDK's recommended feature flags, cluster.yaml (with its JSON Schema for editors) and requirements.txt "
        "pinning the versions this package was tested with.",
    )
    init.add_argument("dir", help="the project's directory (created; it must be empty if it exists)")
    publishing.register(commands)
    operator_commands.register(commands)
    for name, (summary, _) in KNOWN_PLUGINS.items():
        action.add_parser(name, help=summary, add_help=False)
    if argv and argv[0] not in action.choices.keys() - KNOWN_PLUGINS.keys() and not argv[0].startswith("-"):
        plugin = plugins(argv[0])  # a plug-in command parses its own arguments
        if plugin is not None:
            return plugin(argv[1:])
        if argv[0] in KNOWN_PLUGINS:
            print(f"error: {KNOWN_PLUGINS[argv[0]][1]}", file=sys.stderr)
            return 2
    args = parser.parse_args(argv)
    if getattr(args, "operator", None):
        return operator_commands.run(args)
    if args.command == "init":
        from hyperpod_cdk.project import init_command

        return init_command(args.dir)
    if getattr(args, "preflight", False) or getattr(args, "online", False):
        return preflight.dispatch(args)
    if args.command == "publish":
        return publishing.run(args)
    if args.command == "schema":
        import json

        from hyperpod_cdk.core.config import json_schema  # pydantic loads only for the commands that use it

        json.dump(json_schema(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    from hyperpod_cdk.validate import validate_command

    return validate_command(
        args.config,
        region=args.region,
        previous=args.previous,
        strict=args.strict,
        as_json=args.json,
        show_suppressed=args.show_suppressed,
    )


if __name__ == "__main__":
    sys.exit(main())
