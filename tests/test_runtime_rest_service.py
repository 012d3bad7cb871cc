"""The REST API's process and key refresh on the controller (training_runtime.rest.server, .rotate, .config), without
Slurm: the TLS endpoint in front of a stand-in slurmrestd on a UNIX socket, the child started again after it exits,
the key installed 0400 and the daemons told. Real TLS (a certificate made with openssl), real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import pwd
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import RecordingRunner
from training_runtime.rest.config import RestConfigError, RestServiceConfig
from training_runtime.rest.rotate import ROTATED, UNCHANGED, reconfigure, refresh, write_key
from training_runtime.rest.secret import SecretError, SecretsManager
from training_runtime.rest.server import SERVER_HEADER, Service, tls_context
from training_runtime.run import CommandError

ME = pwd.getpwuid(os.getuid()).pw_name
STAND_IN = """
import http.server, os, socketserver, sys
path = sys.argv[-1][len("unix:"):]
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = ("%s %s %s" % (self.path, self.headers.get("X-SLURM-USER-TOKEN"), os.environ.get("SLURM_JWT"))).encode()
        if self.path == "/exit":
            os._exit(3)
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    def get_request(self):
        request, _ = super().get_request()
        return request, ("unix", 0)
Server(path, Handler).serve_forever()
"""


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    directory = tmp_path_factory.mktemp("tls")
    key, cert = str(directory / "tls.key"), str(directory / "tls.crt")
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"),
            *("-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=controller"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def config(tmp_path: Path, certificate: tuple[str, str], slurmrestd: str, **more: Any) -> RestServiceConfig:
    values: dict[str, Any] = dict(
        port=free_port(),
        slurmrestd=slurmrestd,
        slurm_conf="/etc/slurm/slurm.conf",
        openapi_plugins=("openapi/slurmctld",),
        secret_arn="arn:aws:secretsmanager:r:1:secret:k-AbCdEf",
        region="r",
        scontrol="/usr/bin/scontrol",
        certificate=certificate[0],
        private_key=certificate[1],
        user=ME,
        slurm_user=ME,
        socket_dir=str(tmp_path / "socket"),
        key_file=str(tmp_path / "jwt" / "jwt_hs256.key"),
    )
    values.update(more)
    return RestServiceConfig(**values)


class Running:
    """:meth:`Service.run` in a thread of its own on 127.0.0.1, stopped at the end."""

    def __init__(self, config: RestServiceConfig, context: ssl.SSLContext) -> None:
        os.makedirs(config.socket_dir, mode=0o700, exist_ok=True)
        self.service = Service(config, context, host="127.0.0.1")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.service.run(False),))
        self.thread.start()

    def stop(self) -> None:
        deadline = time.monotonic() + 10
        while self.service.stopping is None and time.monotonic() < deadline:
            time.sleep(0.01)
        stopping = self.service.stopping
        if stopping is not None:
            self.loop.call_soon_threadsafe(stopping.set)
        self.thread.join(timeout=15)
        self.loop.close()


def get(port: int, cafile: str, path: str, token: str = "tok") -> tuple[int, str, str]:
    context = ssl.create_default_context(cafile=cafile)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        connection.request("GET", path, headers={"X-SLURM-USER-TOKEN": token})
        response = connection.getresponse()
        return response.status, response.read().decode(), response.getheader("Server") or ""
    finally:
        connection.close()


def wait_answer(port: int, cafile: str, path: str = "/ping") -> tuple[int, str, str]:
    deadline = time.monotonic() + 20
    while True:
        try:
            answer = get(port, cafile, path)
        except OSError:  # the endpoint is not listening yet
            answer = (0, "", "")
        if answer[0] == 200 or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


@pytest.fixture
def stand_in(tmp_path: Path) -> str:
    program = tmp_path / "slurmrestd"
    program.write_text(f"#!{sys.executable}\n{STAND_IN}")
    program.chmod(0o755)
    return str(program)


@pytest.fixture
def service(tmp_path: Path, certificate: tuple[str, str], stand_in: str) -> Iterator[Running]:
    running = Running(config(tmp_path, certificate, stand_in), tls_context(*certificate))
    yield running
    running.stop()


def test_requests_reach_slurmrestd_over_tls_with_their_token_and_jwt_daemon_mode(
    service: Running, certificate: tuple[str, str]
) -> None:
    status, body, server = wait_answer(service.service.config.port, certificate[0])
    assert (status, body) == (200, "/ping tok daemon")  # SLURM_JWT=daemon in slurmrestd's environment
    assert server != SERVER_HEADER


def test_slurmrestd_is_started_again_after_it_exits(service: Running, certificate: tuple[str, str]) -> None:
    port = service.service.config.port
    wait_answer(port, certificate[0])
    first = service.service.child
    with contextlib.suppress(http.client.HTTPException, OSError):
        get(port, certificate[0], "/exit")
    status, body, _ = get(port, certificate[0], "/ping")
    if status == 503:  # between the exit and the restart a caller is told, by the endpoint itself
        assert "slurmrestd is not running" in body
    assert wait_answer(port, certificate[0])[0] == 200
    assert service.service.child is not first


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_the_endpoint_speaks_tls_only_and_not_below_1_2(service: Running, certificate: tuple[str, str]) -> None:
    port = service.service.config.port
    wait_answer(port, certificate[0])
    plain = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    with pytest.raises((http.client.HTTPException, OSError)):
        plain.request("GET", "/ping")
        plain.getresponse()
    plain.close()
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.check_hostname, old.verify_mode = False, ssl.CERT_NONE
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with contextlib.suppress(ValueError):
        old.minimum_version = ssl.TLSVersion.TLSv1
    with pytest.raises((ssl.SSLError, OSError)), socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        old.wrap_socket(raw).close()


def test_without_slurmrestd_callers_get_503_from_the_endpoint(tmp_path: Path, certificate: tuple[str, str]) -> None:
    missing = config(tmp_path, certificate, str(tmp_path / "no-such-slurmrestd"))
    context = tls_context(*certificate)
    service = Service(missing, context)
    loop = asyncio.new_event_loop()
    try:
        os.makedirs(missing.socket_dir, exist_ok=True)
        server = loop.run_until_complete(asyncio.start_server(service.handle, "127.0.0.1", missing.port, ssl=context))
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        status, body, header = get(missing.port, certificate[0], "/ping")
        assert (status, header) == (503, SERVER_HEADER) and json.loads(body)["errors"]
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        server.close()
    finally:
        loop.close()


# --- settings -------------------------------------------------------------------------------------


def test_settings_round_trip_and_refuse_a_file_of_another_shape(tmp_path: Path, certificate: tuple[str, str]) -> None:
    settings = config(tmp_path, certificate, "/opt/slurm/sbin/slurmrestd", slurmdbd={"unit": "slurmdbd"})
    assert RestServiceConfig.loads(settings.dumps()) == settings
    data = json.loads(settings.dumps())
    with pytest.raises(RestConfigError, match="missing \\['secret_arn'\\]; unknown \\['key'\\]"):
        RestServiceConfig.from_json({**{k: v for k, v in data.items() if k != "secret_arn"}, "key": "x"})
    with pytest.raises(RestConfigError, match="port: got 0"):
        RestServiceConfig.from_json({**data, "port": 0})
    with pytest.raises(RestConfigError, match="not JSON"):
        RestServiceConfig.loads("{")


# --- key refresh ----------------------------------------------------------------------------------


class FakeSecrets(SecretsManager):
    def __init__(self, values: list[str]) -> None:
        super().__init__("http://unused/", "r", lambda: None)  # type: ignore[arg-type,return-value]
        self.values = values

    def call(self, operation: str, payload: Any) -> Any:
        assert (operation, payload["VersionStage"]) == ("GetSecretValue", "AWSCURRENT")
        return {"SecretString": self.values[0]}


def test_a_changed_key_is_installed_then_slurmctld_reconfigured_and_slurmdbd_restarted(
    tmp_path: Path, certificate: tuple[str, str]
) -> None:
    dbd = {"unit": "slurmdbd", "argv": ["/opt/slurm/sbin/slurmdbd"], "pid_file": str(tmp_path / "dbd.pid")}
    settings = config(tmp_path, certificate, "x", slurmdbd=dbd, systemd=True)
    values = ["A" * 64]
    runner = RecordingRunner()
    assert refresh(settings, FakeSecrets(values), runner.run) == ROTATED
    key = Path(settings.key_file)
    assert key.read_bytes() == b"A" * 64 and oct(key.stat().st_mode & 0o777) == "0o400"
    assert oct(key.parent.stat().st_mode & 0o777) == "0o700"
    assert runner.commands == [["/usr/bin/scontrol", "reconfigure"], ["systemctl", "restart", "slurmdbd"]]
    runner.commands.clear()
    assert refresh(settings, FakeSecrets(values), runner.run) == UNCHANGED
    assert runner.commands == []
    values[0] = "B" * 64
    assert refresh(settings, FakeSecrets(values), runner.run) == ROTATED
    assert key.read_bytes() == b"B" * 64 and runner.ran("/usr/bin/scontrol", "reconfigure")


def test_without_our_slurmdbd_only_slurmctld_is_told(tmp_path: Path, certificate: tuple[str, str]) -> None:
    runner = RecordingRunner()
    refresh(config(tmp_path, certificate, "x"), FakeSecrets(["C" * 64]), runner.run)
    assert runner.commands == [["/usr/bin/scontrol", "reconfigure"]]


def test_an_unusable_secret_leaves_the_key_file_alone(tmp_path: Path, certificate: tuple[str, str]) -> None:
    settings = config(tmp_path, certificate, "x")
    write_key(settings.key_file, b"A" * 64, ME)
    runner = RecordingRunner()
    with pytest.raises(SecretError):
        refresh(settings, FakeSecrets(["short"]), runner.run)
    assert Path(settings.key_file).read_bytes() == b"A" * 64 and runner.commands == []


def test_reconfigure_is_retried_until_slurmctld_takes_it_then_fails_with_the_fix() -> None:
    runner = RecordingRunner({("scontrol", "reconfigure"): (1, "Unable to contact slurm controller")})
    with pytest.raises(CommandError, match="slurmctld still has the old key"):
        reconfigure("scontrol", runner.run, sleep=lambda _s: None, deadline_s=0.05)
    assert len(runner.commands) >= 2
