#!/usr/bin/env python3
"""Write the Grafana dashboards (JSON under src/hyperpod_cdk/data/dashboards/) from their definitions here.

The dashboards are built with Grafana's foundation SDK (``grafana-foundation-sdk``, a development dependency);
the JSON is package data, so users of the library need neither this script nor the SDK::

    .venv/bin/python scripts/gen_dashboards.py          # rewrite the JSON
    .venv/bin/python scripts/gen_dashboards.py --check  # exit 1 if a committed copy is stale

Metric names come from the exporters' catalog (``training_runtime.metrics.catalog``); tests/test_dashboards.py
checks that every query parses and names only catalogued metrics. Every selector is filtered by the ``cluster``
variable (the label the nodes' scrape configuration adds), and every panel reads the data source chosen in the
``datasource`` variable (Amazon Managed Service for Prometheus through Grafana's SigV4, or a plain Prometheus).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders.common import ReduceDataOptions, StackingConfig, VizLegendOptions
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from training_runtime.metrics.slurm import OUT_OF_SERVICE_STATES

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "hyperpod_cdk" / "data" / "dashboards"

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
C = 'cluster=~"$cluster"'
"""The cluster filter every selector carries."""
RATE = "[$__rate_interval]"
JOB_NODES = f'label_replace(slurm_job_nodes{{{C}, job_id="$job_id"}}, "instance", "$1", "node", "(.*)")'
"""The selected job's nodes, one series per node, its Slurm node name as ``instance`` (the nodes' hostname)."""
UNHEALTHY_STATES = "|".join(OUT_OF_SERVICE_STATES)
"""Slurm's compact node states (slurm_node_state's ``state`` label) of a node out of service, as the collector
defines them."""

Panel = timeseries.Panel | stat.Panel | table.Panel


def on_job_nodes(expr: str) -> str:
    """``expr`` (one series per ``instance``, or finer) kept only for the selected job's nodes."""
    return f"({expr}) and on (instance) {JOB_NODES}"


def query(expr: str, legend: str = "", ref_id: str = "A", instant: bool = False) -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).ref_id(ref_id).legend_format(legend or "__auto")
    return q.instant().format(PromQueryFormat.TABLE) if instant else q.range()


def graph(title: str, unit: str, *queries: prometheus.Dataquery, description: str = "", stack: bool = False) -> Panel:
    """A time series panel."""
    panel = timeseries.Panel().title(title).description(description).unit(unit).datasource(DATASOURCE)
    panel = panel.legend(VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.LIST))
    if stack:
        panel = panel.stacking(StackingConfig().mode(common.StackingMode.NORMAL)).fill_opacity(30)
    for q in queries:
        panel = panel.with_target(q)
    return panel.span(12).height(8)


def single(title: str, unit: str, q: prometheus.Dataquery, description: str = "") -> Panel:
    """A stat panel: the last value."""
    options = ReduceDataOptions().calcs(["lastNotNull"])
    panel = stat.Panel().title(title).description(description).unit(unit).datasource(DATASOURCE)
    return panel.reduce_options(options).with_target(q).span(6).height(4)


def listing(title: str, q: prometheus.Dataquery, description: str = "") -> Panel:
    """A table panel of an instant query's series and labels."""
    panel = table.Panel().title(title).description(description).datasource(DATASOURCE).show_header(True)
    return panel.with_target(q).span(24).height(8)


def base(title: str, uid: str, description: str) -> db.Dashboard:
    """A dashboard with the data source and cluster variables every dashboard of ours has."""
    return (
        db.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["hyperpod", "slurm"])
        .time("now-6h", "now")
        .refresh("1m")
        .timezone("browser")
        .with_variable(db.DatasourceVariable("datasource").label("Data source").type("prometheus"))
        .with_variable(
            db.QueryVariable("cluster")
            .label("Cluster")
            .datasource(DATASOURCE)
            .query("label_values(up, cluster)")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .include_all(True)
            .all_value(".*")
            .multi(True)
        )
    )


