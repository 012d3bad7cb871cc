"""A fake EC2 instance metadata service for the local cluster: the Spot interruption notice, per node.

It answers what the Spot watcher (``training_runtime.spot``) and the scaler ask, as EC2 documents it: ``PUT
/latest/api/token`` gives a session token, ``GET /latest/meta-data/spot/instance-action`` with that token gives
the notice of the asking node (told apart by its address) or 404; with the emulated control plane
(:mod:`hyperpod_local.control_plane.local`, whose process serves this service then) also the instance role's
credentials (:data:`CREDENTIALS_PATH`), the keys that control plane accepts. It runs in the cluster's switch
namespace on an address of its own on the bridge (:mod:`hyperpod_local.bridge`), so the nodes reach it the way a real
node reaches 169.254.169.254: without leaving the cluster. The drill posts and withdraws notices through a JSON file
(``{node address: {"action": ..., "time": ...}}``) that the server reads on every request.

``python -m hyperpod_local.imds --listen ADDRESS:PORT --notices FILE`` is the server;
:class:`FakeImds` starts and stops it for a :class:`~hyperpod_local.cluster.LocalCluster`.
"""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hyperpod_local import bridge
from hyperpod_local.host_service import HostService, in_netns
from training_runtime.spot import INSTANCE_ACTION_PATH, TOKEN_PATH

PORT = 8111
DIRECTORY = "cluster/imds"
"""Under the work directory: the standalone server's pid file and log."""
READY_TIMEOUT_S = 10.0


def imds_address(subnet: str) -> str:
    """The fake service's address on the bridge (the plan: :mod:`hyperpod_local.bridge`)."""
    return bridge.imds_address(subnet)


def imds_url(subnet: str) -> str:
    """The fake service's URL for a local cluster on ``subnet`` (``hyperpod_cdk.emulation.imds_url``)."""
    return f"http://{imds_address(subnet)}:{PORT}"


CREDENTIALS_PATH = "/latest/meta-data/iam/security-credentials/"
"""EC2's instance role credentials: the role's name, then ``<path><role>`` its temporary keys as JSON (``Code``,
``AccessKeyId``, ``SecretAccessKey``, ``Token``, ``Expiration``; EC2 User Guide, "Retrieve security credentials
from instance metadata")."""


def handler(notices: Path, credentials: Path | None = None, role: str | None = None) -> type[BaseHTTPRequestHandler]:
    """The service's request handler: tokens (IMDSv2, required), the Spot notice of the asking node (by its
    address) and, where ``credentials`` is given, the instance role ``role``'s keys read from that file."""
    tokens: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, code: int, body: str = "") -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body.encode())))
            self.end_headers()
            self.wfile.write(body.encode())

        def do_PUT(self) -> None:
            if self.path != TOKEN_PATH or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self._answer(400)
                return
            token = secrets.token_hex(16)
            tokens.add(token)
            self._answer(200, token)

        def do_GET(self) -> None:
            if self.headers.get("X-aws-ec2-metadata-token") not in tokens:
                self._answer(401)
                return
            if credentials is not None and role and self.path.startswith(CREDENTIALS_PATH):
                if self.path == CREDENTIALS_PATH:
                    self._answer(200, role)
                elif self.path == CREDENTIALS_PATH + role:
                    self._answer(200, credentials.read_text())
                else:
                    self._answer(404)
                return
            try:
                posted = json.loads(notices.read_text())
            except (OSError, ValueError):
                posted = {}
            notice = posted.get(self.client_address[0])
            if self.path != INSTANCE_ACTION_PATH or notice is None:
                self._answer(404)
            else:
                self._answer(200, json.dumps(notice))

    return Handler


def serve(listen: str, notices: Path) -> None:
    host, port = listen.rsplit(":", 1)
    ThreadingHTTPServer((host, int(port)), handler(notices)).serve_forever()


def serve_on(sock: socket.socket, notices: Path, credentials: Path, role: str) -> threading.Thread:
    """The service, with the role's credentials, on an already bound socket, in a thread (the emulated control
    plane's process runs it: :mod:`hyperpod_local.control_plane.local`)."""
    server = ThreadingHTTPServer(sock.getsockname()[:2], handler(notices, credentials, role), bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.daemon_threads = True
    server.server_activate()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def spot_variant(config_path: Path, directory: Path, poll_interval: int = 1) -> Path:
    """A copy of ``config_path`` in ``directory`` with its compute groups on Spot and their watcher polling every
    ``poll_interval`` s (the local cluster always points the watcher at its fake service)."""
    import yaml

    data = yaml.safe_load(Path(config_path).read_text())
    for group in data["instance_groups"]:
        if group.get("role", "compute") == "compute":
            group["capacity"] = "spot"
    runtime = data.setdefault("runtime", {})
    runtime["spot"] = {**runtime.get("spot", {}), "poll_interval": poll_interval}
    path = Path(directory) / ("spot-" + Path(config_path).name)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class FakeImds:
    """The fake service of one local cluster: :meth:`start`, :meth:`post` / :meth:`withdraw`, :meth:`stop`."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.address = imds_address(cluster.layout.subnet)
        self.notices = Path(cluster.workdir) / "imds-notices.json"
        switch = cluster.namespaces.switch
        argv = (sys.executable, "-m", "hyperpod_local.imds", "--listen", f"{self.address}:{PORT}")
        self.service = HostService(
            "the fake instance metadata service",
            Path(cluster.workdir) / DIRECTORY,
            in_netns(switch, (*argv, "--notices", str(self.notices))),
            ("hyperpod_local.imds", str(self.notices)),
            log_name="imds.log",
            switch=switch,
            addresses=(f"{self.address}/{cluster.layout.prefixlen}",),
            ready=lambda: self._answers(1.0),
            ready_timeout=READY_TIMEOUT_S,
        )

    def start(self) -> None:
        self.notices.write_text("{}")
        if self._answers(0.5):  # the control plane's process serves it (role credentials included)
            return
        self.service.start()

    def _answers(self, timeout: float) -> bool:
        """Whether a metadata service listens on this cluster's address (from the switch, as the nodes reach it)."""
        probe = f"import socket; socket.create_connection(('{self.address}', {PORT}), {timeout})"
        argv = in_netns(self.cluster.namespaces.switch, ("python3", "-c", probe))
        return subprocess.run(argv, capture_output=True, check=False).returncode == 0

    def post(self, node: str, action: str = "terminate", in_s: int = 120) -> dict[str, str]:
        """EC2's notice for ``node``: ``action`` in ``in_s`` seconds."""
        when = (datetime.now(UTC) + timedelta(seconds=in_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
        notice = {"action": action, "time": when}
        self._write({**self._read(), self.cluster.node(node).ip: notice})
        return notice

    def withdraw(self, node: str) -> None:
        """No notice for ``node`` any more (the instance at its address is a new one)."""
        posted = self._read()
        posted.pop(self.cluster.node(node).ip, None)
        self._write(posted)

    def _read(self) -> dict[str, Any]:
        return dict(json.loads(self.notices.read_text()))

    def _write(self, posted: dict[str, Any]) -> None:
        tmp = self.notices.with_suffix(".tmp")
        tmp.write_text(json.dumps(posted))
        tmp.replace(self.notices)

    def stop(self) -> None:
        self.service.stop(10)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperpod_local.imds", description=__doc__.split("\n")[0])
    parser.add_argument("--listen", required=True, help="ADDRESS:PORT")
    parser.add_argument("--notices", required=True, type=Path, help="JSON: {node address: notice}")
    args = parser.parse_args(argv)
    serve(args.listen, args.notices)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
