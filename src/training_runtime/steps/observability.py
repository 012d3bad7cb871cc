"""Metrics on the node (``runtime.observability``): node_exporter everywhere, the metrics collector (Slurm
metrics on the controller, EFA counters on EFA nodes), dcgm-exporter on NVIDIA nodes, neuron-monitor's
Prometheus bridge on Neuron nodes and, when the parameters file names a metrics target, a Prometheus agent
that scrapes them all and remote-writes with SigV4.

The exporters listen on 127.0.0.1 only: each node's own agent is their one reader, and without a metrics target
nothing reads them from elsewhere (the Slurm metrics name users and jobs). The one exception is the local cluster,
whose Prometheus scrapes every node over its bridge (``exporters_on_network`` in the parameters file's emulation
key, which only the local cluster writes).
Every daemon runs under systemd where the node has it, else in the background with a pid file
(containers, the local cluster); :class:`~training_runtime.steps.daemon.RunningDaemon` restarts one only
when its configuration changed, so a re-run leaves them alone.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from typing import List, Optional, Sequence, Tuple

from training_runtime.accelerators import Accelerators, detect
from training_runtime.apt import apt_install, download
from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, file_matches, write_file
from training_runtime.metrics.catalog import dcgm_counters_csv
from training_runtime.metrics.collect import program_arguments
from training_runtime.metrics.layout import CONFIG_DIR, GPU_JOB_DIR, TEXTFILE_DIR, target_labels
from training_runtime.metrics.ports import (
    DCGM_EXPORTER_PORT,
    NEURON_MONITOR_PORT,
    NODE_EXPORTER_PORT,
    PROMETHEUS_AGENT_PORT,
)
from training_runtime.node import Node
from training_runtime.paths import BIN_DIR, HOME, STATE_DIR
from training_runtime.pins import PROMETHEUS_AGENT_MINIMUM, PROMETHEUS_ARCHIVES, PROMETHEUS_VERSION
from training_runtime.services import Daemon
from training_runtime.steps import Step
from training_runtime.steps.daemon import RunningDaemon
from training_runtime.steps.installed import program

UNIT_DIR = "/etc/systemd/system"
PID_DIR = "/run/hyperpod-cdk"
NODE_EXPORTER = "prometheus-node-exporter"
"""The Debian/Ubuntu package, its binary and its systemd unit (which reads ``ARGS`` from NODE_EXPORTER_ARGS)."""
NODE_EXPORTER_ARGS = "/etc/default/prometheus-node-exporter"
COLLECTOR = "hyperpod-cdk-metrics-collector"
COLLECTOR_PROGRAM = BIN_DIR + "/metrics-collector"
AGENT = "hyperpod-cdk-metrics-agent"
AGENT_CONFIG = CONFIG_DIR + "/agent.yml"
AGENT_DATA = "/var/lib/" + AGENT
AGENT_ARCHIVE_DIR = "{}/prometheus-{}".format(HOME, PROMETHEUS_VERSION)
DCGM_EXPORTER_PACKAGE = "datacenter-gpu-manager-exporter"
"""NVIDIA's package in the CUDA repository (the one steps/nvidia.py installs DCGM from): /usr/bin/dcgm-exporter
and the unit ``nvidia-dcgm-exporter.service``."""
DCGM_EXPORTER = "nvidia-dcgm-exporter"
DCGM_EXPORTER_BINARY = "/usr/bin/dcgm-exporter"
DCGM_COUNTERS = CONFIG_DIR + "/dcgm-counters.csv"
DCGM_DROP_IN = "{}/{}.service.d/hyperpod-cdk.conf".format(UNIT_DIR, DCGM_EXPORTER)
DCGM_HOSTENGINE = "localhost:5555"
"""nv-hostengine, the DCGM service steps/nvidia.py runs: the exporter reads it instead of embedding its own."""
NEURON_MONITOR = "hyperpod-cdk-neuron-monitor"
NEURON_BRIDGE = "/opt/aws/neuron/bin/neuron-monitor-prometheus.py"
"""AWS's bridge from neuron-monitor's JSON to Prometheus (aws-neuronx-tools); it takes ``--port`` only and listens on
every address, so it runs under :mod:`training_runtime.metrics.neuron_bridge`, which binds it to one."""
NEURON_BRIDGE_PROGRAM = BIN_DIR + "/neuron-monitor-prometheus"
VERSION = re.compile(r"version (\d+)\.(\d+)")


def listen_host(node: Node) -> str:
    """Where the exporters listen: 127.0.0.1, or every address ("") for the local cluster's Prometheus."""
    emulation = node.params.emulation
    return "" if emulation is not None and emulation.exporters_on_network else "127.0.0.1"