def cluster_overview() -> db.Dashboard:
    node_cpu = f'1 - avg by (instance) (rate(node_cpu_seconds_total{{{C}, mode="idle"}}{RATE}))'
    memory = f"1 - node_memory_MemAvailable_bytes{{{C}}} / node_memory_MemTotal_bytes{{{C}}}"
    return (
        base("HyperPod cluster overview", "hyperpod-cluster-overview", "Slurm nodes, jobs and queue; CPU/GPU use.")
        .with_row(db.Row("Slurm"))
        .with_panel(graph("Nodes by state", "short", query(f"sum by (state) (slurm_nodes{{{C}}})", "{{state}}"),
                          stack=True))
        .with_panel(graph("Running jobs by partition", "short",
                          query(f'sum by (partition) (slurm_jobs{{{C}, state="RUNNING"}})', "{{partition}}")))
        .with_panel(graph("Pending jobs by partition", "short",
                          query(f'sum by (partition) (slurm_jobs{{{C}, state="PENDING"}})', "{{partition}}")))
        .with_panel(graph("Scheduler queue length", "short",
                          query(f"sum by (cluster) (slurm_scheduler_queue_length{{{C}}})", "{{cluster}}")))
        .with_panel(graph("Allocated CPUs and GPUs", "percentunit",
                          query(f'sum(slurm_cpus{{{C}, state="alloc"}}) / sum(slurm_cpus{{{C}, state="total"}})',
                                "CPUs"),
                          query(f'sum(slurm_gpus{{{C}, state="alloc"}}) / sum(slurm_gpus{{{C}, state="total"}})',
                                "GPUs", "B"),
                          description="Share of the cluster's CPUs and GPUs Slurm has given to jobs."))
        .with_panel(graph("Scheduler cycle (mean)", "µs",
                          query(f"slurm_scheduler_cycle_mean_microseconds{{{C}}}", "{{cluster}}")))
        .with_panel(graph("Spend this month", "short",
                          query(f"sum by (account) (hyperpod_cost_spend{{{C}}})", "{{account}}"),
                          query(f"sum(hyperpod_cost_idle{{{C}}})", "idle", "B"),
                          query(f"sum by (account) (hyperpod_cost_budget_left{{{C}}})", "{{account}} budget left", "C"),
                          description="In the cluster's currency (config cost): each Slurm account's spend from its "
                          "jobs' billing, the priced partitions' idle node-hours, and each account's budget left "
                          "(hyperpod-cdk cost; docs/cost.md)."))
        .with_row(db.Row("Utilisation"))
        .with_panel(graph("CPU use by node", "percentunit", query(node_cpu, "{{instance}}")))
        .with_panel(graph("GPU use by node", "percent",
                          query(f"avg by (instance) (DCGM_FI_DEV_GPU_UTIL{{{C}}})", "{{instance}}")))
        .with_panel(graph("Memory used by node", "percentunit", query(memory, "{{instance}}")))
        .with_panel(graph("GPU memory used by node", "percentunit",
                          query(f"sum by (instance) (DCGM_FI_DEV_FB_USED{{{C}}}) / (sum by (instance) "
                                f"(DCGM_FI_DEV_FB_USED{{{C}}}) + sum by (instance) (DCGM_FI_DEV_FB_FREE{{{C}}}))",
                                "{{instance}}")))
        .with_panel(graph("Network received by node", "Bps",
                          query(f'sum by (instance) (rate(node_network_receive_bytes_total{{{C}, device!="lo"}}'
                                f"{RATE}))", "{{instance}}")))
        .with_panel(graph("Network sent by node", "Bps",
                          query(f'sum by (instance) (rate(node_network_transmit_bytes_total{{{C}, device!="lo"}}'
                                f"{RATE}))", "{{instance}}")))
    )  # fmt: skip


def job_view() -> db.Dashboard:
    cpu = f'1 - avg by (instance) (rate(node_cpu_seconds_total{{{C}, mode="idle"}}{RATE}))'
    memory = f"1 - node_memory_MemAvailable_bytes{{{C}}} / node_memory_MemTotal_bytes{{{C}}}"
    return (
        base("HyperPod job", "hyperpod-job", "One Slurm job: its nodes and what they do.")
        .with_variable(
            db.QueryVariable("job_id")
            .label("Job")
            .datasource(DATASOURCE)
            .query(f"label_values(slurm_job_nodes{{{C}}}, job_id)")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.NUMERICAL_DESC)
        )
        .with_panel(listing("Nodes of the job",
                            query(f'slurm_job_nodes{{{C}, job_id="$job_id"}}', "{{node}}", instant=True),
                            "One row per node Slurm gave the job (user, partition)."))
        .with_panel(graph("Nodes of the job over time", "short",
                          query(f'count(slurm_job_nodes{{{C}, job_id="$job_id"}})', "nodes")))
        .with_panel(graph("CPU use", "percentunit", query(on_job_nodes(cpu), "{{instance}}")))
        .with_panel(graph("Memory used", "percentunit", query(on_job_nodes(memory), "{{instance}}")))
        .with_panel(graph("GPU use", "percent",
                          query(on_job_nodes(f"DCGM_FI_DEV_GPU_UTIL{{{C}}}"), "{{instance}} GPU {{gpu}}")))
        .with_panel(graph("Tensor core activity", "percentunit",
                          query(on_job_nodes(f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{C}}}"),
                                "{{instance}} GPU {{gpu}}")))
        .with_panel(graph("GPU memory used", "mbytes",
                          query(on_job_nodes(f"DCGM_FI_DEV_FB_USED{{{C}}}"), "{{instance}} GPU {{gpu}}")))
        .with_panel(graph("GPU memory bandwidth use", "percentunit",
                          query(on_job_nodes(f"DCGM_FI_PROF_DRAM_ACTIVE{{{C}}}"), "{{instance}} GPU {{gpu}}")))
        .with_panel(graph("GPU power", "watt",
                          query(on_job_nodes(f"DCGM_FI_DEV_POWER_USAGE{{{C}}}"), "{{instance}} GPU {{gpu}}")))
        .with_panel(graph("NVLink bandwidth", "Bps",
                          query(on_job_nodes(f"rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{C}}}{RATE})"),
                                "{{instance}} GPU {{gpu}}")))
        .with_panel(graph("Network received", "Bps",
                          query(on_job_nodes(f'sum by (instance) (rate(node_network_receive_bytes_total{{{C}, '
                                             f'device!="lo"}}{RATE}))'), "{{instance}}")))
        .with_panel(graph("Network sent", "Bps",
                          query(on_job_nodes(f'sum by (instance) (rate(node_network_transmit_bytes_total{{{C}, '
                                             f'device!="lo"}}{RATE}))'), "{{instance}}")))
    )  # fmt: skip


