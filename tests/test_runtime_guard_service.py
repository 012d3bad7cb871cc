"""The Slurm guard's service on a fake root: repairs written, logged, counted and pushed; reports; the fight limit;
the watch (inotify, the stat poll) and the loop; the command line; the bootstrap's steps and the switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import RecordingRunner, fake_node, running_daemon, touch
from training_runtime import services
from training_runtime.files import read_text
from training_runtime.guard import checks, service, table, watch
from training_runtime.guard.checks import Layout
from training_runtime.guard.service import Guard, serve
from training_runtime.guard.tree import Tree
from training_runtime.hyperpod_facts import HYPERPOD_MARKER
from training_runtime.metrics.guard import GUARD_TEXTFILE, PROBLEM, REPAIRS
from training_runtime.steps.daemon import RunningDaemon
from training_runtime.steps.guard import GUARD_PROGRAM, SLURM_GUARD, GuardFiles, GuardRemoved, guard_steps

ETC = "/opt/slurm/etc"
LAYOUT = Layout(ETC, "/var/spool/slurmd/conf-cache")
BROKEN_TREE = "TopologyPlugin=topology/tree\nNodeName=ip-10-1-0-11 CPUs=2\n"


class Said:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def __call__(self, event: str, **fields: Any) -> None:
        self.lines.append({"event": event, **fields})

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == name]


def guard(root: Path, role: str = "controller", runner: RecordingRunner | None = None) -> tuple[Guard, Said]:
    said = Said()
    made = Guard(role, Tree(str(root)), LAYOUT, runner or RecordingRunner(), "scontrol", str(root / "prom"), say=said)
    return made, said


def metrics(root: Path) -> dict[str, float]:
    lines = (root / "prom" / GUARD_TEXTFILE).read_text().splitlines()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines if not line.startswith("#")}


def test_a_repair_is_written_logged_counted_and_pushed(tmp_path: Path) -> None:
    touch(tmp_path, f"{ETC}/slurm.conf", BROKEN_TREE)
    runner = RecordingRunner()
    made, said = guard(tmp_path, runner=runner)
    made.check()
    assert (tmp_path / "opt/slurm/etc/topology.conf").read_text() == checks.flat_tree(["ip-10-1-0-11"])
    [repair] = said.events("guard_repair")
    assert (repair["check"], repair["path"]) == (table.TOPOLOGY_TREE, f"{ETC}/topology.conf")
    assert runner.ran("scontrol", "reconfigure") == [["scontrol", "reconfigure"]]
    assert metrics(tmp_path)[f'{REPAIRS}{{check="{table.TOPOLOGY_TREE}"}}'] == 1
    made.check()
    assert len(said.events("guard_repair")) == 1 and len(runner.commands) == 1, "converged: nothing more to do"


def test_a_failed_push_is_retried_until_slurmctld_takes_it(tmp_path: Path) -> None:
    touch(tmp_path, f"{ETC}/slurm.conf", BROKEN_TREE)
    runner = RecordingRunner({("scontrol", "reconfigure"): (1, "Unable to contact slurm controller")})
    made, said = guard(tmp_path, runner=runner)
    made.check()
    assert made.push_pending and said.events("guard_push_failed")
    runner.respond = {}
    made.check()
    assert not made.push_pending and len(runner.ran("scontrol", "reconfigure")) == 2


def test_a_breakage_without_a_safe_repair_is_reported_once_and_cleared(tmp_path: Path) -> None:
    touch(tmp_path, f"{ETC}/slurm.conf", "TopologyPlugin=topology/block\n")
    runner = RecordingRunner()
    made, said = guard(tmp_path, runner=runner)
    made.check()
    made.check()
    assert [p["check"] for p in said.events("guard_problem")] == [table.TOPOLOGY_BLOCK], "logged once, not per check"
    assert metrics(tmp_path)[f'{PROBLEM}{{check="{table.TOPOLOGY_BLOCK}"}}'] == 1
    assert not (tmp_path / "opt/slurm/etc/topology.conf").exists() and runner.commands == []
    touch(tmp_path, f"{ETC}/topology.conf", "BlockName=b1 Nodes=ip-10-1-0-11\nBlockSizes=1\n")
    made.check()
    assert [c["check"] for c in said.events("guard_clear")] == [table.TOPOLOGY_BLOCK]
    assert metrics(tmp_path)[f'{PROBLEM}{{check="{table.TOPOLOGY_BLOCK}"}}'] == 0


def test_a_compute_node_only_reports_even_what_the_controller_repairs(tmp_path: Path) -> None:
    touch(tmp_path, "/var/spool/slurmd/conf-cache/slurm.conf", "ClusterName=c\n")
    plugstack = "required /a/spank_pyxis.so\nrequired /b/spank_pyxis.so\n"
    touch(tmp_path, "/var/spool/slurmd/conf-cache/plugstack.conf", plugstack)
    made, said = guard(tmp_path, role="compute")
    made.check()
    assert (tmp_path / "var/spool/slurmd/conf-cache/plugstack.conf").read_text() == plugstack
    assert [p["check"] for p in said.events("guard_problem")] == [table.PYXIS_TWICE]
    assert made.runner.commands == []  # type: ignore[attr-defined]


def test_a_finding_whose_repair_changes_nothing_writes_and_counts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touch(tmp_path, f"{ETC}/topology.conf", "as it is\n")
    made, said = guard(tmp_path)
    monkeypatch.setattr(made.tree, "write", lambda path, text: pytest.fail("wrote " + path))
    same = checks.Finding(table.TOPOLOGY_TREE, f"{ETC}/topology.conf", "no-op", "as it is\n", refresh=True)
    monkeypatch.setattr(service, "inspect", lambda *args: [same])
    made.check()
    assert said.events("guard_repair") == [] and not made.push_pending


def test_the_guard_stops_repairing_a_file_something_keeps_breaking(tmp_path: Path) -> None:
    touch(tmp_path, f"{ETC}/slurm.conf", BROKEN_TREE)
    made, said = guard(tmp_path)
    for _ in range(table.FIGHT_LIMIT + 2):
        (tmp_path / "opt/slurm/etc/topology.conf").unlink(missing_ok=True)  # HyperPod's agent, again and again
        made.check()
    assert len(said.events("guard_repair")) == table.FIGHT_LIMIT
    assert not (tmp_path / "opt/slurm/etc/topology.conf").exists(), "left as the other writer wants it"
    assert {p["check"] for p in said.events("guard_problem")} == {table.TOPOLOGY_TREE, table.FIGHT}


def test_refreshing_its_own_file_is_no_fight(tmp_path: Path) -> None:
    touch(tmp_path, f"{ETC}/slurm.conf", BROKEN_TREE)
    made, said = guard(tmp_path)
    made.check()
    for index in range(table.FIGHT_LIMIT + 2):  # nodes join one by one
        touch(tmp_path, f"{ETC}/slurm.conf", BROKEN_TREE + f"NodeName=gpu-{index} CPUs=2\n")
        made.check()
    assert f"gpu-{table.FIGHT_LIMIT + 1}" in (tmp_path / "opt/slurm/etc/topology.conf").read_text()
    assert not said.events("guard_problem")


def test_inotify_sees_a_file_renamed_into_a_watched_directory(tmp_path: Path) -> None:
    watcher = watch.Inotify()
    watcher.watch([str(tmp_path)])
    assert watcher.wait(0.05) is False
    (tmp_path / ".new").write_text("x")
    watcher.wait(0.05)  # the temporary file's own events
    os.replace(tmp_path / ".new", tmp_path / "slurm.conf")
    assert watcher.wait(5.0) is True
    watcher.close()


def test_a_directory_not_there_yet_is_watched_through_its_parent(tmp_path: Path) -> None:
    watcher = watch.Inotify()
    watcher.watch([str(tmp_path / "conf-cache")])
    (tmp_path / "job0001").mkdir()
    assert watcher.wait(0.2) is False, "another entry of the parent does not matter"
    (tmp_path / "conf-cache").mkdir()
    assert watcher.wait(5.0) is True
    watcher.close()


def test_the_stat_poll_notices_a_change(tmp_path: Path) -> None:
    slept: list[float] = []
    poll = watch.StatPoll(sleep=slept.append, clock=lambda: sum(slept))
    poll.watch([str(tmp_path)])
    assert poll.wait(12.0) is False and slept == [5.0, 5.0, 2.0]
    (tmp_path / "topology.conf").write_text("x")
    assert poll.wait(60.0) is True


class OneChange:
    """A watch that sees one change, then nothing: each wait takes its whole timeout on a fake clock."""

    kind = "test"

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.now = 0.0

    def watch(self, directories: list[str]) -> None:
        self.directories = directories

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        if len(self.waits) == 1:
            return True
        self.now += timeout
        return False

    def close(self) -> None:
        pass


def test_the_loop_checks_at_start_after_a_settled_change_and_on_its_period(tmp_path: Path) -> None:
    made, _ = guard(tmp_path)
    checked: list[float] = []
    watcher = OneChange()
    made.check = lambda: checked.append(watcher.now) or []  # type: ignore[method-assign]
    serve(made, watcher, settle_s=3.0, recheck_s=60.0, clock=lambda: watcher.now, stop=lambda: len(checked) >= 3)
    assert checked == [0.0, 3.0, 60.0], "at start, once the change settled, a minute after the start"


def test_an_event_that_does_not_matter_wakes_the_loop_but_checks_nothing(tmp_path: Path) -> None:
    made, _ = guard(tmp_path)
    checked: list[float] = []
    made.check = lambda: checked.append(1) or []  # type: ignore[method-assign]
    woken: list[float] = []

    class Irrelevant(OneChange):
        def wait(self, timeout: float) -> bool:
            woken.append(timeout)
            self.now += 1.0  # woken early, by an entry the watch filters out
            return False

    watcher = Irrelevant()
    serve(made, watcher, recheck_s=60.0, clock=lambda: watcher.now, stop=lambda: len(woken) >= 30)
    assert checked == [1], "only the start's check: thirty wake-ups in thirty seconds, none due"


def test_the_command_line_dry_run_reports_and_changes_nothing(tmp_path: Path) -> None:
    touch(tmp_path, f"{ETC}/slurm.conf", BROKEN_TREE)
    argv = [sys.executable, "-m", "training_runtime.guard", "--role", "controller", "--once", "--dry-run"]
    argv += ["--root", str(tmp_path), "--scontrol", "/nonexistent/scontrol"]
    env = {**os.environ, "PYTHONPATH": str(Path(service.__file__).resolve().parents[2])}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=True).stdout
    findings = [json.loads(line) for line in out.splitlines() if '"guard_finding"' in line]
    assert [(f["check"], f["guard"]) for f in findings] == [(table.TOPOLOGY_TREE, "repairs")]
    assert not (tmp_path / "opt/slurm/etc/topology.conf").exists()


def test_the_daemon_repairs_within_seconds_of_a_rewrite(tmp_path: Path) -> None:
    touch(tmp_path, f"{ETC}/slurm.conf", "ClusterName=c\n")
    made, said = guard(tmp_path)
    done = threading.Event()
    kwargs = {"settle_s": 0.2, "recheck_s": 60.0, "stop": done.is_set}  # a repair within 10 s is the watch's
    thread = threading.Thread(target=serve, args=(made, watch.Inotify()), kwargs=kwargs)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "prom" / GUARD_TEXTFILE).exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the first check is done: what follows is the watch's, not the start's
        time.sleep(0.2)
        touch(tmp_path, f"{ETC}/slurm.conf", BROKEN_TREE)  # the agent turns topology on without a tree
        deadline = time.monotonic() + 10
        while not said.events("guard_repair") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert said.events("guard_repair"), "no repair within 10 s"
    finally:
        done.set()
        touch(tmp_path, f"{ETC}/wake", "")  # end the wait
        thread.join(70)


# --- the bootstrap's side ----------------------------------------------------------------------------------------
def hyperpod_node(root: Path, **kwargs: Any):  # type: ignore[no-untyped-def]
    node = fake_node(root, **kwargs)
    touch(root, HYPERPOD_MARKER + "/.marker")
    return node


def test_every_hyperpod_node_runs_the_guard_with_its_role(tmp_path: Path) -> None:
    node = hyperpod_node(tmp_path, instance="login-1")
    steps = guard_steps(node)
    assert [type(s) for s in steps] == [GuardFiles, RunningDaemon]
    running_daemon(node, SLURM_GUARD)
    for step in steps:
        step.apply(node)
        assert not step.needed(node), step
    assert "-m training_runtime.guard --role login --conf-dir /opt/slurm/etc" in node.path(GUARD_PROGRAM).read_text()
    assert guard_steps(fake_node(tmp_path / "generic")) == [], "generic platform: the runtime writes every file"


def test_switching_the_guard_off_stops_it_and_removes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = hyperpod_node(tmp_path)
    running_daemon(node, SLURM_GUARD)
    for step in guard_steps(node):
        step.apply(node)
    off = hyperpod_node(tmp_path, options={"slurm": {"guard": False}}, runner=node.runner)  # type: ignore[arg-type]
    [removed] = guard_steps(off)
    assert isinstance(removed, GuardRemoved)
    pid_file = off.path(SLURM_GUARD.pid_file)
    monkeypatch.setattr(os, "kill", lambda pid, sig: pid_file.unlink())  # the daemon exits on SIGTERM
    removed.apply(off)
    assert not off.path(GUARD_PROGRAM).exists()
    enabled = services.enabled_daemons(read_text(off, services.ENABLED_DAEMONS))
    assert SLURM_GUARD.unit not in [d.unit for d in enabled]
    assert guard_steps(off) == [], "converged"