def neuron_pipe() -> str:
    return "/opt/aws/neuron/bin/neuron-monitor | " + NEURON_BRIDGE_PROGRAM


def unit(description: str, exec_start: str, extra: str = "") -> str:
    return (
        "# Installed by hyperpod-cdk (runtime.observability); edits are overwritten.\n[Unit]\nDescription={}\n"
        "After=network-online.target\n\n[Service]\nExecStart={}\nRestart=always\nRestartSec=5\n{}\n"
        "[Install]\nWantedBy=multi-user.target\n".format(description, exec_start, extra)
    )


def background(node: Node, name: str, unit_name: str, argv: Sequence[str]) -> Daemon:
    """A daemon: its systemd unit, or (no systemd) ``argv`` started in the background with a pid file."""
    pid_file = "{}/{}.pid".format(PID_DIR, unit_name)
    start = (
        "start-stop-daemon",
        "--start",
        "--background",
        "--make-pidfile",
        "--pidfile",
        pid_file,
        "--output",
        "{}/{}.log".format(PID_DIR, unit_name),
        "--startas",
        argv[0],
        "--",
        *argv[1:],
    )
    return Daemon(name, unit_name, start, pid_file, run_dir=(PID_DIR, "root", 0o755))


class Files(Step):
    """Files this feature owns, and ``systemctl daemon-reload`` when a unit among them changed."""

    def __init__(self, name: str, files: List[Tuple[str, str, int]], dirs: Sequence[str] = ()) -> None:
        self.name = name
        self.files = files
        self.dirs = tuple(dirs)

    def stale(self, node: Node) -> List[str]:
        return [path for path, content, mode in self.files if not file_matches(node, path, content, mode)]

    def needed(self, node: Node) -> bool:
        return bool(self.stale(node)) or any(not node.path(d).is_dir() for d in self.dirs)

    def apply(self, node: Node) -> None:
        for directory in self.dirs:
            if not node.path(directory).is_dir():
                ensure_dir(node, directory)
        units = False
        for path, content, mode in self.files:
            if write_file(node, path, content, mode=mode) and path.startswith(UNIT_DIR):
                units = True
        if units and node.has_systemd:
            node.run(["systemctl", "daemon-reload"], timeout=120)

    def describe(self, node: Node) -> List[str]:
        return ["write " + path for path in self.stale(node)]


class Installed(Step):
    """apt-get install ``packages`` when ``binary`` is missing (never an upgrade at boot)."""

    def __init__(self, binary: str, packages: Sequence[str]) -> None:
        self.binary = binary
        self.packages = list(packages)
        self.name = "install:" + self.packages[0]

    def needed(self, node: Node) -> bool:
        return node.which(self.binary) is None and not node.path(self.binary).is_file()

    def apply(self, node: Node) -> None:
        apt_install(node, self.packages)
        if self.needed(node):
            raise StepFailed("{} is still missing after installing {}".format(self.binary, ", ".join(self.packages)))

    def describe(self, node: Node) -> List[str]:
        return ["apt-get install " + " ".join(self.packages)]


# --- node_exporter and the collector ------------------------------------------------------------------


def node_exporter_flags(node: Node) -> List[str]:
    return [
        "--web.listen-address={}:{}".format(listen_host(node), NODE_EXPORTER_PORT),
        "--collector.textfile.directory=" + TEXTFILE_DIR,
    ]


def node_exporter_steps(node: Node) -> List[Step]:
    flags = node_exporter_flags(node)
    args = '# Installed by hyperpod-cdk (runtime.observability); edits are overwritten.\nARGS="{}"\n'.format(
        " ".join(flags)
    )
    binary = "/usr/bin/" + NODE_EXPORTER
    daemon = background(node, NODE_EXPORTER, NODE_EXPORTER, [binary, *flags])
    return [
        Installed(NODE_EXPORTER, [NODE_EXPORTER]),
        Files("node-exporter-config", [(NODE_EXPORTER_ARGS, args, 0o644)], dirs=[TEXTFILE_DIR]),
        RunningDaemon(daemon, [NODE_EXPORTER_ARGS]),
    ]


def collector_arguments(node: Node, found: Accelerators) -> List[str]:
    """The collector's arguments on this node; [] when it has nothing to collect."""
    metrics = node.options.observability
    slurm = metrics.slurm_metrics and node.is_controller
    efa = metrics.efa_metrics and found.efa > 0
    if not (slurm or efa):
        return []
    return program_arguments(slurm, efa, metrics.scrape_interval, node.slurm.bin_dir)


