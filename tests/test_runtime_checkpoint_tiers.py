"""The writer's side, without torch (it never imports it): how shards go through the tiers, how rank 0 publishes
only a save whose every shard is complete, and the writer process's protocol. Stdlib only: runs on Python 3.8."""

from __future__ import annotations

import json
import mmap
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from training_runtime import checkpoint
from training_runtime.checkpoint import CheckpointError, shard_files
from training_runtime.checkpoint.jobs import Breakpoints, SaveJob
from training_runtime.checkpoint.tiers import candidates, execute, marker_name, wait_for_shards, write_all
from training_runtime.checkpoint.writer_client import WriterGone, WriterProcess


def job(tmp_path: Path, step: int, rank: int = 0, world: int = 1, save_id: str = "a1", **changes: object) -> SaveJob:
    values: dict[str, object] = dict(
        step=step,
        save_id=save_id,
        rank=rank,
        world=world,
        root=str(tmp_path / "shared"),
        local_root=None,
        keep=3,
        keep_local=2,
        size=len(payload(step, rank)),
        host=f"node-{rank}",
        torch_version="test",
        shard_timeout=5.0,
    )
    values.update(changes)
    return SaveJob(**values)  # type: ignore[arg-type]


def payload(step: int, rank: int) -> bytes:
    return bytes([step % 251, rank]) * 1000


def writes(step: int, rank: int) -> Callable[[int, Callable[[], None]], None]:
    def write(fd: int, halfway: Callable[[], None]) -> None:
        write_all(fd, memoryview(payload(step, rank)), halfway)

    return write


def index(step: int, rank: int) -> bytes:
    return f"index of step {step} rank {rank}".encode()


def save(tmp_path: Path, step: int, rank: int = 0, world: int = 1, **changes: object) -> checkpoint.Checkpoint | None:
    return execute(job(tmp_path, step, rank, world, **changes), index(step, rank), writes(step, rank))


def test_a_one_rank_save_is_published_with_its_shard_and_marker(tmp_path: Path) -> None:
    saved = save(tmp_path, 4, extra={"data_position": 32})
    assert saved is not None and saved == checkpoint.latest(tmp_path / "shared")
    data, idx = shard_files(0)
    assert (saved.path / data).read_bytes() == payload(4, 0)
    assert (saved.path / idx).read_bytes() == index(4, 0)
    marker = json.loads((saved.path / marker_name(0)).read_text())
    assert (marker["save_id"], marker["rank"], marker["local"]) == ("a1", 0, False)
    assert saved.manifest["extra"] == {"data_position": 32}
    assert saved.manifest["save_id"] == "a1" and saved.manifest["tier"] == "shared"


def test_rank_0_publishes_only_once_every_rank_s_shard_is_complete(tmp_path: Path) -> None:
    save(tmp_path, 1, world=2, rank=1)
    save(tmp_path, 1, world=2, rank=0)
    before = checkpoint.latest(tmp_path / "shared")
    assert before is not None and before.manifest["ranks"] == [0, 1]

    # step 2: rank 1 never finishes; rank 0 gives up after the timeout and publishes nothing
    with pytest.raises(CheckpointError, match=r"step 2: rank\(s\) \[1\] did not finish their shards"):
        save(tmp_path, 2, world=2, rank=0, shard_timeout=0.3)
    assert checkpoint.latest(tmp_path / "shared") == before
    assert (tmp_path / "shared" / "step_000000002.tmp").is_dir()


def test_a_rank_whose_writer_failed_says_so_and_rank_0_stops_waiting_for_it(tmp_path: Path) -> None:
    def broken(fd: int, halfway: Callable[[], None]) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        execute(job(tmp_path, 1, world=2, rank=1), index(1, 1), broken)
    with pytest.raises(CheckpointError, match=r"rank 1 on node-1 could not save its shard \(OSError: .*No space left"):
        save(tmp_path, 1, world=2, rank=0, shard_timeout=30)  # only the failure marker names the error
    assert checkpoint.latest(tmp_path / "shared") is None

    # the next save of the same step (another id) ignores that failure marker
    save(tmp_path, 1, world=2, rank=1, save_id="a2")
    saved = save(tmp_path, 1, world=2, rank=0, save_id="a2")
    assert saved is not None and not any(p.name.endswith(".failed") for p in saved.path.iterdir())


def test_a_marker_of_another_save_does_not_count_and_its_files_are_not_published(tmp_path: Path) -> None:
    # a killed earlier attempt at step 3 left rank 1's shard and marker (save id "old") and a rank 2 shard
    save(tmp_path, 3, world=2, rank=1, save_id="old")
    save(tmp_path, 3, world=3, rank=2, save_id="old")
    with pytest.raises(CheckpointError, match=r"rank\(s\) \[1\]"):
        save(tmp_path, 3, world=2, rank=0, save_id="new", shard_timeout=0.3)
    save(tmp_path, 3, world=2, rank=1, save_id="new")
    saved = save(tmp_path, 3, world=2, rank=0, save_id="new")
    assert saved is not None
    names = sorted(p.name for p in saved.path.iterdir())
    expected = sorted(["manifest.json", marker_name(0), marker_name(1), *shard_files(0), *shard_files(1)])
    assert names == expected  # rank 2's leftovers are gone, not published
    assert sorted(saved.manifest["files"]) == sorted(n for n in expected if n != "manifest.json")


