"""``hyperpod-cdk validate``: every rule on a config file, offline, in a fraction of a second.

Imports neither aws_cdk nor anything that starts Node.js (a test runs it with Node removed from PATH).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from hyperpod_cdk.core.config import ClusterConfig, load_file, parse_model
from hyperpod_cdk.core.errors import ConfigurationError
from hyperpod_cdk.core.suppress import Suppressed
from hyperpod_cdk.preflight import load as load_online_rules
from training_runtime.problems import ERROR, INFO, WARNING, Problem, errors, infos, warnings


def validate_file(
    path: str | Path, region: str | None = None, previous: str | Path | None = None
) -> tuple[ClusterConfig | None, list[Problem]]:
    """The config (None when its shape is wrong) and every problem: shape errors, or every rule's findings."""
    config, found, _ = judge_file(path, region, previous)
    return config, found


def judge_file(
    path: str | Path, region: str | None = None, previous: str | Path | None = None
) -> tuple[ClusterConfig | None, list[Problem], list[Suppressed]]:
    """:func:`validate_file`, and the findings the config's ``suppress`` silenced (each with its reason). The
    online rules are loaded (not run): a suppression may name one."""
    load_online_rules()
    try:
        config = parse_model(load_file(path), str(path))
        before = parse_model(load_file(previous), str(previous)) if previous is not None else None
    except ConfigurationError as error:
        return None, [p if isinstance(p, Problem) else Problem.from_text(p) for p in error.problems], []
    found, hidden = config.judged(region=region, previous=before)
    return config, found, hidden


def validate_command(
    path: str,
    *,
    region: str | None = None,
    previous: str | None = None,
    strict: bool = False,
    as_json: bool = False,
    show_suppressed: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
    online: Callable[[ClusterConfig], list[Problem]] | None = None,
) -> int:
    """Print every problem (text on stderr, or ``--json`` on stdout); 1 when any fails: an error, or a warning with
    ``strict``; an info never fails. Suppressed findings are in ``--json`` (``suppressed``, with the reason) and
    with ``show_suppressed``. ``online`` adds the account's findings (``validate --online``:
    :func:`hyperpod_cdk.preflight.command.validate_online`)."""
    out = out or sys.stdout
    err = err or sys.stderr
    config, found, hidden = judge_file(path, region, previous)
    if config is not None and online is not None:
        found = found + online(config)
    failing = errors(found) + (warnings(found) if strict else [])
    if as_json:
        json.dump(
            {
                "config": path,
                "valid": not failing,
                "problems": [p.as_dict() for p in found],
                "suppressed": [s.as_dict() for s in hidden],
            },
            out,
            indent=2,
            default=str,
        )
        out.write("\n")
        return 1 if failing else 0
    for level, listed in ((ERROR, errors(found)), (WARNING, warnings(found)), (INFO, infos(found))):
        for problem in listed:
            rule = f" [{problem.rule}]" if problem.rule else ""
            print(f"{path}: {level}: {problem}{rule}", file=err)
    for suppressed in hidden if show_suppressed else []:
        problem = suppressed.problem
        print(f"{path}: suppressed {problem.level}: {problem} [{problem.rule}] (reason: {suppressed.reason})", file=err)
    if config is None or failing:
        count = len(failing)
        print(f"{path}: {count} problem{'s' if count != 1 else ''}; nothing was deployed", file=err)
        return 1
    groups = len(config.instance_groups)
    counts = [(len(warnings(found)), "warning(s)"), (len(infos(found)), "info(s)"), (len(hidden), "suppressed")]
    note = "".join(f", {n} {what}" for n, what in counts if n)
    if hidden and not show_suppressed:
        note += " (--show-suppressed lists them)"
    print(f"{path}: cluster {config.cluster_name!r} is valid ({groups} instance groups{note})", file=out)
    return 0
