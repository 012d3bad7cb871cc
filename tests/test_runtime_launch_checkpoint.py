"""The launcher's checkpoint settings (training_runtime.launch_checkpoint): asynchronous and tiered by default, the
flag that turns it off, the node-local tier from the instance facts, the staging budget at the job's start, and the
end of a step that flushes the save in flight on the Spot watcher's signal and on SIGTERM."""

from __future__ import annotations

import argparse
import io
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from training_runtime import launch_checkpoint as lc
from training_runtime.checkpoint.budget import GIB, StagingBudgetError
from training_runtime.facts import NodeFacts

MEMINFO_16_GIB = "MemTotal:       16777216 kB\nMemFree:         1000 kB\n"
"""A node whose staging budget is 7.5 GiB (half of 16 GiB less the 1 GiB OS reserve)."""


def facts(instance_type: str) -> NodeFacts:
    return NodeFacts(
        cluster="c",
        instance_name="n",
        instance_type=instance_type,
        group="workers",
        role="compute",
        platform="hyperpod",
        gpus=0,
        neuron_cores=0,
        efa_interfaces=0,
        cpus=4,
        emulated_hardware=False,
        shared_mount="/fsx",
    )


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    lc.add_arguments(parser)
    return parser.parse_args(list(argv))


NVME = ["/", "/opt/dlami/nvme", "/fsx"]


def test_the_launcher_leaves_asynchronous_checkpoints_on_by_default() -> None:
    assert lc.environment(args(), {}, facts("ml.c5.xlarge"), container=False, mounts=NVME) == {}  # c5: no store
    assert lc.mode_of({}) == lc.mode_of({lc.MODE_VARIABLE: ""}) == lc.ASYNC


def test_the_flag_or_the_jobs_own_setting_turns_them_off() -> None:
    p5 = facts("ml.p5.48xlarge")
    assert lc.environment(args("--sync-checkpoints"), {}, p5, False, NVME) == {lc.MODE_VARIABLE: lc.SYNC}
    assert lc.environment(args(), {lc.MODE_VARIABLE: "sync"}, p5, False, NVME)[lc.MODE_VARIABLE] == lc.SYNC
    # The flag wins over the job's own value.
    assert lc.environment(args("--sync-checkpoints"), {lc.MODE_VARIABLE: "async"}, p5, False, NVME) == {
        lc.MODE_VARIABLE: lc.SYNC
    }
    with pytest.raises(lc.CheckpointSettingsError, match="HYPERPOD_CDK_CHECKPOINT='later': allowed: async, sync"):
        lc.environment(args(), {lc.MODE_VARIABLE: "later"}, p5, False, NVME)


def test_the_node_local_tier_is_the_mounted_instance_store_where_the_type_has_one() -> None:
    p5 = facts("ml.p5.48xlarge")  # EC2: 8 NVMe instance-store disks
    assert lc.environment(args(), {}, p5, False, NVME) == {lc.LOCAL_VARIABLE: "/opt/dlami/nvme/tmp"}
    assert lc.environment(args(), {}, p5, False, ["/", "/fsx"]) == {}  # not mounted
    assert lc.environment(args(), {}, p5, True, NVME) == {}  # a container does not see it
    # The job's own choice is kept (not exported again).
    assert lc.LOCAL_VARIABLE not in lc.environment(args(), {lc.LOCAL_VARIABLE: "/scratch"}, p5, False, NVME)


def test_the_local_tier_is_the_users_own_directory_per_shared_root(tmp_path: Path) -> None:
    uid = os.getuid()
    first = lc.local_root("/fsx/checkpoints/run-a", str(tmp_path), uid)
    other = lc.local_root("/fsx/other/run-a", str(tmp_path), uid)
    assert first.parent == other.parent == tmp_path / f"hyperpod-cdk-checkpoints-{uid}"
    assert first.name.startswith("run-a-") and first != other
    assert (first.parent.stat().st_mode & 0o777, first.stat().st_mode & 0o777) == (0o700, 0o700)
    assert lc.local_root("/fsx/checkpoints/run-a", str(tmp_path), uid) == first  # the same run, the same place


def test_a_link_or_another_users_directory_is_refused(tmp_path: Path) -> None:
    uid = os.getuid()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"hyperpod-cdk-checkpoints-{uid}").symlink_to(elsewhere)
    with pytest.raises(OSError, match="a link, or another user's"):
        lc.local_root("/fsx/run", str(tmp_path), uid)
    assert not any(elsewhere.iterdir())
    other = tmp_path / "other"
    (other / f"hyperpod-cdk-checkpoints-{uid + 1}").mkdir(parents=True)  # there already, not owned by uid + 1
    with pytest.raises(OSError, match="a link, or another user's"):
        lc.local_root("/fsx/run", str(other), uid + 1)


