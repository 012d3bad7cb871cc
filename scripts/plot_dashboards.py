#!/usr/bin/env python3
"""Draw each dashboard's panels from a Prometheus server's data: one PNG per dashboard, one plot per panel.

For the docs: run a workload on the local cluster, then::

    .venv/bin/python scripts/plot_dashboards.py --prometheus http://127.0.0.1:9090 --last 30m
    .venv/bin/python scripts/plot_dashboards.py --prometheus URL --start 2026-11-24T10:00:00Z \\
        --end 2026-11-24T10:30:00Z --var job_id=12 --dashboard job

Each panel's queries (from the committed dashboards, src/hyperpod_cdk/data/dashboards/) run as range queries
(``/api/v1/query_range``) with Grafana's variables substituted as Grafana would; a query variable not given with
``--var`` is "All" where the variable offers it, else the data source's latest value (the highest job id).
The PNGs go to docs/dashboards/<dashboard>.png.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib
import numpy

matplotlib.use("Agg")

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hyperpod_cdk.observability import (  # noqa: E402
    DASHBOARDS,
    PanelQuery,
    dashboard_json,
    panel_queries,
    render_query,
    template_variables,
)

OUT = ROOT / "docs" / "dashboards"
POINTS = 240
"""About how many points a panel's range query returns (Grafana asks for about one per pixel)."""
MAX_LEGEND = 8
_DURATION = re.compile(r"(\d+)([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _unix(seconds: float) -> str:
    return str(int(seconds)) if seconds == int(seconds) else str(seconds)


class PlotError(Exception):
    """Prometheus refused or failed a query, or a variable has no value: the message says which and how to fix."""


@dataclass(frozen=True)
class Window:
    """The time range and resolution of every query: Grafana's $__range, $__interval and $__rate_interval."""

    start: float
    end: float
    step: int
    scrape_interval: int = 15

    @property
    def rate_interval(self) -> int:
        return max(self.step + self.scrape_interval, 4 * self.scrape_interval)

    def render(self, expr: str, variables: Mapping[str, str]) -> str:
        return render_query(
            expr,
            variables,
            interval_s=self.step,
            range_s=int(self.end - self.start),
            rate_interval_s=self.rate_interval,
        )


class Prometheus:
    """The few calls of Prometheus' HTTP API (also Amazon Managed Service for Prometheus' query API) we need."""

    def __init__(self, url: str, timeout_s: float = 30) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def get(self, path: str, params: Sequence[tuple[str, str]]) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as response:
                body = json.load(response)
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}") if error.headers.get_content_type() == "application/json" else {}
            body.setdefault("error", f"HTTP {error.code} {error.reason}")
        except (urllib.error.URLError, OSError) as error:
            raise PlotError(f"cannot reach Prometheus at {self.url}: {error}; check --prometheus") from error
        if body.get("status") != "success":
            raise PlotError(body.get("error", f"unexpected answer from {url}"))
        return body["data"]

    def query_range(self, expr: str, window: Window) -> list[dict[str, Any]]:
        params = [
            ("query", expr),
            ("start", _unix(window.start)),
            ("end", _unix(window.end)),
            ("step", str(window.step)),
        ]
        result: list[dict[str, Any]] = self.get("/api/v1/query_range", params)["result"]
        return result

    def label_values(self, label: str, selector: str, window: Window) -> list[str]:
        params = [("match[]", selector), ("start", _unix(window.start)), ("end", _unix(window.end))]
        values: list[str] = self.get(f"/api/v1/label/{urllib.parse.quote(label)}/values", params)
        return values


def resolve_variables(
    model: Mapping[str, Any], given: Mapping[str, str], prometheus: Prometheus, window: Window
) -> dict[str, str]:
    """A value for each of the dashboard's query variables: given, else "All", else the latest in the data."""
    values: dict[str, str] = {}
    for variable in template_variables(model):
        if variable.name in given:
            values[variable.name] = given[variable.name]
        elif variable.all_value is not None:
            values[variable.name] = variable.all_value
        elif variable.label_values is not None:
            selector, label = variable.label_values
            found = prometheus.label_values(label, window.render(selector, values), window)
            if not found:
                raise PlotError(
                    f"dashboard {model['title']!r}: no value of {label!r} in {selector} between the start and the "
                    f"end; pass --var {variable.name}=VALUE or another time range"
                )
            values[variable.name] = max(found, key=lambda v: (v.isdigit(), int(v) if v.isdigit() else 0, v))
    return values


