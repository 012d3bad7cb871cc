"""The emulator's host services (agent, control plane, Prometheus, metadata service) share one helper,
``hyperpod_local.host_service.HostService``: started once, known by a pid file only while the process is still
the service, ready when its check holds, stopped and reaped. No root: the services here are plain Pythons."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hyperpod_local.host_service import HostService, HostServiceError, in_netns, module_argv


def python_service(tmp_path: Path, code: str, **options: object) -> HostService:
    """A service running ``code``; its command line carries ``tmp_path``, its identity."""
    argv = (sys.executable, "-c", code, str(tmp_path))
    return HostService("the test service", tmp_path / "service", argv, (str(tmp_path),), **options)  # type: ignore[arg-type]


SLEEPER = "import time; time.sleep(60)"


def test_a_service_starts_once_and_stops_reaped(tmp_path: Path) -> None:
    service = python_service(tmp_path, SLEEPER)
    pid = service.start()
    try:
        assert service.pid() == pid and service.running()
        assert (service.directory / "pid").read_text() == f"{pid}\n"
        assert service.start() == pid  # running: no second process
    finally:
        service.stop(timeout=10)
    assert not service.running() and not (service.directory / "pid").exists()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie in a long-lived caller


def test_a_pid_file_naming_another_program_is_not_the_service(tmp_path: Path) -> None:
    service = python_service(tmp_path, SLEEPER)
    service.directory.mkdir(parents=True)
    (service.directory / "pid").write_text(f"{os.getpid()}\n")  # this pytest: alive, but not the service
    assert service.pid() is None
    service.stop()  # leaves that process alone
    assert Path(f"/proc/{os.getpid()}").exists()
    (service.directory / "pid").write_text("not a pid\n")
    assert not service.running()


def test_start_waits_for_the_ready_check(tmp_path: Path) -> None:
    flag = tmp_path / "serving"
    code = f"import pathlib, time; time.sleep(0.5); pathlib.Path({str(flag)!r}).touch(); time.sleep(60)"
    service = python_service(tmp_path, code, ready=flag.exists)
    try:
        service.start()
        assert flag.exists()
    finally:
        service.stop(timeout=10)


def test_a_service_that_exits_is_an_error_with_its_log(tmp_path: Path) -> None:
    code = "import sys; print('cannot bind 10.250.0.3:8112', flush=True); sys.exit(3)"
    service = python_service(tmp_path, code, ready=lambda: False, log_name="server.log")
    with pytest.raises(HostServiceError, match=r"the test service did not start.*cannot bind 10\.250\.0\.3:8112"):
        service.start()
    assert not (service.directory / "pid").exists()
    assert "cannot bind" in (service.directory / "server.log").read_text()


def test_a_service_never_ready_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    service = python_service(tmp_path, SLEEPER, ready=lambda: False, ready_timeout=0.5)
    with pytest.raises(HostServiceError, match=r"did not start within [01] s"):
        service.start()
    assert not service.running() and not (service.directory / "pid").exists()


def test_the_argv_helpers() -> None:
    assert module_argv("hyperpod_local.agent", Path("/w")) == (
        sys.executable,
        "-m",
        "hyperpod_local.processes",
        "hyperpod_local.agent",
        "--workdir",
        "/w",
    )
    assert in_netns("hpcdk-sw", ["prometheus", "--x"]) == ("ip", "netns", "exec", "hpcdk-sw", "prometheus", "--x")
