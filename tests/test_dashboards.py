"""The Grafana dashboards: committed JSON current, every query valid PromQL naming only metrics our exporters emit."""

from __future__ import annotations

import copy
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import promql_parser
import pytest

from hyperpod_cdk.observability import (
    DASHBOARDS,
    dashboard_json,
    panel_queries,
    render_query,
    template_variables,
)
from training_runtime.metrics.catalog import ALL_METRICS

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_VARIABLES = {"cluster": ".*", "job_id": "1"}
"""Values for the dashboards' variables while checking their queries."""


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    """Every vector selector of a PromQL expression (raises ValueError when it does not parse)."""
    found: list[promql_parser.VectorSelector] = []

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def query_problems(expr: str, where: str) -> list[str]:
    """What is wrong with one dashboard query: PromQL syntax, a selector without a name, an uncatalogued metric."""
    rendered = render_query(expr, EXAMPLE_VARIABLES, interval_s=15, range_s=3600, rate_interval_s=60)
    try:
        found = selectors(rendered)
    except ValueError as error:
        return [f"{where}: {expr!r} is not valid PromQL: {error}"]
    problems = []
    for selector in found:
        if not selector.name:
            problems.append(f"{where}: {expr!r} has a selector without a metric name: {selector}")
        elif selector.name not in ALL_METRICS:
            problems.append(
                f"{where}: {expr!r} names {selector.name!r}, which no exporter in "
                "training_runtime.metrics.catalog emits"
            )
    return problems


def dashboard_problems(model: Mapping[str, Any]) -> list[str]:
    """Every problem of every panel query and every variable query of a dashboard."""
    problems = [p for q in panel_queries(model) for p in query_problems(q.expr, q.where)]
    for variable in template_variables(model):
        where = f"dashboard {model['title']!r}, variable {variable.name!r}"
        if variable.label_values is None:
            problems.append(f"{where}: {variable.query!r} is not label_values(selector, label)")
        else:
            problems.extend(query_problems(variable.label_values[0], where))
    return problems


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return _script("gen_dashboards")


def test_committed_dashboards_are_current(generator: ModuleType) -> None:
    rendered = generator.render_all()
    assert sorted(rendered) == sorted(f"{name}.json" for name in DASHBOARDS)
    committed = {path.name: path.read_text() for path in generator.OUT.glob("*.json")}
    assert committed == rendered, "src/hyperpod_cdk/data/dashboards/ is stale: run scripts/gen_dashboards.py"
    assert generator.main(["--check"]) == 0


@pytest.mark.parametrize("name", DASHBOARDS)
def test_every_query_parses_and_names_only_catalogued_metrics(name: str) -> None:
    model = dashboard_json(name)
    assert panel_queries(model), name
    assert dashboard_problems(model) == []


MUTATIONS = [
    ("unknown metric", "slurm_nodes", "slurm_nodez", "names 'slurm_nodez', which no exporter"),
    ("syntax error", "sum by (state) (slurm_nodes", "sum by (state) ((slurm_nodes", "is not valid PromQL"),
    ("unknown function", "sum by (state)", "summ by (state)", "is not valid PromQL"),
    ("nameless selector", 'slurm_nodes{cluster=~"$cluster"}', '{__name__=~"slurm.*"}', "without a metric name"),
]


