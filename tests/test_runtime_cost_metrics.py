"""The hyperpod_cost_* metrics: the `cost` report's figures for this month, as gauges, from the same commands
(`sacct`, `scontrol -o show partition`, `sshare`) the collector runs on the controller."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from test_cost_report import PARTITIONS, SACCT, SSHARE
from training_runtime.metrics import catalog
from training_runtime.metrics.cost import BUDGET_LEFT, IDLE, SPEND, SUCCESS, cost_families
from training_runtime.metrics.exposition import render


def controller(argv: Sequence[str]) -> str:
    return {"sacct": SACCT, "scontrol": PARTITIONS, "sshare": SSHARE}[argv[0]]


def test_the_month_so_far_as_gauges() -> None:
    asked: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        asked.append(list(argv))
        return controller(argv)

    # the month begins on the 1st: the window holds the whole fixture (jobs of the 20th, 10:00 to 12:00); the
    # collector takes its clock (``now``), so the fixture's date is fixed with it
    text = render(cost_families(run, datetime(2026, 11, 20, 12, 0)))
    assert asked[0][-4:] == ["-S", "2026-11-01T00:00:00", "-E", "2026-11-20T12:00:00"]
    assert f'{SPEND}{{account="ml"}} 244.8' in text and f'{SPEND}{{account="vision"}} 97.92' in text
    assert f'{BUDGET_LEFT}{{account="ml"}} 255.2' in text and 'account="vision"} 0' not in text
    assert f"{SUCCESS} 1" in text
    # idle: 2 nodes over 19.5 days (468 h) = 936 node-hours less the 3.5 the jobs held, at 97.92
    assert f'{IDLE}{{partition="p5"}} {round((936 - 3.5) * 97.92, 4)}' in text
    # the collector's clock is its argument, fixed with the fixture
    assert {f.name for f in cost_families(run, datetime(2026, 11, 20, 12, 0))} == set(catalog.METRICS["cost"])


def test_no_accounting_no_figures_and_success_zero() -> None:
    def run(argv: Sequence[str]) -> str:
        raise RuntimeError("sacct exited 1: Slurm accounting storage is disabled")

    text = render(cost_families(run, datetime(2026, 11, 20, 12, 0)))  # its clock is its argument
    assert f"{SUCCESS} 0" in text and SPEND + "{" not in text