class FakeCheckpointer:
    made: list[dict[str, Any]] = []

    def __init__(self, root: Any, **settings: Any) -> None:
        FakeCheckpointer.made.append({"root": root, **settings})


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[dict[str, Any]]]:
    FakeCheckpointer.made = []
    monkeypatch.setattr(lc, "AsyncCheckpointer", FakeCheckpointer)
    monkeypatch.setattr(lc, "state_bytes", lambda state: state["bytes"])
    (tmp_path / "meminfo").write_text(MEMINFO_16_GIB)
    yield FakeCheckpointer.made


def test_the_ranks_get_asynchronous_tiered_checkpoints_by_default(made: list[dict[str, Any]], tmp_path: Path) -> None:
    store = tmp_path / "nvme"
    store.mkdir()
    env = {lc.LOCAL_VARIABLE: str(store), "LOCAL_WORLD_SIZE": "2"}
    lc.checkpointer("/fsx/run", {"bytes": GIB}, env=env, meminfo=str(tmp_path / "meminfo"))
    assert made[-1]["asynchronous"] is True
    assert made[-1]["local_root"] == lc.local_root("/fsx/run", str(store), os.getuid())
    lc.checkpointer("/fsx/run", {"bytes": 100 * GIB}, env={lc.MODE_VARIABLE: "sync"}, meminfo="/nonexistent")
    assert made[-1] == {"root": "/fsx/run", "keep": 3, "asynchronous": False}  # no staging, no budget, no tier


def test_the_job_refuses_to_start_over_the_staging_budget(made: list[dict[str, Any]], tmp_path: Path) -> None:
    meminfo = str(tmp_path / "meminfo")
    lc.checkpointer("/fsx/run", {"bytes": 2 * GIB}, env={"LOCAL_WORLD_SIZE": "3"}, meminfo=meminfo)  # 6 of 7.5 GiB
    with pytest.raises(StagingBudgetError, match=r"stage 8\.0 GiB per node \(2\.0 GiB of state per rank x 4 ranks\)"):
        lc.checkpointer("/fsx/run", {"bytes": 2 * GIB}, env={"LOCAL_WORLD_SIZE": "4"}, meminfo=meminfo)
    with pytest.raises(StagingBudgetError, match=r"over the staging budget of 7\.5 GiB"):
        lc.checkpointer("/fsx/run", {"bytes": 4 * GIB}, env={}, staging_ranks=2, meminfo=meminfo)
    assert len(made) == 1


def test_an_unusable_local_tier_is_said_and_skipped(made: list[dict[str, Any]], tmp_path: Path) -> None:
    out = io.StringIO()
    env = {lc.LOCAL_VARIABLE: str(tmp_path / "not-mounted")}
    lc.checkpointer("/fsx/run", {"bytes": 1}, env=env, meminfo=str(tmp_path / "meminfo"), out=out)
    assert made[-1]["local_root"] is None and made[-1]["asynchronous"] is True
    said = out.getvalue()
    assert said.startswith("checkpoints: no node-local tier (") and "saving to /fsx/run only" in said


class FakeSaves:
    def __init__(self, in_flight: int | None = None) -> None:
        self.calls: list[str] = []
        self.in_flight = in_flight

    def flush(self) -> None:
        self.calls.append("flush")

    def save(self) -> None:
        self.calls.append("save")


@pytest.fixture
def stopping() -> Iterator[lc.Stopping]:
    kept = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM)}
    try:
        yield lc.Stopping(reduce=None)
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)


def test_a_step_without_a_signal_goes_on(stopping: lc.Stopping) -> None:
    saves = FakeSaves()
    assert stopping.check(saves, saves.save, saved=False) is None
    assert saves.calls == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # nothing in flight: SIGTERM kills at once


def test_the_spot_signal_saves_the_step_and_flushes_it_before_the_requeue(stopping: lc.Stopping) -> None:
    saves = FakeSaves()
    os.kill(os.getpid(), signal.SIGUSR1)
    assert stopping.check(saves, saves.save, saved=False) == lc.SPOT
    assert saves.calls == ["save", "flush"]
    again = FakeSaves()
    assert stopping.check(again, again.save, saved=True) == lc.SPOT  # this step was saved already: flush it
    assert again.calls == ["flush"]


def test_sigterm_flushes_the_save_in_flight_and_stops(stopping: lc.Stopping) -> None:
    saves = FakeSaves(in_flight=9)
    assert stopping.check(saves, saves.save, saved=True) is None  # step 9's save is in flight: SIGTERM is caught
    os.kill(os.getpid(), signal.SIGTERM)
    assert stopping.check(saves, saves.save, saved=False) == lc.ENDED
    assert saves.calls == ["flush"]


def test_sigterm_kills_at_once_again_once_the_save_is_published(stopping: lc.Stopping) -> None:
    """A rank waiting in a collective for a peer on a dead node runs no Python handler: with nothing to flush,
    SIGTERM must kill it, not leave it to Slurm's SIGKILL after KillWait."""
    saves = FakeSaves(in_flight=9)
    stopping.check(saves, saves.save, saved=True)
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    saves.in_flight = None
    assert stopping.check(saves, saves.save, saved=False) is None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and saves.calls == []
