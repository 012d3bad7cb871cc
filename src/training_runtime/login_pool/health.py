"""A login node's health as the load balancer sees it: the drain marker and sshd's answer, served over HTTP.

The target group health-checks ``GET /health`` on the node's health port. The answer is 200 while sshd on
127.0.0.1:22 answers with an SSH-2.0 identification string within :data:`SSHD_TIMEOUT_S` and the node is not
drained; 503 with the reason otherwise (the body is one line). RFC 4253, section 4.2: "When the connection has been
established, both sides MUST send an identification string. This identification string MUST be SSH-2.0-
softwareversion SP comments CR LF". Elastic Load Balancing (Network Load Balancers, "Health checks for Network Load
Balancer target groups"): for HTTP health checks "the HTTP codes to use when checking for a successful response"
default to 200-399, so a 503 marks the target unhealthy; an unhealthy target gets no new connections, and with
connection termination off its open ones go on (the construct's setting; docs/login-pool-node.md).

The drain marker is a file in a directory only root may write (:data:`DRAIN_DIR`, 0700 root): ``python3 -m
training_runtime login drain`` (root only, :mod:`.cli`) writes it, ``undrain`` removes it. Stdlib only (Python 3.8+).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any, Callable, Dict, Optional, Tuple

from training_runtime.paths import STATE_DIR

DRAIN_DIR = STATE_DIR + "/login-pool"
DRAIN_MARKER = DRAIN_DIR + "/drained"
SSHD_ADDRESS = ("127.0.0.1", 22)
SSHD_TIMEOUT_S = 2.0
BANNER = b"SSH-2.0-"
MAX_BANNER = 255
"""RFC 4253, 4.2: "The maximum length of the string is 255 characters, including the Carriage Return and Line Feed"."""

Probe = Callable[[], Optional[str]]
"""sshd's check: None when it answers, else why not."""


def sshd_answers(address: Tuple[str, int] = SSHD_ADDRESS, timeout_s: float = SSHD_TIMEOUT_S) -> Optional[str]:
    """None when sshd at ``address`` sends an ``SSH-2.0-`` identification line within ``timeout_s``; else why."""
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection(address, timeout=timeout_s) as connection:
            received = b""
            while b"\n" not in received and len(received) < MAX_BANNER:
                connection.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = connection.recv(MAX_BANNER - len(received))
                if not chunk:
                    break
                received += chunk
    except (OSError, socket.timeout) as error:
        return "sshd on {}:{}: {}".format(address[0], address[1], error.strerror or error)
    if not received.startswith(BANNER):
        return "sshd on {}:{} sent no SSH-2.0 identification ({!r})".format(address[0], address[1], received[:40])
    return None


def drained(root: Path) -> Optional[Dict[str, Any]]:
    """The drain marker's record ({"since": ...}) when the node is drained, else None. A marker in a directory a
    user could write is not trusted (and not honoured): the node reports it instead of serving."""
    marker = root / DRAIN_MARKER.lstrip("/")
    try:
        text = marker.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    return record if isinstance(record, dict) else {"since": None}


def safe_dir(path: Path) -> Optional[str]:
    """Why ``path`` may not hold the drain marker (None: a directory, not a link, root's, 0700 or stricter)."""
    try:
        info = os.lstat(str(path))
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return "{} is not a directory".format(path)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return "{} is owned by uid {} with mode {:o}; expected root's, 0700".format(
            path, info.st_uid, info.st_mode & 0o777
        )
    return None


def health(root: Path, probe: Probe) -> Tuple[int, str]:
    """(HTTP status, one-line reason) of this node now."""
    record = drained(root)
    if record is not None:
        return 503, "drained since {}".format(record.get("since"))
    why = probe()
    if why is not None:
        return 503, why
    return 200, "ok"


class _Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def server(port: int, root: Path, probe: Probe, host: str = "0.0.0.0") -> HTTPServer:
    """An HTTP server answering ``GET /health`` (and ``HEAD``) on ``host:port``; other paths are 404."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "hyperpod-cdk-login-health"

        def _answer(self, body: bool) -> None:
            if self.path.split("?", 1)[0] != "/health":
                code, text = 404, "not found"
            else:
                code, text = health(root, probe)
            data = (text + "\n").encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            if body:
                self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer(True)

        def do_HEAD(self) -> None:
            self._answer(False)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the load balancer checks every few seconds: no line per check

    return _Server((host, port), Handler)
