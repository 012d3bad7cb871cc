"""A login node of a login pool (issue #41, part 4) on the node's side: the host-key bundle and its one writer (the
first node's PutSecretValue wins by ClientRequestToken, the others install its keys), the keys in /etc/ssh (modes,
written only when changed, sshd reloaded then), the health endpoint (sshd's banner, the drain marker) and
``login drain|undrain|status``; the steps only on login nodes of a pool. Stdlib only (runs on Python 3.8)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import redirect_stdout
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import RecordingRunner, fake_node, running_daemon, touch
from training_runtime.aws_secrets import SecretError, SecretsManager
from training_runtime.errors import StepFailed
from training_runtime.login_pool import cli
from training_runtime.login_pool.health import DRAIN_DIR, DRAIN_MARKER, health, server, sshd_answers
from training_runtime.login_pool.host_keys import (
    KEY_TYPES,
    PRIVATE_BEGIN,
    BundleError,
    client_request_token,
    dump_bundle,
    generate_keys,
    keygen_argv,
    parse_bundle,
)
from training_runtime.login_pool.params import LoginPoolParams
from training_runtime.params import ProvisioningParameters
from training_runtime.scaler.sigv4 import Credentials
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.login_pool import (
    HEALTH,
    HEALTH_PROGRAM,
    SSHD,
    LoginHealthFiles,
    PoolHostKeys,
    SshdRunning,
    host_key_files,
    pool_keys,
    run_keygen,
)

ARN = "arn:aws:secretsmanager:us-west-2:123456789012:secret:hpcdk-login-host-keys-AbCdEf"
POOL = LoginPoolParams(ARN, "us-west-2", 2223)
PLACEHOLDER = "generated-placeholder-Zq7wXy"


def fake_keygen(tag: str) -> Any:
    """An ssh-keygen that writes recognisable files (``tag`` tells two nodes' keys apart) and records its argv."""
    seen: list[list[str]] = []

    def keygen(argv: Sequence[str]) -> None:
        seen.append(list(argv))
        path, kind = argv[argv.index("-f") + 1], argv[argv.index("-t") + 1]
        Path(path).write_text(f"{PRIVATE_BEGIN}\n{tag}-{kind}-private\n-----END OPENSSH PRIVATE KEY-----\n")
        prefix = {"ed25519": "ssh-ed25519", "ecdsa": "ecdsa-sha2-nistp256", "rsa": "ssh-rsa"}[kind]
        Path(path + ".pub").write_text(f"{prefix} AAAA{tag}{kind} hyperpod-cdk-login-pool\n")
        assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"

    keygen.seen = seen  # type: ignore[attr-defined]
    return keygen


# --- a Secrets Manager with PutSecretValue's token rules, over HTTP -------------------------------------------------


class _Store(BaseHTTPRequestHandler):
    versions: dict[str, tuple[str, list[str]]] = {}
    stale_reads = 0
    """GetSecretValue answers the first version this many times more (two nodes read before either wrote)."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        operation = self.headers["X-Amz-Target"].split(".", 1)[1]
        _Store.calls.append((operation, body))
        code: int = 200
        answer: dict[str, Any] = {}
        if operation == "GetSecretValue":
            current = next(v for v, (_, stages) in _Store.versions.items() if "AWSCURRENT" in stages)
            if _Store.stale_reads:
                _Store.stale_reads -= 1
                current = next(iter(_Store.versions))
            answer = {"SecretString": _Store.versions[current][0], "VersionId": current}
        elif operation == "PutSecretValue":
            token, value = body["ClientRequestToken"], body["SecretString"]
            if token in _Store.versions and _Store.versions[token][0] != value:
                code, answer = 400, {"__type": "ResourceExistsException", "message": "exists"}
            elif token not in _Store.versions:
                for _, stages in _Store.versions.values():
                    stages[:] = [s for s in stages if s != "AWSCURRENT"]
                _Store.versions[token] = (value, ["AWSCURRENT"])
                answer = {"VersionId": token}
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def store() -> Iterator[str]:
    _Store.versions = {"placeholder-version": (PLACEHOLDER, ["AWSCURRENT"])}
    _Store.stale_reads = 0
    _Store.calls = []
    httpd = HTTPServer(("127.0.0.1", 0), _Store)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def client(url: str) -> SecretsManager:
    return SecretsManager(url, "us-west-2", lambda: Credentials("AKID", "secret", "token"), attempts=1)


def login_node(tmp_path: Path, **kwargs: Any) -> Any:
    return fake_node(tmp_path / "root", instance="login-1", **kwargs)


# --- the bundle ----------------------------------------------------------------------------------------------------


def test_a_generated_bundle_holds_every_type_its_public_keys_derive_from_the_private_ones(tmp_path: Path) -> None:
    keys = generate_keys(run_keygen)
    assert parse_bundle(dump_bundle(keys)) == keys and set(keys) == set(KEY_TYPES)
    for kind, (private, public) in keys.items():
        path = tmp_path / kind
        path.write_text(private)
        path.chmod(0o600)
        derived = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True)
        assert derived.stdout.split()[:2] == public.split()[:2], kind


def test_the_placeholder_is_not_a_bundle_and_a_broken_bundle_is_an_error_that_shows_no_key() -> None:
    assert parse_bundle(PLACEHOLDER) is None and parse_bundle('{"password": "x"}') is None
    keys = generate_keys(fake_keygen("a"))
    data = json.loads(dump_bundle(keys))
    with pytest.raises(BundleError, match="version 2"):
        parse_bundle(json.dumps({**data, "version": 2}))
    data["keys"]["rsa"]["public"] = "ssh-ed25519 AAAA"
    with pytest.raises(BundleError, match=r"keys\.rsa\.public") as error:
        parse_bundle(json.dumps(data))
    assert PRIVATE_BEGIN not in str(error.value)


def test_the_token_is_the_same_on_every_node_and_new_for_a_new_placeholder() -> None:
    token = client_request_token(ARN, "v1")
    assert token == client_request_token(ARN, "v1") and 32 <= len(token) <= 64
    assert token != client_request_token(ARN, "v2") and token != client_request_token(ARN + "x", "v1")


def test_ssh_keygen_never_gets_a_key_on_its_command_line_and_works_in_a_private_directory() -> None:
    keygen = fake_keygen("a")
    keys = generate_keys(keygen)
    for argv in keygen.seen:
        assert argv[argv.index("-N") + 1] == "" and not any("PRIVATE" in a or "AAAA" in a for a in argv)
        assert not os.path.exists(os.path.dirname(argv[argv.index("-f") + 1])), "the directory is removed"
    assert keygen_argv("rsa", "/x")[:6] == ["ssh-keygen", "-q", "-t", "rsa", "-b", "3072"] and len(keys) == 3


# --- the one writer -------------------------------------------------------------------------------------------------


def test_the_first_node_writes_its_bundle_with_the_derived_token(store: str, tmp_path: Path) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        keys = pool_keys(login_node(tmp_path), POOL, client=client(store), keygen=fake_keygen("first"))
    assert keys is not None and "first-ed25519" in keys["ed25519"][0]
    (put,) = [body for operation, body in _Store.calls if operation == "PutSecretValue"]
    assert put["ClientRequestToken"] == client_request_token(ARN, "placeholder-version")
    assert parse_bundle(put["SecretString"]) == keys
    assert "first-" not in out.getvalue() and "login_pool_host_keys" in out.getvalue(), "logged, without a key"


def test_a_second_node_racing_the_first_installs_the_first_nodes_keys(store: str, tmp_path: Path) -> None:
    _Store.stale_reads = 2  # both nodes read the placeholder before either wrote
    first = pool_keys(login_node(tmp_path), POOL, client=client(store), keygen=fake_keygen("first"))
    second = pool_keys(login_node(tmp_path), POOL, client=client(store), keygen=fake_keygen("second"))
    assert first == second and "first-rsa" in first["rsa"][0]  # type: ignore[index]
    puts = [body["ClientRequestToken"] for operation, body in _Store.calls if operation == "PutSecretValue"]
    assert len(puts) == 2 and len(set(puts)) == 1, "the same token; the second was refused as existing"
    assert len(_Store.versions) == 2


def test_a_bundle_in_the_secret_is_installed_and_nothing_is_written(store: str, tmp_path: Path) -> None:
    keys = generate_keys(fake_keygen("there"))
    _Store.versions = {"v1": (dump_bundle(keys), ["AWSCURRENT"])}
    assert pool_keys(login_node(tmp_path), POOL, client=client(store), keygen=fake_keygen("mine")) == keys
    assert [operation for operation, _ in _Store.calls] == ["GetSecretValue"]


def test_plan_reads_only_and_says_it_would_generate(store: str, tmp_path: Path) -> None:
    assert pool_keys(login_node(tmp_path), POOL, write=False, client=client(store)) is None
    assert [operation for operation, _ in _Store.calls] == ["GetSecretValue"]


def test_a_refused_read_fails_with_the_fix_and_no_value(tmp_path: Path) -> None:
    class Denied(SecretsManager):
        def current(self, arn: str) -> tuple[str, str]:
            raise SecretError(f"GetSecretValue {arn}: AccessDeniedException (auth)", "AccessDeniedException")

    with pytest.raises(StepFailed, match="PutSecretValue on it") as error:
        pool_keys(login_node(tmp_path), POOL, client=Denied("http://x/", "us-west-2", lambda: Credentials("a", "b")))
    assert "AccessDeniedException" in str(error.value)


def test_put_string_sends_the_token_and_reports_the_existing_version(store: str) -> None:
    secrets = client(store)
    assert secrets.put_string(ARN, "one", "tok-1") == "tok-1"
    assert secrets.put_string(ARN, "one", "tok-1") == "tok-1"  # same token, same value: ignored
    with pytest.raises(SecretError) as error:
        secrets.put_string(ARN, "two", "tok-1")
    assert error.value.code == "ResourceExistsException" and "two" not in str(error.value)
    assert secrets.current(ARN) == ("one", "tok-1")


# --- the files and sshd ---------------------------------------------------------------------------------------------


def keys_of(tag: str) -> Any:
    keys = generate_keys(fake_keygen(tag))
    return lambda node, pool, write: keys


def test_the_keys_are_installed_root_0600_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    node = login_node(tmp_path)
    step = PoolHostKeys(POOL, keys_of("a"))
    assert step.needed(node)
    step.apply(node)
    for kind in KEY_TYPES:
        private = node.path(f"/etc/ssh/ssh_host_{kind}_key")
        assert private.stat().st_mode & 0o777 == 0o600 and f"a-{kind}-private" in private.read_text()
        assert (node.root / f"etc/ssh/ssh_host_{kind}_key.pub").stat().st_mode & 0o777 == 0o644
    assert not PoolHostKeys(POOL, keys_of("a")).needed(node), "converged"


def test_new_keys_replace_the_old_and_sshd_reloads_only_then(tmp_path: Path) -> None:
    node = login_node(tmp_path)
    PoolHostKeys(POOL, keys_of("a")).apply(node)  # sshd not running yet: nothing to reload
    touch(node.root, SSHD.pid_file, f"{os.getpid()}\n")
    touch(node.root, f"/proc/{os.getpid()}/comm", "sshd\n")
    hups: list[int] = []
    original = os.kill
    os.kill = lambda pid, sig: hups.append(pid)  # type: ignore[assignment]
    try:
        PoolHostKeys(POOL, keys_of("a")).apply(node)
        assert hups == []
        PoolHostKeys(POOL, keys_of("b")).apply(node)
    finally:
        os.kill = original
    assert hups == [os.getpid()]
    assert "b-rsa-private" in node.path("/etc/ssh/ssh_host_rsa_key").read_text()


def test_with_systemd_sshd_reloads_through_its_unit_and_is_left_to_the_ami(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = login_node(tmp_path, runner=runner, params=pool_params())
    node.path("/run/systemd/system").mkdir(parents=True)
    PoolHostKeys(POOL, keys_of("a")).apply(node)
    assert runner.ran("systemctl", "try-reload-or-restart", "ssh.service")
    names = [s.name for s in steps_for(node)]
    assert "login-pool-sshd" not in names and "login-pool-host-keys" in names


def test_sshd_is_started_where_there_is_no_systemd_and_the_health_service_runs(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = login_node(tmp_path, runner=runner)
    touch(node.root, "/usr/sbin/sshd", "").chmod(0o755)
    running_daemon(node, SSHD, pid=4343)
    running_daemon(node, HEALTH, pid=4444)
    SshdRunning().apply(node)
    assert runner.ran("/usr/sbin/sshd")
    LoginHealthFiles(POOL).apply(node)
    assert "login serve --port 2223" in node.path(HEALTH_PROGRAM).read_text()


# --- the steps' place -----------------------------------------------------------------------------------------------


def pool_params() -> ProvisioningParameters:
    from runtime_fakes import CLUSTER_GROUPS

    return ProvisioningParameters(cluster_name="test", mode="lifecycle-driven", groups=CLUSTER_GROUPS, login_pool=POOL)


def test_only_login_nodes_of_a_pool_run_the_pool_steps(tmp_path: Path) -> None:
    pool_steps = {"login-pool-host-keys", "login-pool-sshd", "login-pool-health", "daemon:" + HEALTH.unit}
    login = fake_node(tmp_path / "a", instance="login-1", params=pool_params())
    assert pool_steps <= {s.name for s in steps_for(login)}
    worker = fake_node(tmp_path / "b", instance="workers-1", params=pool_params())
    assert not pool_steps & {s.name for s in steps_for(worker)}
    plain = fake_node(tmp_path / "c", instance="login-1")
    assert not pool_steps & {s.name for s in steps_for(plain)}
    assert [p for p, _, _ in host_key_files(generate_keys(fake_keygen("x")))][:2] == [
        "/etc/ssh/ssh_host_ed25519_key",
        "/etc/ssh/ssh_host_ed25519_key.pub",
    ]


# --- the health endpoint --------------------------------------------------------------------------------------------


def banner_server(banner: bytes | None) -> tuple[int, socket.socket]:
    """A TCP server that sends ``banner`` to each connection (None: says nothing)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            if banner is not None:
                connection.sendall(banner)
            threading.Timer(1.0, connection.close).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], listener


