"""AsyncCheckpointer in one process: what the trainer gets back, what lands on each tier, what a resume loads.

Real torch, real writer processes, real files under tmp_path. Crashes at each stage of a save are in
tests/test_runtime_checkpoint_crash.py; two ranks in tests/test_runtime_checkpoint_ranks.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from training_runtime import checkpoint
from training_runtime.checkpoint import AsyncCheckpointer, Breakpoints, CheckpointError, state_bytes


def state_for(step: int) -> dict[str, Any]:
    """Every dtype and shape that needs care: bf16, bool, int, 0-dim, empty, non-contiguous, nested containers."""
    generator = torch.Generator().manual_seed(step)
    wide = torch.randn(8, 6, generator=generator)
    return {
        "model": {
            "w": torch.randn(64, 32, generator=generator),
            "half": torch.randn(7, generator=generator).to(torch.bfloat16),
            "mask": torch.rand(5, generator=generator) > 0.5,
            "count": torch.tensor(step, dtype=torch.int64),
            "empty": torch.zeros(0, 3),
            "strided": wide.t(),
        },
        "optim": {"state": {0: {"exp_avg": torch.randn(3, generator=generator)}}, "param_groups": [{"lr": 0.1 * step}]},
        "trainer": {"step": step, "names": ("a", "b")},
    }


def blank() -> dict[str, Any]:
    return {
        "model": {
            "w": torch.zeros(64, 32),
            "half": torch.zeros(7, dtype=torch.bfloat16),
            "mask": torch.zeros(5, dtype=torch.bool),
            "count": torch.tensor(0, dtype=torch.int64),
            "empty": torch.zeros(0, 3),
            "strided": torch.zeros(6, 8).t().t(),
        },
        "optim": {"state": {}, "param_groups": [{"lr": 0.0}]},
        "trainer": {"step": 0, "names": ()},
    }


def assert_same(loaded: dict[str, Any], step: int) -> None:
    """Bit-identical: torch.equal on every tensor (and the same dtype), equal plain values."""
    expected = state_for(step)
    for name, tensor in expected["model"].items():
        assert loaded["model"][name].dtype == tensor.dtype, name
        assert torch.equal(loaded["model"][name], tensor), name
    assert torch.equal(loaded["optim"]["state"][0]["exp_avg"], expected["optim"]["state"][0]["exp_avg"])
    assert loaded["optim"]["param_groups"] == expected["optim"]["param_groups"]
    assert loaded["trainer"] == expected["trainer"]


@pytest.fixture
def made(tmp_path: Path) -> Iterator[list[AsyncCheckpointer]]:
    """Checkpointers a test makes; closed (writers stopped) at the end whatever happened."""
    made: list[AsyncCheckpointer] = []
    yield made
    for ckpt in made:
        with contextlib.suppress(CheckpointError):
            ckpt.close(timeout=30)


def checkpointer(made: list[AsyncCheckpointer], root: Path, **kwargs: Any) -> AsyncCheckpointer:
    ckpt = AsyncCheckpointer(root, **kwargs)
    made.append(ckpt)
    return ckpt


def released(directory: Path, stage: str) -> None:
    (directory / (stage + ".go")).touch()


def wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)


# --- round trip --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [True, False], ids=["async", "sync"])
def test_save_then_resume_is_bit_identical(tmp_path: Path, made: list[AsyncCheckpointer], asynchronous: bool) -> None:
    ckpt = checkpointer(made, tmp_path / "shared", asynchronous=asynchronous)
    assert ckpt.save(5, state_for(5), extra={"data_position": 40}) is True
    ckpt.flush()
    found = checkpoint.latest(tmp_path / "shared")
    assert found is not None and found.step == 5
    manifest = found.manifest
    assert (manifest["kind"], manifest["tier"], manifest["ranks"], manifest["world_size"]) == (
        "shards",
        "shared",
        [0],
        1,
    )
    assert manifest["local_copies"] == {"0": None}
    assert manifest["extra"] == {"data_position": 40}
    assert set(manifest["files"]) == {"shard_00000.bin", "shard_00000.idx", "shard_00000.done"}

    fresh = checkpointer(made, tmp_path / "shared")
    target = blank()
    assert fresh.resume(target) == 5
    assert_same(target, 5)
    assert fresh.resumed is not None and fresh.resumed.tier == "shared" and fresh.resumed.extra == {"data_position": 40}


def test_nothing_to_resume_from(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    ckpt = checkpointer(made, tmp_path / "absent", local_root=tmp_path / "local")
    target = blank()
    assert ckpt.resume(target) is None
    assert ckpt.resumed is None and torch.equal(target["model"]["w"], torch.zeros(64, 32))


def test_the_trainer_may_change_its_state_once_save_returns(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    points = Breakpoints(str(tmp_path), ("writing",))
    ckpt = checkpointer(made, tmp_path / "shared", breakpoints=points)
    state = state_for(3)
    assert ckpt.save(3, state)
    wait_for(tmp_path / "writing.reached")  # the writer holds the save, the trainer goes on
    for tensor in state["model"].values():
        tensor.zero_() if tensor.dtype != torch.bool else tensor.fill_(True)
    state["trainer"]["step"] = 99
    released(tmp_path, "writing")
    ckpt.flush()
    target = blank()
    assert checkpointer(made, tmp_path / "shared").resume(target) == 3
    assert_same(target, 3)


# --- buffers -----------------------------------------------------------------------------------------------------


def test_staging_buffers_are_allocated_once_and_reallocated_when_the_shapes_change(
    tmp_path: Path, made: list[AsyncCheckpointer]
) -> None:
    ckpt = checkpointer(made, tmp_path / "shared", keep=1)
    assert ckpt.staging_bytes == 0
    for step in (1, 2, 3):
        ckpt.save(step, state_for(step))
    assert ckpt.staging_allocations == 1
    assert ckpt.staging_bytes == state_bytes(state_for(1))
    assert state_bytes(state_for(1)) >= sum(t.numel() * t.element_size() for t in state_for(1)["model"].values())
    grown = state_for(4)
    grown["model"]["extra"] = torch.ones(1000)
    ckpt.save(4, grown)
    assert ckpt.staging_allocations == 2
    assert ckpt.staging_bytes == state_bytes(grown) > state_bytes(state_for(4))
    ckpt.flush()
    target = blank()
    target["model"]["extra"] = torch.zeros(1000)
    assert checkpointer(made, tmp_path / "shared").resume(target) == 4
    assert torch.equal(target["model"]["extra"], torch.ones(1000))
    ckpt.close()
    assert ckpt.staging_bytes == 0


# --- policies and failures ---------------------------------------------------------------------------------------


def test_policy_skip_skips_while_a_save_is_in_flight_and_wait_waits(
    tmp_path: Path, made: list[AsyncCheckpointer]
) -> None:
    points = Breakpoints(str(tmp_path), ("writing",))
    skipping = checkpointer(made, tmp_path / "skip", policy="skip", breakpoints=points)
    assert skipping.save(1, state_for(1)) is True
    wait_for(tmp_path / "writing.reached")
    assert skipping.in_flight == 1
    assert skipping.save(2, state_for(2)) is False  # in flight: skipped
    released(tmp_path, "writing")
    skipping.flush()
    assert skipping.in_flight is None
    assert [c.step for c in checkpoint.complete_checkpoints(tmp_path / "skip")] == [1]

    waiting = checkpointer(made, tmp_path / "wait", policy="wait", keep=5)
    for step in (1, 2, 3):
        assert waiting.save(step, state_for(step)) is True
    waiting.flush()
    assert [c.step for c in checkpoint.complete_checkpoints(tmp_path / "wait")] == [1, 2, 3]


def test_a_failed_background_save_is_raised_at_the_next_poll_once(
    tmp_path: Path, made: list[AsyncCheckpointer]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    ckpt = checkpointer(made, blocker / "shared")
    assert ckpt.save(1, state_for(1)) is True  # staged: the failure comes later, from the writer
    deadline = time.monotonic() + 30
    with pytest.raises(CheckpointError, match=r"background save of checkpoint step 1 failed: .*Error"):
        while time.monotonic() < deadline:
            ckpt.poll()
            time.sleep(0.01)
    ckpt.poll()  # reported once


def test_a_failed_background_save_is_raised_by_the_next_save(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    ckpt = checkpointer(made, blocker / "shared")
    ckpt.save(1, state_for(1))
    with pytest.raises(CheckpointError, match="background save of checkpoint step 1 failed"):
        ckpt.save(2, state_for(2))  # policy wait: it waits for step 1's answer, and reports it


def test_a_killed_writer_is_reported_and_the_next_save_starts_a_new_one(
    tmp_path: Path, made: list[AsyncCheckpointer]
) -> None:
    points = Breakpoints(str(tmp_path), ("writing",))
    ckpt = checkpointer(made, tmp_path / "shared", keep=5)
    ckpt.save(1, state_for(1))
    ckpt.flush()
    ckpt.breakpoints = points
    ckpt.save(2, state_for(2))
    wait_for(tmp_path / "writing.reached")
    first = ckpt.writer_pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    with pytest.raises(CheckpointError, match=r"step 2 lost: the checkpoint writer \(pid \d+\) was killed by signal 9"):
        ckpt.flush(timeout=30)
    assert [c.step for c in checkpoint.complete_checkpoints(tmp_path / "shared")] == [1]
    ckpt.breakpoints = None
    assert ckpt.save(3, state_for(3))
    ckpt.flush()
    assert ckpt.writer_pid not in (None, first)
    target = blank()
    assert checkpointer(made, tmp_path / "shared").resume(target) == 3
    assert_same(target, 3)


def test_flush_with_a_timeout_says_the_save_is_still_in_flight(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    ckpt = checkpointer(made, tmp_path / "shared", breakpoints=Breakpoints(str(tmp_path), ("publishing",)))
    ckpt.save(1, state_for(1))
    with pytest.raises(CheckpointError, match=r"step 1 is still being written after 0\.2 s"):
        ckpt.flush(timeout=0.2)
    released(tmp_path, "publishing")
    ckpt.flush()
    assert checkpoint.latest(tmp_path / "shared") is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keep": 0}, "keep must be an integer >= 1"),
        ({"keep_local": True}, "keep_local must be an integer >= 1"),
        ({"policy": "later"}, "policy must be one of wait, skip, got 'later'"),
        ({"shard_timeout": 0}, "shard_timeout must be a number of seconds > 0"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AsyncCheckpointer(tmp_path, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_a_tensor_subclass_it_cannot_stage_is_refused_with_its_name(
    tmp_path: Path, made: list[AsyncCheckpointer]
) -> None:
    class Odd(torch.Tensor):
        pass

    ckpt = checkpointer(made, tmp_path / "shared")
    with pytest.raises(CheckpointError, match=r"state\['model'\]\['w'\] is a Odd"):
        ckpt.save(1, {"model": {"w": torch.zeros(2).as_subclass(Odd)}})


def test_closed_checkpointer_refuses_work(tmp_path: Path) -> None:
    ckpt = AsyncCheckpointer(tmp_path / "shared")
    ckpt.save(1, state_for(1))
    ckpt.close()
    assert checkpoint.latest(tmp_path / "shared") is not None  # close flushed
    with pytest.raises(CheckpointError, match="closed"):
        ckpt.save(2, state_for(2))


# --- the local tier ------------------------------------------------------------------------------------------------


def test_the_local_tier_is_published_then_copied_and_each_keeps_its_own_count(
    tmp_path: Path, made: list[AsyncCheckpointer]
) -> None:
    ckpt = checkpointer(made, tmp_path / "shared", local_root=tmp_path / "nvme", keep=3, keep_local=1)
    for step in (1, 2, 3, 4):
        ckpt.save(step, state_for(step))
    ckpt.flush()
    local = tmp_path / "nvme" / "rank_00000"
    assert [c.step for c in checkpoint.complete_checkpoints(local)] == [4]
    assert [c.step for c in checkpoint.complete_checkpoints(tmp_path / "shared")] == [2, 3, 4]
    local_manifest = checkpoint.latest(local).manifest  # type: ignore[union-attr]
    shared_manifest = checkpoint.latest(tmp_path / "shared").manifest  # type: ignore[union-attr]
    assert (local_manifest["tier"], local_manifest["ranks"]) == ("local", [0])
    assert local_manifest["save_id"] == shared_manifest["save_id"]
    assert shared_manifest["local_copies"] == {"0": local_manifest["host"]}
    assert (local / "latest").read_text() == "step_000000004\n"


def test_resume_prefers_the_local_copy_and_falls_back_to_the_shared_one_after_a_replacement(
    tmp_path: Path, made: list[AsyncCheckpointer]
) -> None:
    ckpt = checkpointer(made, tmp_path / "shared", local_root=tmp_path / "nvme")
    ckpt.save(1, state_for(1))
    ckpt.flush()
    target = blank()
    again = checkpointer(made, tmp_path / "shared", local_root=tmp_path / "nvme")
    assert again.resume(target) == 1 and again.resumed is not None and again.resumed.tier == "local"
    assert_same(target, 1)

    # the node is replaced: its instance store is a new, empty disk
    import shutil

    shutil.rmtree(tmp_path / "nvme")
    target = blank()
    replaced = checkpointer(made, tmp_path / "shared", local_root=tmp_path / "nvme")
    assert replaced.resume(target) == 1 and replaced.resumed is not None and replaced.resumed.tier == "shared"
    assert_same(target, 1)


def test_a_local_copy_newer_than_the_shared_tier_is_resumed(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    points = Breakpoints(str(tmp_path), ("copying",))
    ckpt = checkpointer(made, tmp_path / "shared", local_root=tmp_path / "nvme")
    ckpt.save(1, state_for(1))
    ckpt.flush()
    ckpt.breakpoints = points
    ckpt.save(2, state_for(2))
    wait_for(tmp_path / "copying.reached")  # step 2 is complete locally, half copied to the shared tier
    target = blank()
    assert checkpointer(made, tmp_path / "shared", local_root=tmp_path / "nvme").resume(target) == 2
    assert_same(target, 2)
    target = blank()
    assert checkpointer(made, tmp_path / "shared").resume(target) == 1  # without the local tier: the shared one
    assert_same(target, 1)
    released(tmp_path, "copying")
    ckpt.flush()
    assert checkpoint.latest(tmp_path / "shared").step == 2  # type: ignore[union-attr]


def test_resume_refuses_a_newer_checkpoint_it_cannot_read_rather_than_skip_it(
    tmp_path: Path, made: list[AsyncCheckpointer]
) -> None:
    ckpt = checkpointer(made, tmp_path / "shared")
    ckpt.save(1, state_for(1))
    ckpt.flush()
    checkpoint.save(tmp_path / "shared", 2, state_for(2))  # torch.save flavour: not resumable in place
    with pytest.raises(CheckpointError, match=r"newest complete checkpoint .* \(step 2, kind torch.save, 1 rank"):
        checkpointer(made, tmp_path / "shared").resume(blank())


def test_resume_reads_a_save_distributed_checkpoint(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    checkpoint.save_distributed(tmp_path / "shared", 7, {"model": {"w": torch.arange(4.0)}})
    target = {"model": {"w": torch.zeros(4)}}
    assert checkpointer(made, tmp_path / "shared").resume(target) == 7
    assert torch.equal(target["model"]["w"], torch.arange(4.0))


def test_a_shape_mismatch_on_resume_names_the_tensor(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    ckpt = checkpointer(made, tmp_path / "shared")
    ckpt.save(1, state_for(1))
    ckpt.flush()
    target = blank()
    target["model"]["w"] = torch.zeros(32, 64)
    with pytest.raises(CheckpointError, match=r"state\['model'\]\['w'\] holds float32 \[64, 32\] here"):
        checkpointer(made, tmp_path / "shared").resume(target)


def test_the_manifest_lists_every_file_with_its_size(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    ckpt = checkpointer(made, tmp_path / "shared", local_root=tmp_path / "nvme")
    ckpt.save(1, state_for(1))
    ckpt.flush()
    for root in (tmp_path / "shared", tmp_path / "nvme" / "rank_00000"):
        found = checkpoint.latest(root)
        assert found is not None
        on_disk = {p.name: p.stat().st_size for p in found.path.iterdir() if p.name != "manifest.json"}
        assert found.manifest["files"] == on_disk
        assert json.loads((found.path / "manifest.json").read_text()) == found.manifest
