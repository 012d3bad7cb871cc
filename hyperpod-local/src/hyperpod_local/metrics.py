"""The local cluster's Prometheus server: the host's ``prometheus`` binary with a config, data directory
and log of its own in ``<workdir>/prometheus``, scraping every node's exporters.

The nodes' network lives in the cluster's switch namespace (the host's own namespace gains nothing), so
the server runs there too, on its address on the cluster's bridge (:mod:`hyperpod_local.bridge`).
Browse it from the host with ``ip netns exec <switch> ...`` (``hyperpod-local status`` prints how).
Each node's series get the same labels a node's Prometheus agent adds on AWS (cluster, instance,
instance_group, role), so a query written against the local server works against Amazon Managed Prometheus.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from typing import Any

from hyperpod_local import bridge
from hyperpod_local.host_service import HostService, HostServiceError, in_netns
from hyperpod_local.state import ClusterHandle
from training_runtime.metrics.layout import target_labels
from training_runtime.metrics.ports import NODE_EXPORTER_PORT, PROMETHEUS_AGENT_PORT
from training_runtime.options import parse_options
from training_runtime.params import PARAMETERS_FILE_BY_MODE, ProvisioningParameters

DIRECTORY = "prometheus"
"""Under the work directory: config, data, log and pid file."""
SEARCH_PATH = "/usr/bin:/usr/sbin:/usr/local/bin"


class MetricsServerError(RuntimeError):
    """The server could not start or answer; the message says why and where its log is."""


def server_address(subnet: str) -> str:
    """The server's address on the bridge (the plan: :mod:`hyperpod_local.bridge`)."""
    return bridge.prometheus_address(subnet)


def server_url(cluster: ClusterHandle) -> str:
    return f"http://{server_address(cluster.layout.subnet)}:{PROMETHEUS_AGENT_PORT}"


def scrape_config(cluster: ClusterHandle, interval_s: int) -> dict[str, Any]:
    name = cluster.layout.cluster_name
    return {
        "global": {"scrape_interval": f"{interval_s}s", "scrape_timeout": f"{interval_s}s"},
        "scrape_configs": [
            {
                "job_name": "node",
                "static_configs": [
                    {
                        "targets": [f"{node.ip}:{NODE_EXPORTER_PORT}"],
                        "labels": target_labels(name, node.name, node.group, node.role),
                    }
                    for node in cluster.layout.nodes
                ],
            }
        ],
    }


def service(cluster: ClusterHandle, binary: str = "prometheus") -> HostService:
    """The server's process, in the switch namespace on its bridge address; ready once it answers a query."""
    directory = cluster.workdir / DIRECTORY
    config = directory / "prometheus.yml"
    address = server_address(cluster.layout.subnet)
    argv = (
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address={address}:{PROMETHEUS_AGENT_PORT}",
        "--storage.tsdb.retention.time=2d",
    )

    def ready() -> bool:
        try:
            query(cluster, "up")
        except MetricsServerError:
            return False
        return True

    return HostService(
        "prometheus",
        directory,
        in_netns(cluster.namespaces.switch, argv),
        (f"--config.file={config}",),
        log_name="prometheus.log",
        switch=cluster.namespaces.switch,
        addresses=(f"{address}/{cluster.layout.prefixlen}",),
        ready=ready,
        ready_timeout=30.0,
        ready_poll=0.5,
    )


def start(cluster: ClusterHandle) -> str:
    """Start (or keep, reloading its config) the server; returns its URL. Raises MetricsServerError when there is
    no prometheus or it did not come up."""
    binary = shutil.which("prometheus", path=SEARCH_PATH)
    if binary is None:
        raise MetricsServerError("no prometheus on this machine; run ./scripts/install-system-packages.sh (make setup)")
    server = service(cluster, binary)
    (server.directory / "data").mkdir(parents=True, exist_ok=True)
    options = parse_options(_runtime_section(cluster), check_values=False).observability
    config = server.directory / "prometheus.yml"
    config.write_text(json.dumps(scrape_config(cluster, options.scrape_interval), indent=2) + "\n")
    pid = server.pid()
    if pid is not None:
        os.kill(pid, signal.SIGHUP)  # reload the config
        return server_url(cluster)
    try:
        server.start()
    except HostServiceError as error:
        raise MetricsServerError(str(error)) from None
    return server_url(cluster)


def stop(cluster: ClusterHandle) -> None:
    service(cluster).stop(20)


def enabled(cluster: ClusterHandle) -> bool:
    """Whether the nodes run exporters (``runtime.observability``) and this machine has prometheus."""
    options = parse_options(_runtime_section(cluster), check_values=False).observability
    return options.enabled and options.node_exporter and shutil.which("prometheus", path=SEARCH_PATH) is not None


def running(cluster: ClusterHandle) -> bool:
    return service(cluster).running()


QUERY_SCRIPT = (
    "import sys, urllib.parse, urllib.request\n"
    "url = sys.argv[1] + '/api/v1/query?' + urllib.parse.urlencode({'query': sys.argv[2]})\n"
    "sys.stdout.write(urllib.request.urlopen(url, timeout=10).read().decode())\n"
)


def query(cluster: ClusterHandle, expression: str) -> list[dict[str, Any]]:
    """An instant query's result vector (``[{"metric": {...}, "value": [t, "v"]}, ...]``)."""
    argv = ["ip", "netns", "exec", cluster.namespaces.switch, "python3", "-c", QUERY_SCRIPT, server_url(cluster)]
    result = subprocess.run([*argv, expression], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise MetricsServerError(f"query {expression!r} failed: {result.stderr.strip()[-300:]}")
    data = json.loads(result.stdout)
    if data.get("status") != "success":
        raise MetricsServerError(f"query {expression!r}: {data}")
    return list(data["data"]["result"])


def browse_hint(cluster: ClusterHandle) -> str:
    return (
        f"{server_url(cluster)} in netns {cluster.namespaces.switch} "
        f"(e.g. sudo ip netns exec {cluster.namespaces.switch} curl '{server_url(cluster)}/api/v1/query?query=up')"
    )


def _runtime_section(cluster: ClusterHandle) -> Any:
    """The runtime options as the nodes read them: from the staged parameters file."""
    staged = cluster.workdir / "bucket" / PARAMETERS_FILE_BY_MODE[cluster.state.mode]
    return ProvisioningParameters.loads(staged.read_text()).options