def node_health() -> db.Dashboard:
    unhealthy = f'slurm_node_state{{{C}, state=~"{UNHEALTHY_STATES}"}}'
    return (
        base("HyperPod node health", "hyperpod-node-health",
             "Nodes out of service and why, reboots and replacements, exporters down, GPU errors.")
        .with_panel(single("Nodes out of service", "short", query(f"count({unhealthy}) or vector(0)", "nodes")))
        .with_panel(single("Exporters down", "short", query(f"count(up{{{C}}} == 0) or vector(0)", "targets")))
        .with_panel(single("GPUs reporting an XID error", "short",
                           query(f"count(DCGM_FI_DEV_XID_ERRORS{{{C}}} > 0) or vector(0)", "GPUs")))
        .with_panel(single("Slurm metrics collected", "bool_yes_no",
                           query(f"min(slurm_collector_success{{{C}}})", "collector"),
                           "1 when the controller's last Slurm collection worked."))
        .with_panel(listing("Drained and down nodes", query(unhealthy, "{{node}} {{state}}: {{reason}}", instant=True),
                            "Slurm's state and reason for each node out of service (our health checks give the "
                            "reason when they drain a node)."))
        .with_panel(graph("Nodes out of service by state", "short",
                          query(f"count by (state) ({unhealthy})", "{{state}}"), stack=True))
        .with_panel(graph("Nodes out of service by reason", "short",
                          query(f"count by (reason) ({unhealthy})", "{{reason}}"), stack=True))
        .with_panel(graph("Reboots", "short",
                          query(f"changes(node_boot_time_seconds{{{C}}}[1h])", "{{instance}}"),
                          description="Boots in the hour before each point (node_boot_time_seconds changes)."))
        .with_panel(graph("Uptime", "s", query(f"time() - node_boot_time_seconds{{{C}}}", "{{instance}}"),
                          description="A replaced node appears as a new instance with a short uptime."))
        .with_panel(graph("Exporters down over time", "short",
                          query(f"sum by (job, instance) (up{{{C}}} == 0)", "{{job}} {{instance}}")))
        .with_panel(graph("Exporters up", "short", query(f"sum by (job) (up{{{C}}})", "{{job}}")))
        .with_panel(graph("XID errors (last XID per GPU)", "short",
                          query(f"max by (instance, gpu) (DCGM_FI_DEV_XID_ERRORS{{{C}}}) > 0",
                                "{{instance}} GPU {{gpu}}"),
                          description="DCGM reports the number of the last XID error a GPU raised."))
        .with_panel(graph("GPU temperature", "celsius",
                          query(f"DCGM_FI_DEV_GPU_TEMP{{{C}}}", "{{instance}} GPU {{gpu}}")))
        .with_panel(graph("Root file system free", "percentunit",
                          query(f'node_filesystem_avail_bytes{{{C}, mountpoint="/"}} / '
                                f'node_filesystem_size_bytes{{{C}, mountpoint="/"}}', "{{instance}}")))
        .with_panel(graph("Load (1 minute)", "short", query(f"node_load1{{{C}}}", "{{instance}}")))
    )  # fmt: skip


BUILDERS: dict[str, Callable[[], db.Dashboard]] = {
    "cluster-overview": cluster_overview,
    "job": job_view,
    "node-health": node_health,
}
"""Each dashboard's file name (hyperpod_cdk.observability.DASHBOARDS) and its definition."""


def render_all() -> dict[str, str]:
    """Each dashboard's file name and its JSON text, panels numbered in order."""
    rendered: dict[str, str] = {}
    for name, build in BUILDERS.items():
        model = json.loads(json.dumps(build().build(), cls=JSONEncoder))
        for number, panel in enumerate(model["panels"], start=1):
            panel["id"] = number
        rendered[f"{name}.json"] = json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return rendered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed copy is stale")
    args = parser.parse_args(argv)
    rendered = render_all()
    stale = sorted(
        {name for name, text in rendered.items() if not (OUT / name).exists() or (OUT / name).read_text() != text}
        | {path.name for path in OUT.glob("*.json") if path.name not in rendered}
    )
    if args.check:
        for name in stale:
            print(f"{OUT / name} is stale: run scripts/gen_dashboards.py", file=sys.stderr)
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for path in OUT.glob("*.json"):
        if path.name not in rendered:
            path.unlink()
    for name, text in rendered.items():
        (OUT / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
