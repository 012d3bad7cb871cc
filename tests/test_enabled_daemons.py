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
from training_runtime.services import BOOT_COMMANDS, ENABLED_DAEMONS, Daemon, boot_commands, enabled_daemons
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


class FakeBootNode:
    """A node's ``cluster.exec`` for :func:`enabled.start`: ``cat`` of a record answers its ``files`` entry (absent:
    exit 1); any other command answers ``answers`` by its first word (default: success) and is remembered in order."""

    def __init__(self, files: dict[str, str], answers: dict[str, tuple[int, str]] | None = None) -> None:
        self.files, self.answers = files, answers or {}
        self.ran: list[list[str]] = []

    def exec(self, name: str, argv: list[str], **_: object) -> SimpleNamespace:
        if argv[0] == "cat":
            found = self.files.get(argv[1])
            return SimpleNamespace(returncode=0 if found is not None else 1, stdout=found or "", stderr="")
        self.ran.append(argv)
        code, err = self.answers.get(argv[0], (0, ""))
        return SimpleNamespace(returncode=code, stdout="", stderr=err)


def test_a_daemon_that_does_not_come_up_fails_the_boot_naming_it() -> None:
    node = FakeBootNode({ENABLED_DAEMONS: json.dumps([services.daemon_record(MUNGED)])}, {"/bin/sh": (1, "munge did")})
    with pytest.raises(LocalClusterError, match="node w-1: starting its enabled daemons at boot failed: munge did"):
        enabled.start(node, "w-1")  # type: ignore[arg-type]


def test_boot_commands_run_first_in_order_then_the_daemons(tmp_path: Path) -> None:
    """A one-shot command the runtime enabled without systemd (the metadata service's firewall rules) runs at every
    boot before any daemon: a new network namespace starts without the node's rules."""
    node = fake_node(tmp_path, instance="workers-1")
    assert services.set_boot_command(node, "guard.service", ["/opt/hyperpod-cdk/bin/imds-guard"])
    assert services.set_boot_command(node, "second.service", ["/bin/true", "x"])
    assert not services.set_boot_command(node, "guard.service", ["/opt/hyperpod-cdk/bin/imds-guard"])  # no change
    record = (tmp_path / BOOT_COMMANDS.lstrip("/")).read_text()
    assert boot_commands(record) == [
        ("guard.service", ("/opt/hyperpod-cdk/bin/imds-guard",)),
        ("second.service", ("/bin/true", "x")),
    ]
    booted = FakeBootNode({BOOT_COMMANDS: record, ENABLED_DAEMONS: json.dumps([services.daemon_record(MUNGED)])})
    assert enabled.start(booted, "w-1") == ["guard.service", "second.service"]  # type: ignore[arg-type]
    assert [argv[0] for argv in booted.ran] == ["/opt/hyperpod-cdk/bin/imds-guard", "/bin/true", "/bin/sh"]
    assert services.set_boot_command(node, "guard.service", None)  # disabled: gone, the other keeps its place
    remaining = boot_commands((tmp_path / BOOT_COMMANDS.lstrip("/")).read_text())
    assert remaining == [("second.service", ("/bin/true", "x"))]


def test_a_boot_command_that_fails_stops_the_boot_naming_node_and_command() -> None:
    record = json.dumps([{"unit": "guard.service", "argv": ["/opt/hyperpod-cdk/bin/imds-guard"]}])
    node = FakeBootNode({BOOT_COMMANDS: record}, {"/opt/hyperpod-cdk/bin/imds-guard": (1, "iptables: no chain")})
    with pytest.raises(LocalClusterError, match=r"node w-1: guard.service \(/opt/hyperpod-cdk/bin/imds-guard\) failed"):
        enabled.start(node, "w-1")  # type: ignore[arg-type]
    assert node.ran == [["/opt/hyperpod-cdk/bin/imds-guard"]]  # no daemon started after it
    with pytest.raises(ValueError, match=r"boot-commands.json\[0\]: not a boot command"):
        boot_commands(json.dumps([{"unit": "x", "argv": []}]))
