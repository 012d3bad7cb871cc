"""The local cluster's Prometheus server: the host's ``prometheus`` binary with a config, data directory
and log of its own in ``<workdir>/prometheus``, scraping every node's exporters.

The nodes' network lives in the cluster's switch namespace (the host's own namespace gains nothing), so
the server runs there too: the bridge gets the subnet's last host address and the server listens on it.
Browse it from the host with ``ip netns exec <switch> ...`` (``hyperpod-local status`` prints how).
Each node's series get the same labels a node's Prometheus agent adds on AWS (cluster, instance,
instance_group, role), so a query written against the local server works against Amazon Managed Prometheus.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from hyperpod_local.procs import terminate
from hyperpod_local.state import ClusterHandle
from training_runtime.metrics.layout import target_labels
from training_runtime.metrics.ports import NODE_EXPORTER_PORT, PROMETHEUS_AGENT_PORT
from training_runtime.options import parse_options
from training_runtime.params import PARAMETERS_FILE_BY_MODE, ProvisioningParameters

DIRECTORY = "prometheus"
"""Under the work directory: config, data, log and pid file."""
BRIDGE = "br0"
SEARCH_PATH = "/usr/bin:/usr/sbin:/usr/local/bin"


class MetricsServerError(RuntimeError):
    """The server could not start or answer; the message says why and where its log is."""


def server_address(subnet: str) -> str:
    """The bridge's address: the subnet's last host (nodes count up from the 10th)."""
    return str(list(ipaddress.IPv4Network(subnet).hosts())[-1])


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


def _pid(directory: Path) -> int | None:
    try:
        pid = int((directory / "pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if str(directory / "prometheus.yml") in cmdline else None


def start(cluster: ClusterHandle) -> str:
    """Start (or keep) the server; returns its URL. Raises MetricsServerError when there is no prometheus."""
    binary = shutil.which("prometheus", path=SEARCH_PATH)
    if binary is None:
        raise MetricsServerError("no prometheus on this machine; run ./scripts/install-system-packages.sh (make setup)")
    directory = cluster.workdir / DIRECTORY
    (directory / "data").mkdir(parents=True, exist_ok=True)
    options = parse_options(_runtime_section(cluster), check_values=False).observability
    config = directory / "prometheus.yml"
    config.write_text(json.dumps(scrape_config(cluster, options.scrape_interval), indent=2) + "\n")
    if _pid(directory) is not None:
        os.kill(_pid(directory) or 0, signal.SIGHUP)  # reload the config
        return server_url(cluster)
    switch = cluster.namespaces.switch
    address = server_address(cluster.layout.subnet)
    prefix = ipaddress.IPv4Network(cluster.layout.subnet).prefixlen
    shown = subprocess.run(["ip", "-n", switch, "-o", "addr", "show", BRIDGE], capture_output=True, text=True)
    if f" {address}/" not in shown.stdout:
        subprocess.run(["ip", "-n", switch, "addr", "add", f"{address}/{prefix}", "dev", BRIDGE], check=True)
    argv = [
        "ip",
        "netns",
        "exec",
        switch,
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address={address}:{PROMETHEUS_AGENT_PORT}",
        "--storage.tsdb.retention.time=2d",
    ]
    with (directory / "prometheus.log").open("ab") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    (directory / "pid").write_text(f"{process.pid}\n")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            query(cluster, "up")
            return server_url(cluster)
        except MetricsServerError:
            time.sleep(0.5)
    raise MetricsServerError(f"prometheus did not come up; see {directory / 'prometheus.log'}")


def stop(cluster: ClusterHandle) -> None:
    directory = cluster.workdir / DIRECTORY
    pid = _pid(directory)
    if pid is None:
        return
    terminate(pid, lambda: _pid(directory) is not None, 20)
    (directory / "pid").unlink(missing_ok=True)


def enabled(cluster: ClusterHandle) -> bool:
    """Whether the nodes run exporters (``runtime.observability``) and this machine has prometheus."""
    options = parse_options(_runtime_section(cluster), check_values=False).observability
    return options.enabled and options.node_exporter and shutil.which("prometheus", path=SEARCH_PATH) is not None


def running(cluster: ClusterHandle) -> bool:
    return _pid(cluster.workdir / DIRECTORY) is not None


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
