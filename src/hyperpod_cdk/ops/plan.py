"""``plan CONFIG``: what deploying CONFIG would do to the running cluster, before ``cdk deploy``.

The deployed side is the stack's template and parameters file with DescribeCluster and ListClusterNodes
(:mod:`hyperpod_cdk.deployed.stack`, rebuilt into a config by :mod:`hyperpod_cdk.deployed.config`), or ``--previous
FILE`` (the deployed config, offline). Every change is reported with its update policy
(:func:`hyperpod_cdk.aws_data.update_policy.changes`: the consequence, what to do, AWS's words and page); the exit
status
is 1 when a change blocks (the API refuses it, or it would lose data), else 0. Drift
(:mod:`hyperpod_cdk.deployed.drift`)
gets its own table; it does not change the exit status. A last line says whether the Slurm the config deploys is
affected by a known security advisory (:mod:`hyperpod_cdk.ops.security`); it does not change the exit status either.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.render import print_json, table

VALUE_WIDTH = 60
"""A value longer than this (a whole new group) is cut in the table; ``--json`` has it whole."""


def _load(path: str, region: str | None, *, shape_only: bool = False) -> Any:
    from hyperpod_cdk.core.config import load_config, load_file, parse_model
    from hyperpod_cdk.core.errors import ConfigurationError

    try:
        return parse_model(load_file(path), path) if shape_only else load_config(path, region)
    except ConfigurationError as error:
        raise OpsError(f"{error} (run `hyperpod-cdk validate {path}` for every finding)", Exit.USAGE) from None


def _shown(value: Any) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 1] + "…"


def _change_json(change: Any) -> dict[str, Any]:
    policy = change.policy
    return {
        "path": change.path,
        "before": change.before,
        "after": change.after,
        "kind": policy.kind.value,
        "blocks": change.blocks,
        "why": policy.why,
        "todo": policy.todo,
        "source": policy.source,
        "quote": policy.quote,
        "row": policy.row,
    }


def _deployed(args: argparse.Namespace, ctx: OpsContext, new: Any) -> tuple[Any, Any, list[str], str]:
    """(the deployed config or None, the Deployed or None, notes, what was compared with)."""
    if args.previous:
        return _load(args.previous, None, shape_only=True), None, [], f"previous config {args.previous}"
    from hyperpod_cdk.aws.clients import Aws
    from hyperpod_cdk.core.deployment import deployment
    from hyperpod_cdk.core.errors import ConfigurationError
    from hyperpod_cdk.deployed.config import deployed_config
    from hyperpod_cdk.deployed.stack import read_deployed
    from training_runtime.params import PARAMETERS_FILE_BY_MODE

    planned = deployment(new)
    names = [planned.parameters.file_name, *(n for n in PARAMETERS_FILE_BY_MODE.values())]
    stack = args.stack or planned.stack_name
    aws = Aws(ctx.session(args.profile, args.region))
    found = read_deployed(aws, stack, planned.cluster_name, list(dict.fromkeys(names)))
    against = f"stack {stack} and cluster {planned.cluster_name} in {aws.region or 'the default Region'}"
    if not found.exists:
        return None, found, list(found.notes), against
    try:
        before = deployed_config(new, found)
    except ConfigurationError as error:
        raise OpsError(
            f"the deployed config could not be rebuilt from {against}: {error}. Fix: compare with the deployed "
            "config file instead: --previous FILE",
            Exit.FAILED,
        ) from None
    return before, found, list(found.notes), against


def _recorded(context_file: str, key: str) -> dict[str, int] | None:
    """The deployed counts synth recorded in CDK's context file under ``key``
    (:mod:`hyperpod_cdk.deployed.synth_context`)."""
    path = Path(context_file)
    try:
        value = json.loads(path.read_text()).get(key) if path.is_file() else None
    except (OSError, ValueError, AttributeError):
        return None
    return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else None


def _new_counts(
    new: Any, found: Any, region: str, context_file: str, notes: list[str]
) -> tuple[dict[str, int], dict[str, Any]]:
    """The counts and types the new config's template gives each group: a scaled group's count is what synth
    writes, the counts ``cdk.context.json`` records, else the deployed cluster's within its range
    (:func:`hyperpod_cdk.deployed.scaler_counts.template_counts`)."""
    from hyperpod_cdk.deployed.scaler_counts import counts_of, template_counts
    from hyperpod_cdk.deployed.synth_context import context_key

    key = context_key(found.cluster_name, region)
    recorded = _recorded(context_file, key) if any(g.scaling for g in new.instance_groups) else None
    if recorded is not None:
        notes.append(
            f"{context_file} records the scaled groups' counts ({key}): synth writes those; "
            f"`cdk context --reset {key}` takes the cluster's counts"
        )
    scaled, _ = template_counts(new.instance_groups, recorded or counts_of(found.described or {}))
    counts = {g.name: scaled.get(g.name, g.count) for g in new.instance_groups}
    types = {g.name: g.instance_type or ",".join(g.instance_types) for g in new.instance_groups}
    return counts, types


def plan(args: argparse.Namespace, ctx: OpsContext) -> int:
    from hyperpod_cdk.aws_data.update_policy import changes
    from hyperpod_cdk.deployed.drift import drift
    from hyperpod_cdk.ops.security import config_line, for_config

    new = _load(args.config, args.region)
    before, found, notes, against = _deployed(args, ctx, new)
    if before is None:
        notes.append("nothing deployed: the deploy creates the cluster, no change to judge")
    found_changes = changes(before, new) if before is not None else []
    region = args.region or (found.region if found is not None else "")
    drifts = drift(found, *_new_counts(new, found, region, args.context_file, notes)) if found is not None else []
    code = Exit.FAILED if any(c.blocks for c in found_changes) else Exit.OK
    security = for_config(new)
    if args.json:
        print_json(
            ctx,
            {
                "config": args.config,
                "compared_with": against,
                "changes": [_change_json(c) for c in found_changes],
                "drift": [d.as_json() for d in drifts],
                "notes": notes,
                "slurm_security": security,
                "exit_status": int(code),
            },
        )
        return code
    _print(ctx, args.config, against, found_changes, drifts, notes)
    ctx.out.print(config_line(security), markup=False)
    return code


def _print(ctx: OpsContext, config: str, against: str, found: Sequence[Any], drifts: Sequence[Any], notes: Any) -> None:
    ctx.out.print(f"Plan for [bold]{config}[/bold] against {against}")
    sources: dict[tuple[str | None, str | None], int] = {}
    rows = []
    for change in found:
        policy = change.policy
        mark = ""
        if policy.source:
            number = sources.setdefault((policy.source, policy.quote), len(sources) + 1)
            mark = f" [{number}]"
        kind = f"[red]{policy.kind.value} (blocks)[/red]" if change.blocks else policy.kind.value
        rows.append([change.path, _shown(change.before), _shown(change.after), kind + mark, policy.why, policy.todo])
    if rows:
        ctx.out.print(table("Changes", ["Field", "Deployed", "New", "Policy", "Consequence", "What to do"], rows))
    else:
        ctx.out.print("No change to the deployed config.")
    for (source, quote), number in sources.items():
        ctx.out.print(f'[{number}] AWS: "{quote or ""}" {source}', markup=False)
    if drifts:
        ctx.out.print(
            table(
                "Drift (the running cluster differs from the deployed template and the new config)",
                ["Group", "What", "Running", "Template", "New config", "Note"],
                [[d.group, d.what, _shown(d.deployed), _shown(d.old), _shown(d.new), d.note] for d in drifts],
            )
        )
    for note in notes:
        ctx.out.print(f"Note: {note}", markup=False)
    blocking = [c.path for c in found if c.blocks]
    if blocking:
        ctx.out.print(
            f"[red]{len(blocking)} of {len(found)} changes block the deploy:[/red] {', '.join(blocking)} "
            "(the API refuses them or data would be lost): change the config as 'What to do' says"
        )
    elif found:
        ctx.out.print(f"[green]{len(found)} changes; none blocks the deploy.[/green]")
