"""The local stand-in for the login pool's Network Load Balancer (hyperpod_local.login_relay): new connections spread
over healthy targets in turn; a target turns unhealthy after its threshold of failed checks and gets no new
connections, while one already open through it goes on; it comes back after its healthy threshold; with no healthy
target the relay fails open; the health check is HTTP GET /health, 200-399 healthy."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from hyperpod_local.login_relay import LoginRelay, http_check

TARGETS = ("127.0.0.2", "127.0.0.3")


@pytest.fixture
def backends() -> Iterator[int]:
    """A server on the same port of each target address that answers every line with its own address."""
    probe = socket.create_server(("127.0.0.2", 0))
    port = probe.getsockname()[1]
    probe.close()
    listeners = [socket.create_server((address, port)) for address in TARGETS]

    def serve(listener: socket.socket, name: bytes) -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return

            def echo(c: socket.socket = connection) -> None:
                with c:
                    while data := c.recv(1024):
                        c.sendall(name + b":" + data)

            threading.Thread(target=echo, daemon=True).start()

    for listener, address in zip(listeners, TARGETS, strict=True):
        threading.Thread(target=serve, args=(listener, address.encode()), daemon=True).start()
    yield port
    for listener in listeners:
        listener.close()


def ask(connection: socket.socket, text: bytes = b"hi") -> str:
    connection.sendall(text)
    return connection.recv(1024).decode().split(":")[0]


def relay(port: int, health: dict[str, bool], **kwargs: object) -> LoginRelay:
    return LoginRelay(TARGETS, lambda address: health[address], port=port, interval_s=3600, **kwargs)  # type: ignore[arg-type]


def test_new_connections_spread_over_the_healthy_targets_in_turn(backends: int) -> None:
    with relay(backends, {a: True for a in TARGETS}) as pool:
        reached = []
        for _ in range(10):
            with socket.create_connection(pool.address) as connection:
                reached.append(ask(connection))
    assert sorted(reached) == sorted(TARGETS * 5) and reached[0] != reached[1]
    assert pool.split() == {a: 5 for a in TARGETS}


def test_an_unhealthy_target_gets_no_new_connection_and_keeps_its_open_one(backends: int) -> None:
    health = {a: True for a in TARGETS}
    with relay(backends, health, unhealthy_threshold=2, healthy_threshold=3) as pool:
        first = socket.create_connection(pool.address)
        assert ask(first) == TARGETS[0]
        health[TARGETS[0]] = False
        pool.check_all()
        assert pool.healthy()[TARGETS[0]], "one failure is below the threshold"
        pool.check_all()
        assert not pool.healthy()[TARGETS[0]]
        for _ in range(4):
            with socket.create_connection(pool.address) as connection:
                assert ask(connection) == TARGETS[1]
        assert ask(first, b"still there") == TARGETS[0], "the open connection is not cut"
        first.close()
        health[TARGETS[0]] = True
        pool.check_all()
        pool.check_all()
        assert not pool.healthy()[TARGETS[0]]
        pool.check_all()
        assert pool.healthy()[TARGETS[0]]
        reached = set()
        for _ in range(2):
            with socket.create_connection(pool.address) as connection:
                reached.add(ask(connection))
        assert reached == set(TARGETS)


def test_with_no_healthy_target_the_relay_fails_open(backends: int) -> None:
    with relay(backends, {a: False for a in TARGETS}) as pool:
        reached = set()
        for _ in range(2):
            with socket.create_connection(pool.address) as connection:
                reached.add(ask(connection))
    assert reached == set(TARGETS)


class _Health(BaseHTTPRequestHandler):
    code = 200

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(_Health.code if self.path == "/health" else 404)
        self.end_headers()


def test_the_health_check_is_get_health_healthy_on_2xx_and_3xx() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    check = http_check(server.server_address[1], 2.0)
    try:
        assert check("127.0.0.1")
        _Health.code = 302
        assert check("127.0.0.1")
        _Health.code = 503
        assert not check("127.0.0.1")
    finally:
        server.shutdown()
        server.server_close()
    assert not check("127.0.0.1"), "nothing listens"