def legend(template: str, labels: Mapping[str, str]) -> str:
    """A series' name as Grafana's legend format writes it (``{{label}}``; ``__auto``: the labels)."""
    named = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()
    if named and template != "__auto":
        return named
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or "value"


def plot_dashboard(
    model: Mapping[str, Any], prometheus: Prometheus, window: Window, given: Mapping[str, str]
) -> Figure:
    """One figure: a plot per panel with queries, each series of each query a line."""
    variables = resolve_variables(model, given, prometheus, window)
    panels: dict[int, list[PanelQuery]] = {}
    for q in panel_queries(model):
        panels.setdefault(q.panel_id, []).append(q)
    columns = 2
    rows = max(1, math.ceil(len(panels) / columns))
    figure = plt.figure(figsize=(7 * columns, 3 * rows), layout="constrained")
    chosen = ", ".join(f"{k}={v}" for k, v in variables.items())
    figure.suptitle(f"{model['title']} ({chosen})" if chosen else str(model["title"]))
    for number, queries in enumerate(panels.values(), start=1):
        axes = figure.add_subplot(rows, columns, number)
        axes.set_title(queries[0].panel, fontsize=10)
        for q in queries:
            expr = window.render(q.expr, variables)
            try:
                series = prometheus.query_range(expr, window)
            except PlotError as error:
                raise PlotError(f"{q.where}: Prometheus answered {error} for {expr}") from error
            for one in series:
                times = numpy.array([round(float(t)) for t, _ in one["values"]], dtype="datetime64[s]")
                axes.plot(times, [float(v) for _, v in one["values"]], label=legend(q.legend, one["metric"]))
        lines = axes.get_lines()
        if not lines:
            axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes, color="grey")
        elif len(lines) <= MAX_LEGEND:
            axes.legend(fontsize=7, loc="upper left")
        axes.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))  # type: ignore[no-untyped-call]
        axes.tick_params(labelsize=7)
    return figure


def timestamp(text: str) -> float:
    """Unix seconds from ``1732442400`` or an ISO 8601 time (``2026-11-24T10:00:00Z``)."""
    try:
        return float(text)
    except ValueError:
        try:
            return datetime.fromisoformat(text).timestamp()
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{text!r} is neither unix seconds nor an ISO 8601 time") from error


def duration(text: str) -> int:
    """Seconds from ``90s``, ``30m``, ``1h30m`` or ``2d``."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30m, 1h or 1h30m")
    return sum(int(n) * _SECONDS[u] for n, u in parts)


def variable(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (for example job_id=12)")
    return name, value


def main(argv: list[str] | None = None, now: float | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prometheus", required=True, help="the Prometheus server's URL, e.g. http://127.0.0.1:9090")
    parser.add_argument("--start", type=timestamp, help="unix seconds or ISO 8601 (default: --last before --end)")
    parser.add_argument("--end", type=timestamp, help="unix seconds or ISO 8601 (default: now)")
    parser.add_argument("--last", type=duration, default=3600, help="the range when --start is not given (1h)")
    parser.add_argument("--step", type=duration, help=f"seconds between points (default: the range / {POINTS})")
    parser.add_argument("--scrape-interval", type=duration, default=15, help="the nodes' scrape interval (15s)")
    parser.add_argument("--var", type=variable, action="append", default=[], help="a dashboard variable NAME=VALUE")
    parser.add_argument("--dashboard", action="append", choices=DASHBOARDS, help="only this one (repeatable)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the PNGs go (docs/dashboards)")
    args = parser.parse_args(argv)
    end = args.end if args.end is not None else (now if now is not None else datetime.now(UTC).timestamp())
    start = args.start if args.start is not None else end - args.last
    if start >= end:
        parser.error(f"--start ({start}) must be before --end ({end})")
    step = args.step or max(1, math.ceil((end - start) / POINTS))
    window = Window(start=start, end=end, step=step, scrape_interval=args.scrape_interval)
    prometheus = Prometheus(args.prometheus)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.dashboard or DASHBOARDS:
        try:
            figure = plot_dashboard(dashboard_json(name), prometheus, window, dict(args.var))
        except PlotError as error:
            print(f"plot_dashboards: {error}", file=sys.stderr)
            return 1
        figure.savefig(args.out / f"{name}.png", dpi=80)
        plt.close(figure)
        print(args.out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