def test_the_wait_polls_with_a_growing_interval_until_the_timeout(tmp_path: Path) -> None:
    pauses: list[float] = []
    directory = tmp_path / "step_000000001.tmp"
    directory.mkdir()

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        time.sleep(seconds)

    with pytest.raises(CheckpointError):
        wait_for_shards(directory, job(tmp_path, 1, world=2, shard_timeout=0.05), sleep=sleep)
    assert pauses[0] == 0.01 and pauses == sorted(pauses) and len(set(pauses)) > 1


def test_publishing_spares_the_tmp_of_a_newer_step_other_ranks_are_filling(tmp_path: Path) -> None:
    save(tmp_path, 1, world=2, rank=1)
    save(tmp_path, 2, world=2, rank=1)  # rank 1 is ahead: its step 2 shard waits for rank 0
    save(tmp_path, 1, world=2, rank=0)  # rank 0 publishes step 1: step 2's tmp must survive it
    assert (tmp_path / "shared" / "step_000000002.tmp" / marker_name(1)).exists()
    saved = save(tmp_path, 2, world=2, rank=0)
    assert saved is not None and saved.step == 2


def test_stale_tmp_of_older_steps_are_removed_by_the_next_publish(tmp_path: Path) -> None:
    (tmp_path / "shared" / "step_000000001.tmp").mkdir(parents=True)
    save(tmp_path, 2)
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["latest", "step_000000002"]


def test_the_local_tier_is_one_checkpoint_per_rank_then_copied(tmp_path: Path) -> None:
    local = tmp_path / "nvme"
    save(tmp_path, 1, world=2, rank=1, local_root=str(local))
    saved = save(tmp_path, 1, world=2, rank=0, local_root=str(local))
    assert saved is not None
    for rank in (0, 1):
        mine = checkpoint.latest(local / f"rank_{rank:05d}")
        assert mine is not None
        assert mine.manifest["ranks"] == [rank] and mine.manifest["tier"] == "local"
        assert mine.manifest["host"] == f"node-{rank}"
        assert (mine.path / shard_files(rank)[0]).read_bytes() == payload(1, rank)
        assert (saved.path / shard_files(rank)[0]).read_bytes() == payload(1, rank)
    assert saved.manifest["local_copies"] == {"0": "node-0", "1": "node-1"}
    found = candidates(tmp_path / "shared", local, 1, 2)
    assert found == {(1, "a1"): ("local", local / "rank_00001" / "step_000000001")}
    assert candidates(tmp_path / "shared", None, 1, 2) == {(1, "a1"): ("shared", saved.path)}
    assert candidates(tmp_path / "shared", None, 1, 3) == {}  # another world size


def test_write_all_writes_everything_and_stops_halfway(tmp_path: Path) -> None:
    points = tmp_path / "points"
    points.mkdir()
    seen = []
    target = tmp_path / "out"
    fd = os.open(str(target), os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, memoryview(b"x" * 1001), lambda: seen.append(target.stat().st_size))
    finally:
        os.close(fd)
    assert seen == [500] and target.read_bytes() == b"x" * 1001
    with pytest.raises(ValueError, match="unknown breakpoint stage"):
        Breakpoints(str(points), ("nowhere",))


# --- the writer process -----------------------------------------------------------------------------------------


def shared_buffer(data: bytes) -> int:
    fd = os.memfd_create("test-staging", os.MFD_CLOEXEC)
    os.ftruncate(fd, len(data))
    with mmap.mmap(fd, len(data)) as mapping:
        mapping[:] = data
    return fd


def test_the_writer_process_writes_what_the_buffer_holds_and_answers(tmp_path: Path) -> None:
    writer = WriterProcess()
    try:
        fd = shared_buffer(payload(5, 0))
        writer.attach(fd, len(payload(5, 0)), generation=1)
        os.close(fd)  # the writer has its own reference now
        writer.submit(job(tmp_path, 5), index(5, 0))
        answer = writer.answer(timeout=30)
        assert answer == {"event": "done", "step": 5, "save_id": "a1", "payload": 0, "fd": False}
        found = checkpoint.latest(tmp_path / "shared")
        assert found is not None and (found.path / shard_files(0)[0]).read_bytes() == payload(5, 0)

        writer.submit(job(tmp_path, 6, root=str(tmp_path / "shared" / "latest" / "x")), index(6, 0))
        answer = writer.answer(timeout=30)
        assert answer is not None and answer["event"] == "failed" and "NotADirectoryError" in answer["error"]
        assert writer.answer(timeout=0.05) is None  # nothing else to say
    finally:
        writer.stop()
    assert writer.process.returncode == 0
    with pytest.raises(WriterGone, match=r"the checkpoint writer \(pid \d+\)"):
        writer.answer(timeout=1)
