"""The control plane of a running local cluster: its real nodes as the backend, served where nodes and host reach it.

One process per cluster (:func:`serve`, run by :mod:`hyperpod_local.processes`; started by :func:`start`,
stopped by :func:`stop` and by ``down``) serves:

* the SageMaker API (:mod:`.protocol`) on ``127.0.0.1:<free port>`` for the host (boto3 through
  ``AWS_ENDPOINT_URL``: :func:`client_env`) and on its address on the cluster's bridge, port 8112, for the nodes
  (the parameters' ``hyperpod_cdk.emulation.sagemaker_url``, :func:`sagemaker_url`; the addresses:
  :mod:`hyperpod_local.bridge`): the socket is bound in the switch namespace (``setns``), the process stays on
  the host, so it can start and stop nodes;
* the instance metadata service (:mod:`hyperpod_local.imds`) on its bridge address, with the instance role's
  credentials (:func:`credentials`): the only keys the API accepts (SigV4, :mod:`.sigv4`);
* on the same endpoints, Secrets Manager (:mod:`.secrets`, :func:`secret_store`): the REST API's key, created with a
  generated value when the staged parameters have ``rest_api``, and the login pool's host-key secret, created with a
  generated placeholder when they have ``login_pool`` (:func:`start`).

Its knobs live in ``<workdir>/cluster/control-plane/settings.json``, read at every reconciliation, so a test
changes them while it runs: :func:`set_capacity`, :func:`set_latency`.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hyperpod_local import bridge, imds
from hyperpod_local.control_plane.events import Event, EventLog
from hyperpod_local.control_plane.fleet import Fleet, Settings
from hyperpod_local.control_plane.model import RUNNING, ClusterInfo, Group, Node
from hyperpod_local.control_plane.nodes import ClusterOpener, LocalClusterBackend, instance_of
from hyperpod_local.control_plane.operations import ControlPlane
from hyperpod_local.control_plane.protocol import Endpoint
from hyperpod_local.control_plane.secrets import (
    SecretStore,
    generated,
    login_host_keys_name,
    rest_key_name,
    secret_arn,
)
from hyperpod_local.control_plane.sigv4 import Key
from hyperpod_local.host_service import HostService, module_argv
from hyperpod_local.layout import LOCAL_REGION, cluster_arn, instance_id
from hyperpod_local.netns import bound_in
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.groups import COMPUTE, CONTROLLER, LOGIN
from training_runtime.params import ENTRYPOINT_BY_MODE

DIRECTORY = "cluster/control-plane"
PORT = 8112
ROLE = "hyperpod-local-execution"
ROLE_ARN = f"arn:aws:iam::000000000000:role/{ROLE}"
NODE_TYPES = {CONTROLLER: "Controller", LOGIN: "Login", COMPUTE: "Compute"}
READY_TIMEOUT_S = 20.0
RECONCILE_S = 0.5
CREDENTIALS_TTL = timedelta(hours=12)


def address(subnet: str) -> str:
    """The control plane's address on the bridge (the plan: :mod:`hyperpod_local.bridge`)."""
    return bridge.control_plane_address(subnet)


def sagemaker_url(subnet: str) -> str:
    """What the nodes' parameters carry as ``hyperpod_cdk.emulation.sagemaker_url``."""
    return f"http://{address(subnet)}:{PORT}"


def directory(cluster: ClusterHandle) -> Path:
    return cluster.workdir / DIRECTORY


# --- knobs and credentials ----------------------------------------------------------------------
def read_settings(path: Path) -> Settings:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return Settings()
    return Settings(
        launch_latency=float(data.get("launch_latency", Settings.launch_latency)),
        retry_interval=float(data.get("retry_interval", Settings.retry_interval)),
        capacity={str(k): int(v) for k, v in (data.get("capacity") or {}).items()},
    )


def _write_json(path: Path, data: dict[str, Any], mode: int = 0o644) -> None:
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(json.dumps(data, indent=2) + "\n")
    temporary.replace(path)


def _update_settings(cluster: ClusterHandle, **changes: Any) -> Settings:
    path = directory(cluster) / "settings.json"
    current = read_settings(path)
    data = {
        "launch_latency": current.launch_latency,
        "retry_interval": current.retry_interval,
        "capacity": dict(current.capacity),
        **changes,
    }
    _write_json(path, data)
    return read_settings(path)


def set_capacity(cluster: ClusterHandle, instance_type: str, count: int | None) -> Settings:
    """At most ``count`` instances of ``instance_type`` at once (None: unlimited): launches beyond fail for
    capacity, as Continuous provisioning reports it, until it is raised."""
    capacity = dict(read_settings(directory(cluster) / "settings.json").capacity)
    if count is None:
        capacity.pop(instance_type, None)
    else:
        capacity[instance_type] = count
    return _update_settings(cluster, capacity=capacity)


