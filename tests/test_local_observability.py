"""The metrics pipeline end to end on a local cluster: every node's node_exporter scraped by the cluster's
Prometheus server, the controller's Slurm metrics following a job and a drain, and a bootstrap re-run that
changes nothing. One cluster for the module (run under the local-cluster lock)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_local import LocalCluster
from hyperpod_local import metrics as metrics_server
from hyperpod_local.plan import UpOptions
from local_support import CPU_CLUSTER, release, requires_local_cluster, variant
from training_runtime.metrics.catalog import METRICS
from training_runtime.node import GENERIC
from training_runtime.steps.observability import COLLECTOR, NODE_EXPORTER, PID_DIR

pytestmark = requires_local_cluster
INTERVAL = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("obs-cluster")
    config = yaml.safe_load(CPU_CLUSTER.read_text())
    config["runtime"] = {"observability": {"scrape_interval": INTERVAL}}  # no accounting: faster
    path = base / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    cluster = LocalCluster.up(
        path,
        base / "work",
        variant(platform=GENERIC),
        UpOptions(prefix="hpob", subnet="10.247.0.0/24"),
    )
    try:
        yield cluster
    finally:
        server = (base / "work" / metrics_server.DIRECTORY / "pid").read_text().strip()
        cluster.down()
    assert not Path(f"/proc/{server}").exists(), "down left the Prometheus server running (or a zombie of it)"


def series(cluster: LocalCluster, expression: str) -> list[dict[str, Any]]:
    return metrics_server.query(cluster, expression)


def wait_series(cluster: LocalCluster, expression: str, predicate, what: str, timeout: float = 90.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        last = series(cluster, expression)
        if predicate(last):
            return last
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; {expression} = {last}")


def workers(cluster: LocalCluster) -> list[str]:
    return sorted(n.name for n in cluster.layout.workers)


def controller(cluster: LocalCluster) -> str:
    return cluster.layout.controller.name


def test_up_is_one_for_every_nodes_exporter_with_the_contract_labels(cluster: LocalCluster) -> None:
    expected = {n.name: (n.group, n.role) for n in cluster.nodes}
    found = wait_series(
        cluster,
        'up{job="node"} == 1',
        lambda rows: {r["metric"]["instance"] for r in rows} == set(expected),
        "up == 1 for every node",
    )
    for row in found:
        labels = row["metric"]
        assert labels["cluster"] == cluster.layout.cluster_name
        assert (labels["instance_group"], labels["role"]) == expected[labels["instance"]]


def test_the_status_says_where_to_browse_prometheus(cluster: LocalCluster) -> None:
    hint = cluster.status()["prometheus"]
    assert metrics_server.server_url(cluster) in hint and cluster.namespaces.switch in hint


def submit(cluster: LocalCluster, *argv: str) -> str:
    result = cluster.exec(controller(cluster), ["sbatch", "--parsable", *argv], timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().split(";")[0]


def test_a_running_job_shows_on_its_nodes_then_its_completion(cluster: LocalCluster) -> None:
    with release(cluster, "obs-release") as ending:  # the job runs until the test has looked at it running
        job = submit(cluster, "-N", "2", "-p", "cpu", "--wrap", ending.wait)
        rows = wait_series(
            cluster,
            f'slurm_job_nodes{{job_id="{job}"}}',
            lambda rows: sorted(r["metric"]["node"] for r in rows) == workers(cluster),
            f"job {job} on both workers",
        )
        assert {r["metric"]["partition"] for r in rows} == {"cpu"} and {r["metric"]["user"] for r in rows} == {"root"}
        assert series(cluster, 'slurm_jobs{state="RUNNING",partition="cpu"} >= 1')
        assert {r["metric"]["state"] for r in series(cluster, "slurm_nodes")} & {"alloc", "mix"}
        # while a job runs every catalogued node and Slurm metric has a series (the dashboards' names are real)
        missing = [name for name in METRICS["node"] + METRICS["slurm"] if not series(cluster, f"count({name})")]
        assert not missing, f"catalogued metrics Prometheus does not have: {missing}"
        assert float(series(cluster, "slurm_collector_success")[0]["value"][1]) == 1
        running = {r["metric"]["job_id"] for r in series(cluster, "slurm_job_nodes")}
        assert job in running  # shown as long as it runs
    wait_series(cluster, f'slurm_job_nodes{{job_id="{job}"}}', lambda rows: not rows, f"job {job} gone", 120)
    assert not series(cluster, 'slurm_jobs{state="RUNNING"}')

    # the job leaves the node list when it stops running, but its CPUs stay allocated while it is COMPLETING
    # (epilog, step teardown), which can span a scrape or two on a loaded machine: wait for them to come back
    def released(rows: list[dict[str, Any]]) -> bool:
        cpus = {r["metric"]["state"]: float(r["value"][1]) for r in rows}
        return cpus.get("alloc") == 0 and cpus.get("idle") == cpus.get("total", 0) > 0

    wait_series(cluster, "slurm_cpus", released, f"job {job}'s CPUs back to idle", 120)


def test_a_drained_node_shows_its_reason(cluster: LocalCluster) -> None:
    node = workers(cluster)[-1]
    reason = "obs test drain"
    scontrol = ["scontrol", "update", f"nodename={node}"]
    assert cluster.exec(controller(cluster), [*scontrol, "state=drain", f"reason={reason}"]).returncode == 0
    try:
        rows = wait_series(
            cluster,
            f'slurm_node_state{{node="{node}",reason="{reason}"}}',
            lambda rows: len(rows) == 1,
            f"{node} drained with its reason",
        )
        assert rows[0]["metric"]["state"] == "drain"
        assert series(cluster, 'slurm_nodes{state="drain"} == 1')
    finally:
        cluster.exec(controller(cluster), [*scontrol, "state=resume"])
    wait_series(
        cluster, f'slurm_node_state{{node="{node}",state="idle",reason=""}}', lambda rows: len(rows) == 1, "resumed"
    )


def pids(cluster: LocalCluster, node: str) -> dict[str, str]:
    found = {}
    for unit in (NODE_EXPORTER, COLLECTOR):
        result = cluster.exec(node, ["cat", f"{PID_DIR}/{unit}.pid"], timeout=30)
        if result.returncode == 0:
            found[unit] = result.stdout.strip()
    return found


def test_a_bootstrap_rerun_changes_nothing(cluster: LocalCluster) -> None:
    nodes = [controller(cluster), workers(cluster)[0]]
    before = {node: pids(cluster, node) for node in nodes}
    assert set(before[controller(cluster)]) == {NODE_EXPORTER, COLLECTOR}
    assert set(before[workers(cluster)[0]]) == {NODE_EXPORTER}
    for node in nodes:
        code, output = cluster.bootstrap(node)
        assert code == 0, output
        assert '"changed": 0' in output.splitlines()[-1], output
    assert {node: pids(cluster, node) for node in nodes} == before