@pytest.mark.parametrize(("old", "new", "message"), [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_the_check_catches_a_broken_panel_query(old: str, new: str, message: str) -> None:
    model = copy.deepcopy(dashboard_json("cluster-overview"))
    panel = next(p for p in model["panels"] if p["title"] == "Nodes by state")
    assert old in panel["targets"][0]["expr"]
    panel["targets"][0]["expr"] = panel["targets"][0]["expr"].replace(old, new)
    problems = dashboard_problems(model)
    assert len(problems) == 1, problems
    assert "panel 'Nodes by state', query A" in problems[0]
    assert message in problems[0]


def test_the_check_catches_a_variable_query_naming_an_unknown_metric() -> None:
    model = copy.deepcopy(dashboard_json("job"))
    variable = next(v for v in model["templating"]["list"] if v["name"] == "job_id")
    variable["query"] = variable["query"].replace("slurm_job_nodes", "slurm_job_node")
    selector = 'slurm_job_node{cluster=~"$cluster"}'
    assert dashboard_problems(model) == [
        f"dashboard 'HyperPod job', variable 'job_id': {selector!r} names "
        "'slurm_job_node', which no exporter in training_runtime.metrics.catalog emits"
    ]


@pytest.mark.parametrize("name", DASHBOARDS)
def test_every_panel_reads_the_chosen_prometheus_data_source(name: str) -> None:
    model = dashboard_json(name)
    [datasource] = [v for v in model["templating"]["list"] if v["type"] == "datasource"]
    assert (datasource["name"], datasource["query"]) == ("datasource", "prometheus")
    panels = [p for p in model["panels"] if p["type"] != "row"]
    assert {json.dumps(p["datasource"], sort_keys=True) for p in panels} == {
        json.dumps({"type": "prometheus", "uid": "${datasource}"}, sort_keys=True)
    }


@pytest.mark.parametrize("name", DASHBOARDS)
def test_every_selector_is_filtered_by_the_cluster_variable(name: str) -> None:
    """One workspace may hold several clusters: a panel without the filter would mix them."""
    for q in panel_queries(dashboard_json(name)):
        rendered = render_query(q.expr, {}, interval_s=15, range_s=3600, rate_interval_s=60)
        for selector in selectors(rendered):
            matchers = {(m.name, m.value) for m in selector.matchers.matchers}
            assert ("cluster", "$cluster") in matchers, f"{q.where}: {selector} is not filtered by cluster"


def test_every_job_view_panel_is_about_the_selected_job() -> None:
    for q in panel_queries(dashboard_json("job")):
        assert 'job_id="$job_id"' in q.expr, q.where


REQUIRED_METRICS = {
    "cluster-overview": {
        "slurm_nodes", "slurm_jobs", "slurm_scheduler_queue_length", "slurm_cpus", "slurm_gpus",
        "node_cpu_seconds_total", "node_memory_MemAvailable_bytes", "node_network_receive_bytes_total",
        "node_network_transmit_bytes_total", "DCGM_FI_DEV_GPU_UTIL", "hyperpod_cost_spend", "hyperpod_cost_idle",
        "hyperpod_cost_budget_left",
    },
    "job": {
        "slurm_job_nodes", "node_cpu_seconds_total", "DCGM_FI_DEV_GPU_UTIL", "node_network_receive_bytes_total",
        "node_network_transmit_bytes_total",
    },
    "node-health": {"slurm_node_state", "node_boot_time_seconds", "up", "DCGM_FI_DEV_XID_ERRORS"},
}  # fmt: skip
"""What issue #15 asks each dashboard to show, by the metrics that show it."""


@pytest.mark.parametrize("name", DASHBOARDS)
def test_each_dashboard_shows_what_it_is_for(name: str) -> None:
    used = {s.name for q in panel_queries(dashboard_json(name)) for s in selectors(render_query(
        q.expr, EXAMPLE_VARIABLES, interval_s=15, range_s=3600, rate_interval_s=60))}  # fmt: skip
    assert REQUIRED_METRICS[name] - used == set()


@pytest.mark.parametrize("name", DASHBOARDS)
def test_panel_ids_titles_and_query_ids_are_unique(name: str) -> None:
    model = dashboard_json(name)
    for key in ("id", "title"):
        values = [p[key] for p in model["panels"]]
        assert len(values) == len(set(values)), key
    for panel in model["panels"]:
        refs = [t["refId"] for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs)) and "" not in refs, panel["title"]


def test_render_query_substitutes_grafanas_variables_and_leaves_others() -> None:
    expr = 'rate(x{a="$job_id", b="${cluster}", c="[[job_id]]"}[$__rate_interval]) + changes(y[$__range]) + "$1"'
    assert render_query(expr, {"job_id": "7", "cluster": "c1"}, interval_s=30, range_s=7200, rate_interval_s=120) == (
        'rate(x{a="7", b="c1", c="7"}[120s]) + changes(y[7200s]) + "$1"'
    )


def test_an_unknown_dashboard_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="no dashboard 'jobs'; the dashboards are cluster-overview, job, node-health"):
        dashboard_json("jobs")
