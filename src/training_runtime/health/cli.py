"""The health program Slurm runs: checks, then the Slurm changes the results call for, logged as JSON.

``python3 -m training_runtime health --periodic | --prolog | --report``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from training_runtime.errors import InputError
from training_runtime.facts import FactsError, load_facts
from training_runtime.health.checks import SCONTROL_TIMEOUT_S, Context, _ran, _tail, run_checks
from training_runtime.health.remedy import (
    NodeState,
    Situation,
    parse_node_state,
    plan_actions,
    worst,
)
from training_runtime.health.results import HYPERPOD_REASONS, PERIODIC, PROLOG, REBOOT, REPORT, CheckResult
from training_runtime.log import log
from training_runtime.node import SYSTEM_PATH
from training_runtime.options import HealthOptions, parse_options
from training_runtime.paths import DONE_MARKER, HEALTH_LOG, STATE_DIR

HEALTH_CONFIG = "/etc/hyperpod-cdk/health.json"
"""The ``health`` runtime options as bootstrap wrote them (defaults when absent)."""
LOG_FILE = HEALTH_LOG
RECOVERY_FILE = STATE_DIR + "/health-recovery.json"
"""When each check last asked HyperPod for a reboot (survives the reboot; a replacement starts afresh)."""


def node_state(ctx: Context) -> Optional[NodeState]:
    argv = [ctx.slurm.command("scontrol"), "show", "node", ctx.node_name]
    result, why = _ran(ctx, argv, SCONTROL_TIMEOUT_S)
    if result is None or not result.ok:
        _event(ctx, "health_slurm_unreachable", node=ctx.node_name, error=why if result is None else _tail(result))
        return None
    return parse_node_state(result.stdout)


def situation(ctx: Context) -> Situation:
    """The facts :func:`plan_actions` decides on, with the recovery history read from :data:`RECOVERY_FILE`."""
    return Situation(
        node_name=ctx.node_name,
        scontrol=ctx.slurm.command("scontrol"),
        mode=ctx.mode,
        hyperpod=ctx.hyperpod,
        on_hyperpod=ctx.options.on_hyperpod,
        now=ctx.clock(),
        recoveries=_recoveries(ctx),
    )


def _recoveries(ctx: Context) -> Dict[str, float]:
    try:
        data = json.loads(ctx.path(RECOVERY_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) else {}


def _remember_reboot(ctx: Context, check: str) -> None:
    history = _recoveries(ctx)
    history[check] = ctx.clock()
    target = ctx.path(RECOVERY_FILE)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(history, sort_keys=True) + "\n")
    except OSError as error:
        _event(ctx, "health_state_unwritable", path=RECOVERY_FILE, error=str(error))


def apply_actions(ctx: Context, results: Sequence[CheckResult]) -> None:
    """Query the node's state and change it where :func:`plan_actions` says; logs every command."""
    current = node_state(ctx)
    if current is None:
        return
    for argv in plan_actions(situation(ctx), results, current):
        if "reason=" + HYPERPOD_REASONS[REBOOT] in argv:
            _remember_reboot(ctx, worst([r for r in results if r.failed])[0].name)
        result, why = _ran(ctx, argv, SCONTROL_TIMEOUT_S)
        _event(
            ctx,
            "health_action",
            node=ctx.node_name,
            argv=argv,
            ok=bool(result and result.ok),
            error=why or ("" if result is None or result.ok else _tail(result)),
        )


def _event(ctx: Context, event: str, **fields: Any) -> None:
    """One JSON line on stdout (not in report mode) and in :data:`LOG_FILE` (best effort: the disk may
    be the thing that is full)."""
    record: Dict[str, Any] = {"ts": round(time.time(), 3), "event": event}
    record.update(fields)
    line = json.dumps(record, sort_keys=True, default=str) + "\n"
    if ctx.mode != REPORT:
        sys.stdout.write(line)
        sys.stdout.flush()
    try:
        target = ctx.path(LOG_FILE)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(str(target), "a") as handle:
            handle.write(line)
    except OSError:
        pass


def load_health_options(root: Path) -> HealthOptions:
    """The options bootstrap wrote to :data:`HEALTH_CONFIG`; the defaults when there is none."""
    try:
        raw = json.loads((root / HEALTH_CONFIG.lstrip("/")).read_text())
    except (OSError, ValueError):
        return HealthOptions()
    try:
        return parse_options({"health": raw}).health
    except InputError:
        return HealthOptions()


def check_and_act(ctx: Context) -> Tuple[List[CheckResult], int]:
    """Run the checks for ``ctx.mode`` and change the node's Slurm state as they call for (periodic, and a
    failed prolog); returns the results and the exit status."""
    if ctx.mode == PERIODIC and not ctx.path(DONE_MARKER).exists():
        _event(ctx, "health_skipped", node=ctx.node_name, why="bootstrap has not finished on this node")
        return [], 0
    results = run_checks(ctx)
    failures = [r for r in results if r.failed]
    _event(
        ctx,
        "health",
        mode=ctx.mode,
        node=ctx.node_name,
        failed=[r.name for r in failures],
        results={r.name: {"status": r.status, "detail": r.detail} for r in results},
    )
    if ctx.mode == PERIODIC or (ctx.mode == PROLOG and failures):
        apply_actions(ctx, results)
    if ctx.mode == PERIODIC:
        return results, 0
    return results, 1 if failures else 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m training_runtime health")
    modes = parser.add_mutually_exclusive_group(required=True)
    modes.add_argument("--periodic", dest="mode", action="store_const", const=PERIODIC, help="HealthCheckProgram")
    modes.add_argument("--prolog", dest="mode", action="store_const", const=PROLOG, help="Slurm Prolog")
    modes.add_argument("--report", dest="mode", action="store_const", const=REPORT, help="print; change nothing")
    parser.add_argument("--json", action="store_true", help="--report: one JSON object per check")
    parser.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("PATH", SYSTEM_PATH)
    try:
        facts = load_facts(args.root)
    except FactsError as error:
        if args.mode == REPORT:
            sys.stderr.write("hyperpod-cdk health: {}\n".format(error))
            return 2
        # Not a node this runtime bootstrapped: never fail its jobs or drain it.
        log("health_skipped", why=str(error))
        return 0
    ctx = Context(facts=facts, options=load_health_options(args.root), mode=args.mode, root=args.root)
    results, status = check_and_act(ctx)
    if args.mode == REPORT:
        for result in results:
            if args.json:
                print(json.dumps(asdict(result), sort_keys=True))
            else:
                print("{:<16} {:<8} {}".format(result.name, result.status, result.detail))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
