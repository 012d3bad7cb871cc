"""AsyncCheckpointer's tiers and resume in one process: what each tier holds, which one a resume reads, what
it refuses. Real torch, real writer processes, real files under tmp_path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from checkpoint_support import assert_same, blank, checkpointer, made_fixture, released, state_for, wait_for  # noqa: F401
from training_runtime import checkpoint
from training_runtime.checkpoint import AsyncCheckpointer, Breakpoints, CheckpointError

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