def set_latency(cluster: ClusterHandle, launch_latency: float, retry_interval: float | None = None) -> Settings:
    """The emulated launch latency (s) before a new node's instance boots, and the retry interval after a
    capacity failure (s)."""
    extra = {} if retry_interval is None else {"retry_interval": retry_interval}
    return _update_settings(cluster, launch_latency=launch_latency, **extra)


def make_credentials(cluster: ClusterHandle) -> dict[str, str]:
    """The instance role's temporary credentials, made once per cluster, root-only on the host."""
    path = directory(cluster) / "credentials.json"
    if not path.exists():
        now = datetime.now(UTC)
        _write_json(
            path,
            {
                "Code": "Success",
                "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "Type": "AWS-HMAC",
                "AccessKeyId": "ASIA" + secrets.token_hex(8).upper(),
                "SecretAccessKey": secrets.token_urlsafe(30),
                "Token": secrets.token_urlsafe(96),
                "Expiration": (now + CREDENTIALS_TTL).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            0o600,
        )
    return credentials(cluster)


def put_secret(cluster: ClusterHandle, arn: str, value: str) -> None:
    """Hold ``value`` as the current version of the secret ``arn`` (the directory's bind password, made outside the
    stack) in the cluster's emulated Secrets Manager, which the running control plane reads on every call."""
    own = directory(cluster)
    own.mkdir(parents=True, exist_ok=True)
    secret_store(cluster).put(arn, value)


def credentials(cluster: ClusterHandle) -> dict[str, str]:
    return {str(k): str(v) for k, v in json.loads((directory(cluster) / "credentials.json").read_text()).items()}


def keys(path: Path) -> list[Key]:
    data = json.loads(path.read_text())
    return [Key(data["AccessKeyId"], data["SecretAccessKey"], data["Token"])]


def url(cluster: ClusterHandle) -> str:
    """The host's URL of the running control plane."""
    try:
        return str(json.loads((directory(cluster) / "url.json").read_text())["host"])
    except (OSError, ValueError, KeyError):
        raise LocalClusterError(
            "the cluster's control plane is not running (hyperpod-local up --control-plane)"
        ) from None


def client_env(cluster: ClusterHandle) -> dict[str, str]:
    """The variables that point host-side boto3 (and ``hyperpod-cdk``) at the control plane with the role's keys."""
    found = credentials(cluster)
    return {
        "AWS_ENDPOINT_URL": url(cluster),
        "AWS_ACCESS_KEY_ID": found["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": found["SecretAccessKey"],
        "AWS_SESSION_TOKEN": found["Token"],
        "AWS_REGION": LOCAL_REGION,
        "AWS_DEFAULT_REGION": LOCAL_REGION,
    }


def continuous(cluster: ClusterHandle) -> bool:
    """Whether the cluster's deployment provisions nodes continuously, as staging recorded it
    (:func:`hyperpod_local.staging.deployed_modes`)."""
    from hyperpod_local.staging import deployed_modes

    return deployed_modes(cluster.workdir).continuous


def build(cluster: ClusterHandle, open_cluster: ClusterOpener, events: EventLog | None = None) -> ControlPlane:
    """The control plane of ``cluster`` as it runs now: its groups and nodes (all Running), on a backend that opens
    the cluster with ``open_cluster`` for each change."""
    layout, state = cluster.layout, cluster.state
    lifecycle = {"SourceS3Uri": "s3://hyperpod-local/lifecycle/", "OnCreate": ENTRYPOINT_BY_MODE[state.mode]}
    groups = [
        Group(
            g.name,
            NODE_TYPES[g.role],
            g.instance_type or g.instance_types[0],
            sum(1 for n in layout.nodes if n.group == g.name),
            ROLE_ARN,
            lifecycle,
            partition=(g.partition or g.name) if g.role == COMPUTE else None,
            threads_per_core=g.threads_per_core,
        )
        for g in layout.groups
    ]
    now = time.time()
    nodes = []
    for local in layout.nodes:
        node = Node(instance_id(layout.cluster_name, local.name), local.group, local.instance_type, RUNNING, now)
        node.instance = instance_of(layout.cluster_name, local)
        nodes.append(node)
    settings_path = directory(cluster) / "settings.json"
    fleet = Fleet(
        groups,
        nodes,
        LocalClusterBackend(cluster.workdir, open_cluster),
        settings=lambda: read_settings(settings_path),
        events=events,
    )
    info = ClusterInfo(layout.cluster_name, cluster_arn(layout.cluster_name), continuous(cluster), now)
    return ControlPlane(info, fleet)


def secret_store(cluster: ClusterHandle) -> SecretStore:
    """The cluster's emulated Secrets Manager (:mod:`.secrets`): the REST API's key, when the config has one."""
    return SecretStore(directory(cluster) / "secrets.json")


def login_host_keys_arn(cluster: ClusterHandle) -> str:
    """The ARN of the login pool's host-key secret (as the nodes' parameters name it)."""
    return secret_arn(login_host_keys_name(cluster.layout.cluster_name))


def rest_key_arn(cluster: ClusterHandle) -> str:
    """The ARN of the REST API's key secret (as the nodes' parameters name it)."""
    return secret_arn(rest_key_name(cluster.layout.cluster_name))


# --- the process --------------------------------------------------------------------------------
def bound_in_netns(netns: str, host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` in the network namespace ``netns``; this process stays where it is."""
    return bound_in(netns, host, port)


def serve(cluster: ClusterHandle, open_cluster: ClusterOpener) -> None:
    """The control plane process's life (:mod:`hyperpod_local.processes` opens ``cluster`` and passes its opener):
    the API for the host and the nodes, the metadata service, and a reconciliation every :data:`RECONCILE_S` until
    SIGTERM."""
    own = directory(cluster)
    log_path = own / "events.jsonl"

    def log(event: Event) -> None:
        with log_path.open("a") as handle:
            handle.write(
                json.dumps(
                    {
                        "time": event.time,
                        "level": event.level,
                        "group": event.group,
                        "instance_id": event.instance_id,
                        "description": event.description,
                    }
                )
                + "\n"
            )

    plane = build(cluster, open_cluster, EventLog(time.time, log))
    endpoint = Endpoint(plane, lambda: keys(own / "credentials.json"), secret_store=secret_store(cluster))
    switch, subnet = cluster.namespaces.switch, cluster.layout.subnet
    node_sock = bound_in_netns(switch, address(subnet), PORT)
    imds_sock = bound_in_netns(switch, imds.imds_address(subnet), imds.PORT)
    host_url = endpoint.serve()
    endpoint.serve(sock=node_sock)
    imds.serve_on(imds_sock, cluster.workdir / "imds-notices.json", own / "credentials.json", ROLE)
    _write_json(own / "url.json", {"host": host_url, "nodes": sagemaker_url(subnet)})
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    while not stopping.wait(RECONCILE_S):
        plane.fleet.reconcile()
    endpoint.stop()


def service(cluster: ClusterHandle) -> HostService:
    """The control plane's process, with its own and the metadata service's addresses on the bridge; ready once it
    has written the URLs it serves (``url.json``)."""
    own, subnet, prefixlen = directory(cluster), cluster.layout.subnet, cluster.layout.prefixlen
    argv = module_argv("hyperpod_local.control_plane", cluster.workdir)
    return HostService(
        "the control plane",
        own,
        argv,
        argv[2:],
        log_name="server.log",
        switch=cluster.namespaces.switch,
        addresses=tuple(f"{a}/{prefixlen}" for a in (address(subnet), bridge.imds_address(subnet))),
        ready=(own / "url.json").exists,
        ready_timeout=READY_TIMEOUT_S,
    )


def running(cluster: ClusterHandle) -> bool:
    return service(cluster).running()


def start(
    cluster: ClusterHandle, *, launch_latency: float | None = None, capacity: dict[str, int] | None = None
) -> str:
    """Start the cluster's control plane (once; HyperPod platform only); returns the host's URL."""
    if not cluster.state.variant.hyperpod:
        raise LocalClusterError("the emulated control plane needs the HyperPod platform (HyperPod names the nodes)")
    own = directory(cluster)
    own.mkdir(parents=True, exist_ok=True)
    make_credentials(cluster)
    if launch_latency is not None:
        set_latency(cluster, launch_latency)
    for instance_type, count in (capacity or {}).items():
        set_capacity(cluster, instance_type, count)
    if running(cluster):
        return url(cluster)
    from hyperpod_local.staging import staged_parameters

    staged = staged_parameters(cluster.workdir)
    # CloudFormation's part: the stack creates the REST key's secret, its value generated; and the login pool's
    # host-key secret with a generated placeholder (not a key bundle: the first login node writes one).
    if staged is not None and staged.rest_api is not None:
        secret_store(cluster).create(rest_key_name(cluster.layout.cluster_name), generated())
    if staged is not None and staged.login_pool is not None:
        secret_store(cluster).create(login_host_keys_name(cluster.layout.cluster_name), generated())
    notices = cluster.workdir / "imds-notices.json"
    if not notices.exists():
        notices.write_text("{}")
    (own / "url.json").unlink(missing_ok=True)
    service(cluster).start()
    return url(cluster)


def stop(cluster: ClusterHandle, timeout: float = 30.0) -> None:
    service(cluster).stop(timeout)
    (directory(cluster) / "url.json").unlink(missing_ok=True)
