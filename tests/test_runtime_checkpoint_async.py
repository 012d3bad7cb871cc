"""AsyncCheckpointer in one process: what the trainer gets back, its buffers, its policies, its failures.

Real torch, real writer processes, real files under tmp_path. The tiers and resume are in
tests/test_runtime_checkpoint_resume.py, crashes at each stage in tests/test_runtime_checkpoint_crash.py, two
ranks in tests/test_runtime_checkpoint_ranks.py.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from checkpoint_support import assert_same, blank, checkpointer, made_fixture, released, state_for, wait_for  # noqa: F401
from training_runtime import checkpoint
from training_runtime.checkpoint import AsyncCheckpointer, Breakpoints, CheckpointError, state_bytes

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


def test_the_writer_outlives_sigterm_so_the_trainer_can_flush(tmp_path: Path, made: list[AsyncCheckpointer]) -> None:
    """Slurm's SIGTERM reaches every process of the job: the writer must finish the save the trainer flushes."""
    ckpt = checkpointer(made, tmp_path / "shared", breakpoints=Breakpoints(str(tmp_path), ("writing",)))
    ckpt.save(1, state_for(1))
    wait_for(tmp_path / "writing.reached")
    assert ckpt.writer_pid is not None
    os.kill(ckpt.writer_pid, signal.SIGTERM)
    os.kill(ckpt.writer_pid, signal.SIGINT)
    released(tmp_path, "writing")
    ckpt.flush(timeout=30)
    target = blank()
    assert checkpointer(made, tmp_path / "shared").resume(target) == 1
    assert_same(target, 1)


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


# --- pinning ---------------------------------------------------------------------------------------------------------


class FakeCudart:
    def __init__(self, result: int = 0) -> None:
        self.result = result
        self.calls: list[tuple[Any, ...]] = []

    def cudaHostRegister(self, pointer: int, size: int, flags: int) -> int:
        self.calls.append(("register", pointer, size, flags))
        return self.result

    def cudaHostUnregister(self, pointer: int) -> int:
        self.calls.append(("unregister", pointer))
        return 0


def test_where_cuda_is_available_the_whole_shared_mapping_is_pinned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from training_runtime.checkpoint.shards import flatten
    from training_runtime.checkpoint.staging import StagingBuffers

    cudart = FakeCudart()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "cudart", lambda: cudart)
    buffers = StagingBuffers()
    flat = flatten(state_for(1))
    buffers.prepare(flat)
    buffers.stage(flat)
    assert buffers.pinned
    pointer = buffers._base.data_ptr()
    assert cudart.calls == [("register", pointer, flat.size, 1)]  # cudaHostRegisterPortable, the whole mapping
    assert buffers.prepare(flatten(state_for(2))) is False  # same layout: no second registration
    buffers.release()
    assert cudart.calls[1:] == [("unregister", pointer)]


def test_a_refused_pin_falls_back_to_plain_shared_memory(capsys: pytest.CaptureFixture[str]) -> None:
    from training_runtime.checkpoint.shards import flatten
    from training_runtime.checkpoint.staging import StagingBuffers

    buffers = StagingBuffers(pin=True)  # this torch has no CUDA: cudaHostRegister cannot work
    flat = flatten(state_for(1))
    buffers.prepare(flat)
    buffers.stage(flat)
    assert not buffers.pinned
    assert "staging unpinned" in capsys.readouterr().out
    buffers.release()
    assert not StagingBuffers().pinned and not torch.cuda.is_available()
