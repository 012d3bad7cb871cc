"""The SageMaker JSON protocol over HTTP: what botocore sends and parses for the ``sagemaker`` service.

botocore's service model (``botocore/data/sagemaker/2017-07-24/service-2.json``: ``"protocol": "json"``,
``"jsonVersion": "1.1"``, ``"targetPrefix": "SageMaker"``, signing name ``sagemaker``) fixes the wire format: a
``POST /`` with ``X-Amz-Target: SageMaker.<Operation>``, ``Content-Type: application/x-amz-json-1.1`` and the
parameters as a JSON object; the answer is a JSON object (timestamps as epoch seconds), or an error with an HTTP
status >= 400 and the body ``{"__type": "<Code>", "message": "..."}``, which botocore raises as ``ClientError``
with that code. Every request is checked for its SigV4 signature first (:mod:`.sigv4`).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import socket
from typing import Any

from hyperpod_local.control_plane.model import ApiError
from hyperpod_local.control_plane.operations import ControlPlane
from hyperpod_local.control_plane.sigv4 import Key, verify

TARGET_PREFIX = "SageMaker."
SECRETS_PREFIX = "secretsmanager."
"""Secrets Manager's JSON 1.1 target prefix (botocore's ``secretsmanager/2017-10-17`` model: ``"targetPrefix":
"secretsmanager"``, signing name ``secretsmanager``): the endpoint also answers ``GetSecretValue`` for the secrets
the emulation was given (the directory's bind password, issue #41)."""
CONTENT_TYPE = "application/x-amz-json-1.1"
MAX_BODY = 1 << 20


class Server(ThreadingHTTPServer):
    daemon_threads = True
    control_plane: ControlPlane
    keys: Callable[[], Iterable[Key]]
    clock: Callable[[], float]
    region: str
    secrets: Callable[[], Mapping[str, str]]


def region_of(arn: str) -> str:
    """The Region field of an ARN (``arn:aws:sagemaker:<region>:...``): the one the endpoint serves."""
    return arn.split(":")[3]


class BadLength(ApiError):
    """A Content-Length the server will not read: the body stays unread, so the connection is closed after the
    answer."""


def body_length(value: str | None) -> int:
    """The request's Content-Length as a number of bytes; :class:`BadLength` for one that is not a number from 0 to
    :data:`MAX_BODY` (a negative one would read to the end of the connection)."""
    try:
        length = int(value or 0)
    except ValueError:
        raise BadLength(
            "SerializationException", f"Content-Length: got {str(value)[:40]!r}; expected a number"
        ) from None
    if length < 0:
        raise BadLength("SerializationException", f"Content-Length: got {length}; expected 0 or more bytes")
    if length > MAX_BODY:
        raise BadLength("SerializationException", f"Content-Length: got {length}; at most {MAX_BODY} bytes", 413)
    return length


def make_handler() -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server: Server
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any], error: str | None = None) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
            if error:
                self.send_header("x-amzn-ErrorType", error)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(
                404,
                {"__type": "UnknownOperationException", "message": "POST / with X-Amz-Target"},
                "UnknownOperationException",
            )

        def do_POST(self) -> None:
            try:
                body = self.rfile.read(body_length(self.headers.get("Content-Length")))
                answer = self._answer(body)
            except ApiError as error:
                if isinstance(error, BadLength):
                    self.close_connection = True  # its body is unread: the connection cannot carry another request
                self._send(error.status, {"__type": error.code, "message": error.message}, error.code)
            except Exception as error:  # the service answers 500, never drops the connection
                self._send(
                    500, {"__type": "InternalFailure", "message": f"{type(error).__name__}: {error}"}, "InternalFailure"
                )
            else:
                self._send(200, answer)

        def _answer(self, body: bytes) -> dict[str, Any]:
            host = self.headers.get("Host", "")
            target = self.headers.get("X-Amz-Target", "")
            secrets = target.startswith(SECRETS_PREFIX)
            verify(
                "POST",
                f"http://{host}{self.path}",
                dict(self.headers.items()),
                body,
                self.server.keys,
                self.server.region,
                self.server.clock,
                service="secretsmanager" if secrets else "sagemaker",
            )
            if secrets:
                return get_secret_value(target[len(SECRETS_PREFIX) :], body, self.server.secrets())
            if not target.startswith(TARGET_PREFIX):
                raise ApiError(
                    "UnknownOperationException", f"X-Amz-Target: got {target!r}; expected SageMaker.<Operation>"
                )
            try:
                params = json.loads(body or b"{}")
            except ValueError:
                raise ApiError("SerializationException", "the body is not JSON") from None
            if not isinstance(params, dict):
                raise ApiError("SerializationException", "the body is not a JSON object")
            return self.server.control_plane.call(target[len(TARGET_PREFIX) :], params)

    return Handler


def get_secret_value(operation: str, body: bytes, secrets: Mapping[str, str]) -> dict[str, Any]:
    """Secrets Manager's ``GetSecretValue`` (API reference: "SecretId ... The ARN or name of the secret"; the answer's
    ``ARN``, ``Name``, ``SecretString``, ``VersionId``); ``ResourceNotFoundException`` for a secret it does not hold."""
    if operation != "GetSecretValue":
        raise ApiError("UnknownOperationException", f"secretsmanager.{operation}: only GetSecretValue is emulated")
    try:
        secret_id = json.loads(body or b"{}").get("SecretId")
    except (ValueError, AttributeError):
        raise ApiError("SerializationException", "the body is not a JSON object") from None
    for arn, value in secrets.items():
        if secret_id in (arn, arn.split(":secret:")[-1]):
            return {"ARN": arn, "Name": arn.split(":secret:")[-1], "SecretString": value, "VersionId": "1"}
    raise ApiError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.", 400)


class Endpoint:
    """The control plane served on one or more bound sockets (each its own thread): :meth:`start`, :meth:`stop`."""

    def __init__(
        self,
        control_plane: ControlPlane,
        keys: Callable[[], Iterable[Key]],
        clock: Callable[[], float] = time.time,
        secrets: Callable[[], Mapping[str, str]] = dict,
    ) -> None:
        """``keys``: the credentials a request may be signed with; ``clock``: the time signatures are checked
        against (the wall clock; the control plane's own clock may be a test's); ``secrets``: ARN -> value of the
        secrets ``GetSecretValue`` serves (read on every call)."""
        self.control_plane = control_plane
        self.keys = keys
        self.clock = clock
        self.secrets = secrets
        self.servers: list[Server] = []
        self.threads: list[threading.Thread] = []

    def serve(self, host: str = "127.0.0.1", port: int = 0, sock: socket | None = None) -> str:
        """Serve on ``host:port`` (0: a free port), or on the already bound ``sock``; returns the URL."""
        server = Server((host, port), make_handler(), bind_and_activate=sock is None)
        if sock is not None:
            server.socket.close()
            server.socket = sock
            server.server_address = sock.getsockname()
            server.server_activate()
        server.control_plane, server.keys, server.clock = self.control_plane, self.keys, self.clock
        server.secrets = self.secrets
        server.region = region_of(self.control_plane.cluster.arn)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        thread.start()
        self.servers.append(server)
        self.threads.append(thread)
        address, bound = server.server_address[:2]
        return f"http://{address!s}:{bound}"

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
        self.servers.clear()