def collector_steps(node: Node, found: Accelerators) -> List[Step]:
    arguments = collector_arguments(node, found)
    if not arguments:
        return []
    wrapper = program(" ".join(arguments), module="training_runtime.metrics.collect")
    files = [(COLLECTOR_PROGRAM, wrapper, 0o755)]
    files.append(
        ("{}/{}.service".format(UNIT_DIR, COLLECTOR), unit("hyperpod-cdk metrics collector", COLLECTOR_PROGRAM), 0o644)
    )
    return [
        Files("metrics-collector", files, dirs=[TEXTFILE_DIR]),
        RunningDaemon(background(node, "python3", COLLECTOR, [COLLECTOR_PROGRAM]), [f[0] for f in files]),
    ]


# --- accelerators -------------------------------------------------------------------------------------


def dcgm_exporter_steps(node: Node) -> List[Step]:
    argv = [
        DCGM_EXPORTER_BINARY,
        "-f",
        DCGM_COUNTERS,
        "-a",
        "{}:{}".format(listen_host(node), DCGM_EXPORTER_PORT),
        "-r",
        DCGM_HOSTENGINE,
        "--hpc-job-mapping-dir",
        GPU_JOB_DIR,
    ]
    drop_in = (
        "# Installed by hyperpod-cdk (runtime.observability): the catalog's counters, the GPU-to-job mapping.\n"
        "[Service]\nExecStart=\nExecStart={}\n".format(" ".join(argv))
    )
    files = [(DCGM_COUNTERS, dcgm_counters_csv(), 0o644), (DCGM_DROP_IN, drop_in, 0o644)]
    return [
        Installed(DCGM_EXPORTER_BINARY, [DCGM_EXPORTER_PACKAGE]),
        Files("dcgm-exporter-config", files, dirs=[GPU_JOB_DIR]),
        RunningDaemon(background(node, "dcgm-exporter", DCGM_EXPORTER, argv), [f[0] for f in files]),
    ]


def neuron_monitor_steps(node: Node) -> List[Step]:
    path = "{}/{}.service".format(UNIT_DIR, NEURON_MONITOR)
    bridge = program(
        "--listen {} {} --port {}".format(listen_host(node) or "0.0.0.0", NEURON_BRIDGE, NEURON_MONITOR_PORT),
        module="training_runtime.metrics.neuron_bridge",
    )
    files = [
        (NEURON_BRIDGE_PROGRAM, bridge, 0o755),
        (path, unit("neuron-monitor for Prometheus", "/bin/sh -c '{}'".format(neuron_pipe())), 0o644),
    ]
    return [
        PythonModule("prometheus_client", "python3-prometheus-client"),
        Files("neuron-monitor-config", files),
        RunningDaemon(
            background(node, "sh", NEURON_MONITOR, ["/bin/sh", "-c", neuron_pipe()]), [NEURON_BRIDGE_PROGRAM, path]
        ),
    ]


class PythonModule(Step):
    """A Python module the system python3 must import (neuron-monitor's bridge needs prometheus_client)."""

    def __init__(self, module: str, package: str) -> None:
        self.module = module
        self.package = package
        self.name = "install:" + package

    def needed(self, node: Node) -> bool:
        return not node.run(["python3", "-c", "import " + self.module], check=False, timeout=60).ok

    def apply(self, node: Node) -> None:
        apt_install(node, [self.package])

    def describe(self, node: Node) -> List[str]:
        return ["apt-get install " + self.package]


# --- the Prometheus agent -----------------------------------------------------------------------------


def scrape_targets(node: Node, found: Accelerators) -> List[Tuple[str, int]]:
    """(job, port) of every exporter on this node."""
    metrics = node.options.observability
    targets = []
    if metrics.node_exporter:
        targets.append(("node", NODE_EXPORTER_PORT))
    if metrics.dcgm_exporter and found.nvidia_gpus:
        targets.append(("dcgm", DCGM_EXPORTER_PORT))
    if metrics.neuron_monitor and found.neuron_devices:
        targets.append(("neuron", NEURON_MONITOR_PORT))
    return targets


def agent_config(node: Node, found: Accelerators) -> str:
    """The agent's configuration (JSON, which is YAML): scrape this node's exporters with the contract's
    labels, remote-write to the metrics target signed with SigV4."""
    target = node.params.metrics
    assert target is not None
    labels = target_labels(node.params.cluster_name, node.hostname, node.group.name, node.role)
    interval = "{}s".format(node.options.observability.scrape_interval)
    config = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval},
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": ["127.0.0.1:{}".format(port)], "labels": labels}]}
            for job, port in scrape_targets(node, found)
        ],
        "remote_write": [{"url": target.remote_write_url, "sigv4": {"region": target.region}}],
    }
    return (
        "# Installed by hyperpod-cdk (runtime.observability); edits are overwritten.\n"
        + json.dumps(config, indent=2, sort_keys=True)
        + "\n"
    )