def test_sshd_answers_only_with_an_ssh_2_banner_in_time() -> None:
    port, listener = banner_server(b"SSH-2.0-OpenSSH_9.9 Debian\r\n")
    assert sshd_answers(("127.0.0.1", port)) is None
    listener.close()
    port, listener = banner_server(b"HTTP/1.1 400 Bad\r\n")
    assert "no SSH-2.0" in (sshd_answers(("127.0.0.1", port)) or "")
    listener.close()
    port, listener = banner_server(None)
    assert sshd_answers(("127.0.0.1", port), timeout_s=0.3) is not None
    listener.close()
    assert f"127.0.0.1:{port}" in (sshd_answers(("127.0.0.1", port)) or ""), "nothing listens"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_endpoint_is_200_while_sshd_answers_and_503_when_drained_or_sshd_is_down(tmp_path: Path) -> None:
    probe: list[str | None] = [None]
    httpd = server(0, tmp_path, lambda: probe[0], host="127.0.0.1")
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        assert get(url + "/health") == (200, "ok\n")
        assert get(url + "/")[0] == 404
        probe[0] = "sshd on 127.0.0.1:22: Connection refused"
        assert get(url + "/health") == (503, "sshd on 127.0.0.1:22: Connection refused\n")
        probe[0] = None
        assert cli.set_drained(tmp_path, True, clock=lambda: 1700000000.0)  # an injected clock: text only
        assert get(url + "/health") == (503, "drained since 1700000000.0\n")  # the injected clock's time, echoed
        assert not cli.set_drained(tmp_path, True) and cli.set_drained(tmp_path, False)
        assert get(url + "/health")[0] == 200 and not cli.set_drained(tmp_path, False)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_drain_marker_is_root_only_and_a_directory_a_user_could_write_is_refused(tmp_path: Path) -> None:
    cli.set_drained(tmp_path, True)
    directory = tmp_path / DRAIN_DIR.lstrip("/")
    assert directory.stat().st_mode & 0o777 == 0o700 and (tmp_path / DRAIN_MARKER.lstrip("/")).is_file()
    cli.set_drained(tmp_path, False)
    directory.chmod(0o777)
    with pytest.raises(PermissionError, match="expected root's, 0700"):
        cli.set_drained(tmp_path, True)
    directory.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    directory.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError, match="not a directory"):
        cli.set_drained(tmp_path, True)


def test_login_drain_is_root_only_and_status_tells_the_load_balancers_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = ["--root", str(tmp_path)]
    assert cli.main(["status", *root], probe=lambda: None) == 0
    assert json.loads(capsys.readouterr().out) == {"healthy": True, "drained": False, "reason": "ok"}
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli.main(["drain", *root]) == cli.FAILED and "root only" in capsys.readouterr().err
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cli.main(["drain", *root]) == 0 and json.loads(capsys.readouterr().out)["changed"] is True
    assert cli.main(["status", *root], probe=lambda: None) == cli.UNHEALTHY
    assert json.loads(capsys.readouterr().out)["drained"] is True
    assert health(tmp_path, lambda: None)[0] == 503
    assert cli.main(["undrain", *root]) == 0 and health(tmp_path, lambda: None) == (200, "ok")
