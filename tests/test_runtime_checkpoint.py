"""Checkpoints on shared storage: complete or invisible, whatever moment a save is killed at.

Real torch, real files under tmp_path. A kill is simulated two ways: SIGKILL of a subprocess in the middle of a
large save, and an exception that no handler catches raised at every file-system operation of a save in turn.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from training_runtime import checkpoint
from training_runtime.checkpoint import Checkpoint, CheckpointError

SRC = Path(__file__).resolve().parents[1] / "src"


class Killed(BaseException):
    """Stands in for SIGKILL: no ``except Exception`` cleanup runs."""


class Opaque:
    """A type torch.load refuses with weights_only=True."""

    def __init__(self, value: int) -> None:
        self.value = value


def state_for(step: int, size: int = 16) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(step)
    return {"model": {"w": torch.randn(size, generator=generator)}, "step": step, "lr": [0.1, 0.01]}


def assert_loads_as(found: Checkpoint | None, step: int) -> None:
    assert found is not None, "no complete checkpoint left"
    assert found.step == step
    state = checkpoint.load(found)
    assert state["step"] == step
    assert torch.equal(state["model"]["w"], state_for(step)["model"]["w"])


def names(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def copy_as(source: Checkpoint, root: Path, name: str, step: int) -> Path:
    """A copy of ``source`` under ``name`` whose manifest says ``step``."""
    target = root / name
    shutil.copytree(source.path, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["step"] = step
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


# --- round trip and layout ------------------------------------------------------------------------------------------


def test_save_latest_load_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    saved = checkpoint.save(root, 120, state_for(120), extra={"data_position": 960})
    found = checkpoint.latest(str(root))
    assert found == saved
    assert found.path == root / "step_000000120"
    manifest = found.manifest
    assert manifest["format"] == "hyperpod-cdk-checkpoint/1"
    assert (manifest["step"], manifest["kind"], manifest["world_size"]) == (120, "torch.save", 1)
    assert manifest["files"] == {"state.pt": (found.path / "state.pt").stat().st_size}
    assert manifest["extra"] == {"data_position": 960}
    assert manifest["torch"] == torch.__version__
    assert manifest["created"].endswith("Z")
    assert json.loads((found.path / "manifest.json").read_text()) == manifest
    assert (root / "latest").read_text() == "step_000000120\n"
    assert names(root) == ["latest", "step_000000120"]
    assert_loads_as(found, 120)


def test_save_logs_one_json_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = checkpoint.save(tmp_path, 3, state_for(3))
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["event"] for r in records] == ["checkpoint-saved"]
    assert records[0]["step"] == 3 and records[0]["path"] == str(saved.path)
    assert records[0]["bytes"] == (saved.path / "state.pt").stat().st_size
    assert records[0]["seconds"] >= 0


def test_no_checkpoint_in_a_missing_or_empty_root(tmp_path: Path) -> None:
    assert checkpoint.latest(tmp_path / "absent") is None
    assert checkpoint.complete_checkpoints(tmp_path) == []


def test_load_refuses_foreign_objects_unless_trusted(tmp_path: Path) -> None:
    saved = checkpoint.save(tmp_path, 1, {"obj": Opaque(7)})
    with pytest.raises(CheckpointError, match="weights_only=False"):
        checkpoint.load(saved)
    assert checkpoint.load(saved, weights_only=False)["obj"].value == 7


def test_load_of_a_damaged_checkpoint_says_what_is_wrong(tmp_path: Path) -> None:
    saved = checkpoint.save(tmp_path, 1, state_for(1))
    with (saved.path / "state.pt").open("ab") as handle:
        handle.write(b"x")
    with pytest.raises(CheckpointError, match=r"not a complete checkpoint of step 1: state.pt has \d+ bytes"):
        checkpoint.load(saved)


@pytest.mark.parametrize("keep", [0, -1, True, 1.5])
def test_keep_below_one_is_rejected_before_writing(tmp_path: Path, keep: Any) -> None:
    with pytest.raises(ValueError, match="keep must be an integer >= 1"):
        checkpoint.save(tmp_path / "ckpt", 1, state_for(1), keep=keep)
    with pytest.raises(ValueError, match="keep must be an integer >= 1"):
        checkpoint.save_distributed(tmp_path / "ckpt", 1, state_for(1), keep=keep)
    assert not (tmp_path / "ckpt").exists()


def test_bad_step_and_extra_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="step must be an integer >= 0"):
        checkpoint.save(tmp_path, -1, state_for(1))
    with pytest.raises(ValueError, match="extra must be a JSON-serialisable dict"):
        checkpoint.save(tmp_path, 1, state_for(1), extra={"t": torch.ones(1)})
    assert names(tmp_path) == []


# --- retention ------------------------------------------------------------------------------------------------------


def test_retention_keeps_the_newest_n_and_never_counts_a_partial(tmp_path: Path) -> None:
    for step in range(1, 5):
        checkpoint.save(tmp_path, step, state_for(step), keep=2)
    assert names(tmp_path) == ["latest", "step_000000003", "step_000000004"]
    partial = tmp_path / "step_000000009.tmp"
    partial.mkdir()
    (partial / "state.pt").write_bytes(b"half")
    no_manifest = tmp_path / "step_000000008"
    no_manifest.mkdir()
    checkpoint.save(tmp_path, 5, state_for(5), keep=2)
    assert [c.step for c in checkpoint.complete_checkpoints(tmp_path)] == [4, 5]
    # the stale .tmp is gone; an incomplete directory under a checkpoint name is left for a person to look at
    assert names(tmp_path) == ["latest", "step_000000004", "step_000000005", "step_000000008"]
    assert_loads_as(checkpoint.latest(tmp_path), 5)


def test_retention_keeps_the_checkpoint_it_just_saved_below_newer_ones(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, 10, state_for(10), keep=1)
    checkpoint.save(tmp_path, 4, state_for(4), keep=1)  # e.g. a rollback: the newest and the new one both stay
    assert [c.step for c in checkpoint.complete_checkpoints(tmp_path)] == [4, 10]
    assert (tmp_path / "latest").read_text() == "step_000000004\n"
    assert_loads_as(checkpoint.latest(tmp_path), 10)


# --- what latest() accepts ----------------------------------------------------------------------------------------


def _tmp_with_manifest(good: Checkpoint, root: Path) -> None:
    copy_as(good, root, "step_000000009.tmp", 9)


def _no_manifest(good: Checkpoint, root: Path) -> None:
    (copy_as(good, root, "step_000000009", 9) / "manifest.json").unlink()


def _wrong_size(good: Checkpoint, root: Path) -> None:
    path = copy_as(good, root, "step_000000009", 9)
    with (path / "state.pt").open("r+b") as handle:
        handle.truncate(100)


def _missing_file(good: Checkpoint, root: Path) -> None:
    (copy_as(good, root, "step_000000009", 9) / "state.pt").unlink()


def _step_mismatch(good: Checkpoint, root: Path) -> None:
    copy_as(good, root, "step_000000009", 8)


def _unreadable_manifest(good: Checkpoint, root: Path) -> None:
    (copy_as(good, root, "step_000000009", 9) / "manifest.json").write_text('{"format": "hyperpod-cdk-chec')


def _dcp_without_metadata(good: Checkpoint, root: Path) -> None:
    path = copy_as(good, root, "step_000000009", 9)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["kind"] = "dcp"
    (path / "manifest.json").write_text(json.dumps(manifest))


def _bad_name(good: Checkpoint, root: Path) -> None:
    copy_as(good, root, "step_9", 9)


@pytest.mark.parametrize(
    "damage",
    [
        _tmp_with_manifest,
        _no_manifest,
        _wrong_size,
        _missing_file,
        _step_mismatch,
        _unreadable_manifest,
        _dcp_without_metadata,
        _bad_name,
    ],
)
def test_latest_ignores_anything_incomplete(tmp_path: Path, damage: Callable[[Checkpoint, Path], None]) -> None:
    good = checkpoint.save(tmp_path, 1, state_for(1))
    damage(good, tmp_path)
    assert [c.step for c in checkpoint.complete_checkpoints(tmp_path)] == [1]
    assert_loads_as(checkpoint.latest(tmp_path), 1)


def test_latest_does_not_trust_a_lagging_pointer(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, 1, state_for(1))
    checkpoint.save(tmp_path, 2, state_for(2))
    (tmp_path / "latest").write_text("step_000000001\n")
    assert_loads_as(checkpoint.latest(tmp_path), 2)
    (tmp_path / "latest").unlink()
    assert_loads_as(checkpoint.latest(tmp_path), 2)


# --- re-saving a step -----------------------------------------------------------------------------------------------


def test_resaving_an_existing_step_replaces_it(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, 3, {"value": torch.tensor([1.0])})
    again = checkpoint.save(tmp_path, 3, {"value": torch.tensor([2.0])})
    assert again.path == tmp_path / "step_000000003"
    assert checkpoint.latest(tmp_path) == again
    assert checkpoint.load(again)["value"].item() == 2.0
    assert names(tmp_path) == ["latest", "step_000000003"]


def test_resave_killed_between_its_renames_keeps_the_old_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint.save(tmp_path, 3, state_for(3))
    real_rename = os.rename
    calls: list[tuple[str, str]] = []

    def rename(source: str, target: str) -> None:
        calls.append((source, target))
        if len(calls) == 2:  # the old copy is aside, the new one not yet in place
            raise Killed
        real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(Killed):
        checkpoint.save(tmp_path, 3, {"value": torch.tensor([2.0])})
    monkeypatch.undo()
    assert names(tmp_path) == ["latest", "step_000000003.old", "step_000000003.tmp"]
    found = checkpoint.latest(tmp_path)
    assert found is not None and found.path.name == "step_000000003.old"
    assert_loads_as(found, 3)
    # the next save cleans up: the old copy goes once a newer complete one exists beyond ``keep``
    checkpoint.save(tmp_path, 4, state_for(4), keep=1)
    assert names(tmp_path) == ["latest", "step_000000004"]


# --- failures and kills ---------------------------------------------------------------------------------------------


def test_failed_rename_leaves_the_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint.save(tmp_path, 1, state_for(1))
    real_rename = os.rename

    def rename_fails_once(source: str, target: str) -> None:
        monkeypatch.setattr(os, "rename", real_rename)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "rename", rename_fails_once)
    with pytest.raises(CheckpointError, match=r"could not save checkpoint step 2 .*Input/output error"):
        checkpoint.save(tmp_path, 2, state_for(2))
    assert names(tmp_path) == ["latest", "step_000000001"]
    assert_loads_as(checkpoint.latest(tmp_path), 1)
    checkpoint.save(tmp_path, 2, state_for(2))
    assert_loads_as(checkpoint.latest(tmp_path), 2)


def test_failed_pointer_move_leaves_a_complete_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint.save(tmp_path, 1, state_for(1), keep=1)
    real_replace = os.replace

    def replace_fails_once(source: str, target: str) -> None:
        monkeypatch.setattr(os, "replace", real_replace)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", replace_fails_once)
    with pytest.raises(CheckpointError, match=r"step 2 is complete at .*latest\(\) still finds"):
        checkpoint.save(tmp_path, 2, state_for(2), keep=1)
    assert (tmp_path / "latest").read_text() == "step_000000001\n"  # the pointer lags ...
    assert_loads_as(checkpoint.latest(tmp_path), 2)  # ... and latest() does not follow it
    assert [c.step for c in checkpoint.complete_checkpoints(tmp_path)] == [1, 2]  # nothing pruned
    assert not any(p.name.startswith(".latest.") for p in tmp_path.iterdir())


FS_OPERATIONS = [(os, "rename"), (os, "replace"), (os, "fsync"), (os, "unlink"), (os, "mkdir"), (shutil, "rmtree")]


@pytest.fixture
def kill_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int | None], list[str]]]:
    """``kill_at(n)``: the n-th file-system operation from now raises Killed; returns the log of operations."""
    log: list[str] = []
    target: list[int | None] = [None]

    def wrap(module: Any, name: str) -> None:
        real = getattr(module, name)

        def operation(*args: Any, **kwargs: Any) -> Any:
            if target[0] is not None:
                log.append(name)
                if len(log) == target[0]:
                    raise Killed
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, operation)

    for module, name in FS_OPERATIONS:
        wrap(module, name)

    def arm(n: int | None) -> list[str]:
        log.clear()
        target[0] = n
        return log

    yield arm
    target[0] = None


@pytest.mark.parametrize("resave", [False, True], ids=["new-step", "same-step"])
def test_a_kill_at_any_operation_of_a_save_leaves_a_complete_checkpoint(
    tmp_path: Path, kill_at: Callable[[int | None], list[str]], resave: bool
) -> None:
    def setup(root: Path) -> None:
        checkpoint.save(root, 1, state_for(1), keep=2)
        checkpoint.save(root, 2, state_for(2), keep=2)
        (root / "step_000000007.tmp").mkdir()  # a stale one from an earlier incarnation

    new_step = 2 if resave else 3
    setup(tmp_path / "count")
    operations = kill_at(10**6)
    checkpoint.save(tmp_path / "count", new_step, state_for(new_step), keep=1)
    total = len(operations)
    assert {"rename", "replace", "fsync", "rmtree"} <= set(operations)

    for n in range(1, total + 1):
        root = tmp_path / str(n)
        kill_at(None)
        setup(root)
        kill_at(n)
        with pytest.raises(Killed):
            checkpoint.save(root, new_step, state_for(new_step), keep=1)
        kill_at(None)
        found = checkpoint.latest(root)
        assert found is not None, f"killed at operation {n} ({operations[n - 1]}): nothing complete left"
        assert found.step in (2, new_step)
        assert_loads_as(found, found.step)
        checkpoint.save(root, 4, state_for(4), keep=1)
        assert names(root) == ["latest", "step_000000004"], f"leftovers after a kill at operation {n}"


def test_sigkill_in_the_middle_of_a_large_save(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    checkpoint.save(root, 100, state_for(100))
    script = (
        "import sys, torch\n"
        "from training_runtime import checkpoint\n"
        "checkpoint.save(sys.argv[1], 200, {'w': torch.ones(75_000_000)})\n"  # 300 MB
        "print('finished', flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(root)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    partial = root / "step_000000200.tmp" / "state.pt"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if partial.exists() and partial.stat().st_size > 0:
                break
            time.sleep(0.001)
        else:
            pytest.fail(f"the save never started writing: {process.communicate()[0].decode()[-2000:]}")
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    assert not (root / "step_000000200").exists(), "the save finished before the kill; the test proved nothing"
    assert process.returncode == -signal.SIGKILL
    assert (root / "step_000000200.tmp").is_dir()

    assert_loads_as(checkpoint.latest(root), 100)

    fresh = checkpoint.save(root, 201, state_for(201))
    assert checkpoint.latest(root) == fresh
    assert_loads_as(fresh, 201)
    assert names(root) == ["latest", "step_000000100", "step_000000201"]


# --- torch.distributed.checkpoint -----------------------------------------------------------------------------------


def test_save_distributed_without_a_process_group(tmp_path: Path) -> None:
    state = {"model": {"w": torch.arange(6.0)}, "trainer": {"step": 5}}
    saved = checkpoint.save_distributed(tmp_path, 5, state, extra={"preset": "tiny"})
    assert saved is not None and checkpoint.latest(tmp_path) == saved
    assert saved.manifest["kind"] == "dcp" and saved.manifest["world_size"] == 1
    assert ".metadata" in saved.manifest["files"]
    target = {"model": {"w": torch.zeros(6)}, "trainer": {"step": 0}}
    checkpoint.load_distributed(saved, target)
    assert torch.equal(target["model"]["w"], torch.arange(6.0))
    assert target["trainer"]["step"] == 5
    with pytest.raises(CheckpointError, match="read it with load_distributed"):
        checkpoint.load(saved)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def distributed_checks(rank: int, world: int, root: str) -> None:
    """The two-rank checks, in their own frame: their DTensors and mesh are gone when it returns."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    full = torch.arange(64.0).reshape(8, 8)
    state = {"w": distribute_tensor(full, mesh, [Shard(0)]), "trainer": {"step": 6}}
    if rank == 0:
        (Path(root) / "step_000000006.tmp").mkdir(parents=True)  # stale, from a killed incarnation
    dist.barrier()
    saved = checkpoint.save_distributed(root, 6, state, keep=1)
    assert saved is not None and saved.path == Path(root) / "step_000000006"
    assert saved.manifest["world_size"] == world
    assert {".metadata", "__0_0.distcp", "__1_0.distcp"} <= set(saved.manifest["files"])
    assert checkpoint.latest(root) == saved  # rank 0 published before anyone returned

    again = checkpoint.save_distributed(root, 8, {**state, "trainer": {"step": 8}}, keep=1)
    assert again is not None and again.step == 8 and not saved.path.exists()

    loaded = {"w": distribute_tensor(torch.zeros(8, 8), mesh, [Shard(0)]), "trainer": {"step": 0}}
    checkpoint.load_distributed(again, loaded)
    assert torch.equal(loaded["w"].to_local(), full[rank * 4 : rank * 4 + 4])
    assert loaded["trainer"]["step"] == 8
    if rank == 1:
        try:
            checkpoint.save(root, 9, {"w": full})
        except CheckpointError as error:
            assert "call it on rank 0 only" in str(error)
        else:
            raise AssertionError("save() on rank 1 was accepted")
    dist.barrier()


def distributed_worker(rank: int, world: int, port: int, root: str) -> None:
    """One rank of the two-process test (module level: torch.multiprocessing spawns it by name)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        distributed_checks(rank, world, root)
    finally:
        # what holds the process group (the DTensors and mesh of the checks' frame, gone now) is collected first:
        # left to interpreter shutdown, gloo's threads can abort the process after a good run (the job scripts in
        # examples/jobs do the same)
        gc.collect()
        dist.destroy_process_group()


@pytest.mark.slow  # 5 s or more: make test, not make test-fast
def test_save_distributed_and_load_distributed_on_two_ranks(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    root = tmp_path / "ckpt"
    mp.spawn(distributed_worker, args=(2, free_port(), str(root)), nprocs=2, join=True)
    found = checkpoint.latest(root)
    assert found is not None and found.step == 8
    assert names(root) == ["latest", "step_000000008"]
    # DCP reshards: one process without a process group reads what two ranks wrote
    whole = {"w": torch.zeros(8, 8), "trainer": {"step": 0}}
    checkpoint.load_distributed(found, whole)
    assert torch.equal(whole["w"], torch.arange(64.0).reshape(8, 8))