def prometheus_version(node: Node, binary: str) -> Optional[Tuple[int, int]]:
    result = node.run([binary, "--version"], check=False, timeout=60)
    found = VERSION.search(result.stdout + result.stderr) if result.ok else None
    return (int(found.group(1)), int(found.group(2))) if found else None


def agent_binary(node: Node) -> str:
    """The distribution's prometheus when it has agent mode, else the pinned release archive's."""
    system = node.which("prometheus")
    if system is not None:
        version = prometheus_version(node, system)
        if version is not None and version >= PROMETHEUS_AGENT_MINIMUM:
            return system
    return AGENT_ARCHIVE_DIR + "/prometheus"


class PrometheusArchive(Step):
    """The pinned Prometheus release archive, checked against its sha256, unpacked (the binary only)."""

    name = "prometheus-archive"
    BINARY = AGENT_ARCHIVE_DIR + "/prometheus"

    def needed(self, node: Node) -> bool:
        return not node.path(self.BINARY).is_file()

    def pin(self) -> Tuple[str, str]:
        machine = os.uname().machine
        if machine not in PROMETHEUS_ARCHIVES:
            raise StepFailed(
                "no pinned Prometheus archive for {} (pinned: {}). Fix: set runtime.observability.enabled to "
                "false, or add a pin in training_runtime/pins.py".format(machine, ", ".join(PROMETHEUS_ARCHIVES))
            )
        return PROMETHEUS_ARCHIVES[machine]

    def apply(self, node: Node) -> None:
        url, sha256 = self.pin()
        archive = "{}/downloads/{}".format(STATE_DIR, url.rsplit("/", 1)[1])
        node.path(archive).parent.mkdir(parents=True, exist_ok=True)
        download(node, url, str(node.path(archive)))
        data = node.path(archive).read_bytes()
        got = hashlib.sha256(data).hexdigest()
        if got != sha256:
            node.path(archive).unlink()
            raise StepFailed(
                "{}: sha256 {} but the pin in training_runtime/pins.py is {}; refusing it".format(url, got, sha256)
            )
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            member = next((m for m in tar.getmembers() if m.isfile() and m.name.endswith("/prometheus")), None)
            extracted = tar.extractfile(member) if member is not None else None
            if extracted is None:
                raise StepFailed("{} has no prometheus binary".format(url))
            write_file(node, self.BINARY, extracted.read(), mode=0o755)

    def describe(self, node: Node) -> List[str]:
        return ["download Prometheus {} (sha256-pinned) into {}".format(PROMETHEUS_VERSION, AGENT_ARCHIVE_DIR)]


def agent_steps(node: Node, found: Accelerators) -> List[Step]:
    binary = agent_binary(node)
    argv = [
        binary,
        "--enable-feature=agent",
        "--config.file=" + AGENT_CONFIG,
        "--storage.agent.path=" + AGENT_DATA,
        "--web.listen-address=127.0.0.1:{}".format(PROMETHEUS_AGENT_PORT),
    ]
    service = unit("hyperpod-cdk Prometheus agent (remote write)", " ".join(argv), "StateDirectory={}\n".format(AGENT))
    files = [
        (AGENT_CONFIG, agent_config(node, found), 0o644),
        ("{}/{}.service".format(UNIT_DIR, AGENT), service, 0o644),
    ]
    steps: List[Step] = [PrometheusArchive()] if binary.startswith(AGENT_ARCHIVE_DIR) else []
    return [
        *steps,
        Files("metrics-agent-config", files, dirs=[AGENT_DATA]),
        RunningDaemon(background(node, "prometheus", AGENT, argv), [f[0] for f in files]),
    ]


def observability_steps(node: Node, found: Optional[Accelerators] = None) -> List[Step]:
    """This node's metrics steps (none with ``observability.enabled: false``)."""
    metrics = node.options.observability
    if not metrics.enabled:
        return []
    found = found if found is not None else detect(node)
    steps: List[Step] = []
    if metrics.node_exporter:
        steps += node_exporter_steps(node)
    steps += collector_steps(node, found)
    if metrics.dcgm_exporter and found.nvidia_gpus:
        steps += dcgm_exporter_steps(node)
    if metrics.neuron_monitor and found.neuron_devices:
        steps += neuron_monitor_steps(node)
    if node.params.metrics is not None:
        steps += agent_steps(node, found)
    return steps
