"""Rules on the ``cost`` section: prices (docs/cost.md, "Prices") and the AWS budget ("AWS budget")."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_cdk.aws_data.prices import snapshot
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

CURRENCY = re.compile(r"^[A-Z]{3}$")
BUDGETS_NOTIFICATION = "AWS Budgets API reference: Notification (Threshold, ThresholdType PERCENTAGE)"

rule = REGISTRY.rule


def _at(view: ClusterView, rest: str) -> str:
    return view.path("cost", rest)


def _types(view: ClusterView, compute_only: bool = False) -> set[str]:
    """The instance types the groups run (a flexible group's candidates too); ``compute_only``: those that have
    partitions, the ones billing weights are for."""
    found: set[str] = set()
    for group in view.compute_groups if compute_only else view.groups:
        found.update(t for t in view.types_of(group) if view.concrete(t))
    return found


@rule("COST-CURRENCY", "cost", "cost.currency", source="ISO 4217 currency codes (the Price List's pricePerUnit keys)")
def currency(view: ClusterView) -> Iterator[Problem]:
    """The currency is an ISO 4217 code such as USD."""
    cost = view.cost
    if cost is not None and not CURRENCY.fullmatch(cost.currency):
        yield Problem(
            _at(view, "currency"),
            "expected a three-letter ISO 4217 code such as 'USD'",
            got=cost.currency,
            fix="write the code in capitals; the Price List and the snapshot price in USD",
        )


@rule("COST-PRICE", "cost", "cost.prices.<type>", source="hyperpod-cdk (docs/cost.md, Prices)")
def price(view: ClusterView) -> Iterator[Problem]:
    """A price override is zero or more per hour and says where the rate comes from."""
    cost = view.cost
    for name, entry in (cost.prices if cost else {}).items():
        if entry.per_hour < 0:
            yield Problem(
                _at(view, f"prices.{name}.per_hour"),
                "a price per instance-hour is zero or more",
                got=entry.per_hour,
                fix="give your rate for the type in cost.currency, e.g. 41.5",
            )
        if not entry.source.strip():
            yield Problem(
                _at(view, f"prices.{name}.source"),
                "say where the rate comes from (it is shown with every figure billed at it)",
                got=entry.source,
                fix="e.g. 'savings plan SP-123, 2026' or 'training plan tp-abc'",
            )


@rule("COST-PRICE-UNUSED", "cost", "cost.prices.<type>", level=WARNING, source="hyperpod-cdk (docs/cost.md, Prices)")
def price_unused(view: ClusterView) -> Iterator[Problem]:
    """A price for a type no instance group runs prices nothing."""
    cost = view.cost
    used = _types(view)
    for name in sorted(cost.prices if cost else {}):
        if name not in used:
            yield Problem(
                _at(view, f"prices.{name}"),
                f"no instance group runs this type (they run {', '.join(sorted(used)) or 'none'}), so it prices "
                "nothing",
                got=name,
                fix="fix the type's name or remove the entry",
            )


@rule(
    "COST-PRICE-SOURCE",
    "cost",
    "cost.prices",
    needs=("cluster", "instance_groups"),
    level=WARNING,
    source="hyperpod-cdk (docs/cost.md, Prices): the shipped snapshot, prices/snapshot",
)
def price_source(view: ClusterView) -> Iterator[Problem]:
    """Synth prices each type from the shipped snapshot unless the config gives a rate: say which, and which
    types have no price at all (their partitions keep Slurm's default billing, CPUs)."""
    cost = view.cost
    if cost is None:
        return
    from hyperpod_cdk.aws_data.prices import resolve

    types = _types(view, compute_only=True)
    found = resolve(types, view.region, {t: (o.per_hour, o.source) for t, o in cost.prices.items()}, cost.currency)
    data = snapshot()
    from_snapshot = sorted(t for t, p in found.prices.items() if p.source.startswith("snapshot"))
    if from_snapshot:
        yield Problem(
            _at(view, "prices"),
            f"{', '.join(from_snapshot)} priced from the snapshot of {data['date']} (on-demand, {data['currency']}), "
            "not from the Price List today",
            fix="check the figure at https://aws.amazon.com/sagemaker/ai/pricing/ and give your rate in "
            "cost.prices, or refresh the snapshot (scripts/price_snapshot.py)",
        )
    if found.missing:
        where = f"in {view.region}" if view.region else "(no Region known at synth: the snapshot is per Region)"
        yield Problem(
            _at(view, "prices"),
            f"no price for {', '.join(found.missing)} {where}: their partitions bill Slurm's default (allocated "
            "CPUs), not money",
            fix="give each a rate: cost.prices: {<type>: {per_hour: ..., source: ...}}, or deploy to a Region "
            "whose snapshot prices it",
        )


@rule("COST-BUDGET", "cost", "cost.aws_budget", source=BUDGETS_NOTIFICATION)
def budget(view: ClusterView) -> Iterator[Problem]:
    """The AWS budget is more than zero a month, and each alert percentage is more than zero and listed once."""
    cost = view.cost
    found = cost.aws_budget if cost else None
    if found is None:
        return
    if found.monthly <= 0:
        yield Problem(
            _at(view, "aws_budget.monthly"),
            "a monthly budget is more than zero",
            got=found.monthly,
            fix="give the cluster's monthly budget in cost.currency, e.g. 50000",
        )
    seen: set[float] = set()
    for index, percent in enumerate(found.alert_percent):
        at = _at(view, f"aws_budget.alert_percent[{index}]")
        if percent <= 0:
            yield Problem(
                at,
                "a percentage of the budget more than 0 (100 is the whole budget)",
                got=percent,
                fix="e.g. alert_percent: [80, 100]",
            )
        elif percent in seen:
            yield Problem(at, "listed twice", got=percent, fix="remove it")
        seen.add(percent)


@rule(
    "COST-BUDGET-TOPIC",
    "cost",
    "cost.aws_budget",
    needs=("observability",),
    source="AWS Cost Management User Guide: Creating an Amazon SNS topic for budget notifications",
)
def budget_topic(view: ClusterView) -> Iterator[Problem]:
    """The budget alerts the cluster's alarm topic, which exists only with observability and its alarms on."""
    cost, obs = view.cost, view.observability
    if cost is None or cost.aws_budget is None or obs is None:
        return
    if not (obs.enabled and obs.alarms.enabled):
        yield Problem(
            _at(view, "aws_budget"),
            "the budget's alerts go to the cluster's alarm topic, and observability (or its alarms) is off, so "
            "there is none",
            fix="set observability.enabled and observability.alarms.enabled to true, or remove cost.aws_budget",
        )
