"""Instance prices per hour for SageMaker HyperPod, each with where it came from.

Three sources, the later overriding the earlier: the snapshot shipped with the package
(``data/prices_snapshot.json``, source ``snapshot <date>``: synth stays offline), the AWS Price List API where a
command asks it (:mod:`hyperpod_cdk.ops.price_list`, source ``price-list <publication date>``), and the config's
``cost.prices`` (source ``config: <what the user wrote>``: a training plan's, savings plan's or Spot rate).

The Price List entries: HyperPod cluster instances are priced under the service code ``AmazonSageMaker`` with the
usage type ``<REGION>-Cluster:ml.<type>`` (e.g. ``USE1-Cluster:ml.p5.48xlarge``). AWS does not document the
attribute names of SageMaker's Price List entries; the pattern is the one public records of the Price List's
answers and of Cost and Usage Reports for HyperPod show, and AWS's HyperPod reference says only that HyperPod
bills "the duration of capacity allocation" with a line item per capacity type, instance type and time
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ref.html, "Service billing"). No boto3 here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

DEFAULT_CURRENCY = "USD"
USAGE_TYPE = re.compile(r"^[A-Z0-9]+-Cluster:(ml\.[a-z0-9]+\.[a-z0-9]+)$")
"""A HyperPod cluster instance's usage type; ``-Reserved`` and volume usage types do not match."""
HOURLY_UNITS = ("Hrs", "Hours", "hour")


@dataclass(frozen=True)
class Price:
    instance_type: str
    per_hour: float
    currency: str
    source: str
    """``price-list <date>``, ``snapshot <date>`` or ``config: <source>``."""


@cache
def snapshot() -> dict[str, Any]:
    """The shipped snapshot: ``date``, ``currency``, ``source`` and ``regions`` -> type -> ``per_hour``."""
    text = resources.files("hyperpod_cdk").joinpath("data/prices_snapshot.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def snapshot_prices(region: str | None) -> dict[str, Price]:
    """The snapshot's prices in ``region`` (none for an unknown or unresolved Region)."""
    data = snapshot()
    source = f"snapshot {data['date']}"
    entries = data["regions"].get(region or "", {})
    return {t: Price(t, float(e["per_hour"]), data["currency"], source) for t, e in entries.items()}


def parse_price_list(price_list: Iterable[str], region: str, currency: str = DEFAULT_CURRENCY) -> dict[str, Price]:
    """Each HyperPod instance type's on-demand price from ``GetProducts``' ``PriceList`` (JSON strings, format
    ``aws_v1``); entries of another Region, another usage type or without an hourly price in ``currency`` are
    skipped."""
    found: dict[str, Price] = {}
    for text in price_list:
        item = json.loads(text)
        attributes = item.get("product", {}).get("attributes", {})
        if attributes.get("regionCode") not in (None, region):
            continue
        match = USAGE_TYPE.fullmatch(str(attributes.get("usagetype", "")))
        if match is None:
            continue
        per_hour = _on_demand_hourly(item.get("terms", {}).get("OnDemand", {}), currency)
        if per_hour is None:
            continue
        date = str(item.get("publicationDate", ""))[:10] or "unknown date"
        found[match.group(1)] = Price(match.group(1), per_hour, currency, f"price-list {date}")
    return found


def _on_demand_hourly(terms: Mapping[str, Any], currency: str) -> float | None:
    for term in terms.values():
        for dimension in term.get("priceDimensions", {}).values():
            value = dimension.get("pricePerUnit", {}).get(currency)
            if value is not None and dimension.get("unit") in HOURLY_UNITS and float(value) > 0:
                return float(value)
    return None


@dataclass(frozen=True)
class Resolved:
    prices: dict[str, Price]
    missing: tuple[str, ...]
    """Types with no price from any source: their partitions get no billing weights."""


def resolve(
    instance_types: Iterable[str],
    region: str | None,
    overrides: Mapping[str, tuple[float, str]] | None = None,
    currency: str = DEFAULT_CURRENCY,
    live: Mapping[str, Price] | None = None,
) -> Resolved:
    """Each type's price: the config's override (``per_hour``, ``source``), else the Price List's answer (``live``),
    else the snapshot's (only when its currency is ``currency``)."""
    overrides = overrides or {}
    known = snapshot_prices(region) if snapshot()["currency"] == currency else {}
    known.update(live or {})
    prices: dict[str, Price] = {}
    missing = []
    for name in sorted(set(instance_types)):
        if name in overrides:
            per_hour, source = overrides[name]
            prices[name] = Price(name, float(per_hour), currency, f"config: {source}")
        elif name in known:
            prices[name] = known[name]
        else:
            missing.append(name)
    return Resolved(prices, tuple(missing))
