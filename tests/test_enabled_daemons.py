"""Daemons started without systemd are recorded as enabled, and the emulated boot starts them again in order."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from hyperpod_local import enabled
from hyperpod_local.state import LocalClusterError
from runtime_fakes import fake_node, running_daemon
from training_runtime import services
from training_runtime.services import ENABLED_DAEMONS, Daemon, enabled_daemons
from training_runtime.steps.accounting import MARIADB
from training_runtime.steps.munge import MUNGED


def test_each_daemon_started_without_systemd_is_recorded_in_order_once(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1")
    for daemon in (MUNGED, MARIADB):
        running_daemon(node, daemon)
        services.start(node, daemon)
    services.restart(node, MUNGED)  # enabled again: it keeps its place (munged before what needs it)
    recorded = enabled_daemons((tmp_path / ENABLED_DAEMONS.lstrip("/")).read_text())
    assert recorded == [MUNGED, MARIADB]


def test_with_systemd_nothing_is_recorded(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1")
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    services.start(node, MUNGED)
    assert node.runner.ran("systemctl", "enable", "--now", "munge")  # type: ignore[attr-defined]
    assert not (tmp_path / ENABLED_DAEMONS.lstrip("/")).exists()


def test_a_broken_record_is_an_error_naming_the_file_and_entry() -> None:
    assert enabled_daemons(None) == []
    with pytest.raises(ValueError, match=r"enabled-daemons.json\[0\]: not a daemon record"):
        enabled_daemons(json.dumps([{"name": "x"}]))
    with pytest.raises(ValueError, match="expected a JSON list"):
        enabled_daemons("{}")
    with pytest.raises(ValueError, match=r"enabled-daemons\.json: not JSON"):
        enabled_daemons("[{")


def sleeper(root: Path, name: str) -> Daemon:
    """A daemon whose process is ``sleep`` and whose start command forks it and writes its pid file."""
    pid_file = str(root / f"{name}.pid")
    argv = ("/bin/sh", "-c", f"sleep 30 >/dev/null 2>&1 & echo $! >{pid_file}; echo started {name} >>{root}/order")
    return Daemon(name="sleep", unit=name, argv=argv, pid_file=pid_file)


def test_the_boot_script_starts_each_daemon_not_running_in_order(tmp_path: Path) -> None:
    first, second = sleeper(tmp_path, "first"), sleeper(tmp_path, "second")
    script = enabled.boot_script([first, second])
    try:
        done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["first", "second"]
        assert (tmp_path / "order").read_text().split("\n")[:2] == ["started first", "started second"]
        # Booted again while both run (HyperPod's part may have started one): none is started twice.
        again = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and (tmp_path / "order").read_text().count("started") == 2
    finally:
        for daemon in (first, second):
            pid = Path(daemon.pid_file).read_text().strip() if Path(daemon.pid_file).exists() else ""
            if pid:
                subprocess.run(["kill", pid], check=False)


def test_a_daemon_that_does_not_come_up_fails_the_boot_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    record = json.dumps([services.daemon_record(MUNGED)])
    outputs = iter([(0, record, ""), (1, "", "munge did not start")])

    def exec_(name: str, argv: list[str], **_: object) -> SimpleNamespace:
        code, out, err = next(outputs)
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    cluster = SimpleNamespace(exec=exec_)
    with pytest.raises(LocalClusterError, match="node w-1: starting its enabled daemons at boot failed: munge did"):
        enabled.start(cluster, "w-1")  # type: ignore[arg-type]
