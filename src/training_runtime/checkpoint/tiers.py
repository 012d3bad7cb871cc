"""The two tiers of an asynchronous save and how one rank's shard goes through them: torch-free.

Shared tier (``root``, FSx): ``root/step_<N>/`` holds every rank's shard and one manifest, published by rank 0's
writer once every rank's shard is complete. Node-local tier (``local_root``, the instance store): each rank
publishes its own shard in ``local_root/rank_<r>/step_<N>/``, a checkpoint of its own (manifest, rename, pointer,
retention ``keep_local``), then copies it to the shared tier. Both tiers use the protocol of
:mod:`.publish`; a crash at any moment leaves every tier's previous complete checkpoint readable.

How ranks coordinate without the trainer's process group: each rank's writer writes its files into the shared
``step_<N>.tmp/`` and then, atomically, a marker ``shard_<r>.done`` naming the save's id; rank 0's writer polls the
directory until every rank's marker of this save is there (or ``shard_timeout`` passes), removes anything else
(a killed earlier attempt's files), and publishes. The file system is the one thing every writer already shares;
the trainer's process group cannot be used from another process, and from another thread it would race the
training collectives.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from training_runtime.checkpoint.jobs import SaveJob, reach
from training_runtime.checkpoint.layout import (
    SHARDS,
    TMP,
    Checkpoint,
    CheckpointError,
    _fsync_dir,
    _fsync_file,
    complete_checkpoints,
    shard_files,
    step_name,
)
from training_runtime.checkpoint.publish import _finish, _prepare, _rmtree
from training_runtime.log import log

LOCAL = "local"
SHARED = "shared"
DONE = ".done"
FAILED = ".failed"
"""A rank's writer that could not save its shard says so next to the shards, so rank 0 stops waiting for it."""
POLL_S = (0.01, 0.5)
"""Rank 0's writer polls for the other shards' markers from the first to the second interval (doubling)."""
CHUNK = 256 << 20

WriteData = Callable[[int, Callable[[], None]], None]
"""Writes the shard's data file to an open file descriptor, calling its second argument halfway."""


def rank_directory(local_root: Path, rank: int) -> Path:
    """Where one rank's node-local checkpoints are (each rank publishes its own)."""
    return local_root / "rank_{:05d}".format(rank)


def marker_name(rank: int, suffix: str = DONE) -> str:
    return "shard_{:05d}{}".format(rank, suffix)


def execute(job: SaveJob, index: bytes, write_data: WriteData) -> Optional[Checkpoint]:
    """Save one rank's shard through every tier; rank 0 publishes the shared tier. Returns rank 0's shared
    checkpoint (None on other ranks)."""
    started = time.monotonic()
    root = Path(job.root)
    shared_tmp = root / (step_name(job.step) + TMP)
    data_name, index_name = shard_files(job.rank)
    try:
        if job.local_root is not None:
            local = _save_local(job, index, write_data)
            root.mkdir(parents=True, exist_ok=True)
            shared_tmp.mkdir(exist_ok=True)
            _copy(local.path / data_name, shared_tmp / data_name, lambda: reach(job.breakpoints, "copying"))
            _copy(local.path / index_name, shared_tmp / index_name, None)
        else:
            root.mkdir(parents=True, exist_ok=True)
            shared_tmp.mkdir(exist_ok=True)
            _write_shard(shared_tmp, job, index, write_data)
    except Exception as error:
        if job.rank != 0:
            _report_failure(shared_tmp, job, error)
        raise
    _write_marker(shared_tmp, job)
    if job.rank != 0:
        return None
    stage = "publishing-shared" if job.local_root is not None else "publishing"
    checkpoint = _publish_shared(job, shared_tmp, lambda: reach(job.breakpoints, stage))
    log(
        "checkpoint-saved",
        step=job.step,
        path=str(checkpoint.path),
        kind=SHARDS,
        tier=SHARED,
        seconds=round(time.monotonic() - started, 3),
        bytes=sum(checkpoint.manifest["files"].values()),
    )
    return checkpoint


def _save_local(job: SaveJob, index: bytes, write_data: WriteData) -> Checkpoint:
    assert job.local_root is not None
    directory = rank_directory(Path(job.local_root), job.rank)
    tmp = directory / (step_name(job.step) + TMP)
    _prepare(directory, tmp)  # only this rank's writer writes here: every leftover is a killed save's
    _write_shard(tmp, job, index, write_data)
    fields = {"tier": LOCAL, "ranks": [job.rank], "save_id": job.save_id, "host": job.host, "shared_root": job.root}
    return _finish(
        directory,
        job.step,
        tmp,
        SHARDS,
        job.world,
        job.keep_local,
        job.extra,
        job.torch_version,
        fields=fields,
        before_rename=lambda: reach(job.breakpoints, "publishing"),
    )


def _write_shard(directory: Path, job: SaveJob, index: bytes, write_data: WriteData) -> None:
    data_name, index_name = shard_files(job.rank)
    fd = os.open(str(directory / data_name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_data(fd, lambda: reach(job.breakpoints, "writing"))
        os.fsync(fd)
    finally:
        os.close(fd)
    with open(str(directory / index_name), "wb") as handle:
        handle.write(index)
        handle.flush()
        os.fsync(handle.fileno())


def write_all(fd: int, data: memoryview, halfway: Optional[Callable[[], None]] = None) -> None:
    """Write ``data`` whole (``write`` may write less than asked), calling ``halfway`` after the first half."""
    half = len(data) // 2 if halfway is not None else len(data)
    _write_range(fd, data, 0, half)
    if halfway is not None:
        halfway()
        _write_range(fd, data, half, len(data))


def _write_range(fd: int, data: memoryview, start: int, end: int) -> None:
    while start < end:
        start += os.write(fd, data[start : min(end, start + CHUNK)])


def _copy(source: Path, target: Path, halfway: Optional[Callable[[], None]]) -> None:
    """Copy one file between tiers (``sendfile``, in chunks) and fsync it; ``halfway`` after the first half."""
    size = source.stat().st_size
    half = size // 2 if halfway is not None else size
    with open(str(source), "rb") as reader, open(str(target), "wb") as writer:
        _send_range(reader.fileno(), writer.fileno(), 0, half, source)
        if halfway is not None:
            halfway()
            _send_range(reader.fileno(), writer.fileno(), half, size, source)
        os.fsync(writer.fileno())


def _send_range(source: int, target: int, start: int, end: int, name: Path) -> None:
    while start < end:
        sent = os.sendfile(target, source, start, min(CHUNK, end - start))
        if sent == 0:
            raise CheckpointError("{} shrank while it was copied to the shared tier".format(name))
        start += sent


def _write_marker(directory: Path, job: SaveJob, suffix: str = DONE, **fields: Any) -> None:
    """Say, atomically, that this rank's shard of this save is complete in the shared ``step_<N>.tmp`` (or, with
    ``suffix`` :data:`FAILED`, that it failed)."""
    marker = {
        "save_id": job.save_id,
        "step": job.step,
        "rank": job.rank,
        "world_size": job.world,
        "host": job.host,
        "local": job.local_root is not None,
    }
    if suffix == DONE:
        marker["files"] = {name: (directory / name).stat().st_size for name in shard_files(job.rank)}
    marker.update(fields)
    final = directory / marker_name(job.rank, suffix)
    temporary = directory / (marker_name(job.rank, suffix) + ".part")
    with open(str(temporary), "w") as handle:
        json.dump(marker, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(str(temporary), str(final))
    _fsync_dir(directory)


def _report_failure(directory: Path, job: SaveJob, error: Exception) -> None:
    """Best effort: a failure marker for rank 0's writer (a file system that failed the shard may fail this too)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write_marker(directory, job, FAILED, error="{}: {}".format(type(error).__name__, error))
    except OSError:
        pass


def _markers(directory: Path, job: SaveJob, suffix: str = DONE) -> Dict[int, Dict[str, Any]]:
    """The markers of this save (same id and world) found in ``directory``, by rank."""
    found: Dict[int, Dict[str, Any]] = {}
    for rank in range(job.world):
        try:
            marker = json.loads((directory / marker_name(rank, suffix)).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(marker, dict) and marker.get("save_id") == job.save_id and marker.get("world_size") == job.world:
            found[rank] = marker
    return found


def wait_for_shards(
    directory: Path, job: SaveJob, sleep: Callable[[float], None] = time.sleep
) -> Dict[int, Dict[str, Any]]:
    """Every rank's marker of this save; CheckpointError naming the ranks whose writer failed, at once, or the
    missing ranks after ``shard_timeout``."""
    deadline = time.monotonic() + job.shard_timeout
    interval = POLL_S[0]
    while True:
        found = _markers(directory, job)
        if len(found) == job.world:
            return found
        failed = {r: m for r, m in _markers(directory, job, FAILED).items() if r not in found}
        if failed:
            raise CheckpointError(
                "checkpoint step {}: {}; the save is abandoned and the previous complete checkpoint stays the "
                "newest. Fix: see those ranks' errors".format(
                    job.step,
                    "; ".join(
                        "rank {} on {} could not save its shard ({})".format(r, m.get("host"), m.get("error"))
                        for r, m in sorted(failed.items())
                    ),
                )
            )
        if time.monotonic() >= deadline:
            missing = [r for r in range(job.world) if r not in found]
            raise CheckpointError(
                "checkpoint step {}: rank(s) {} did not finish their shards in {} within {:.0f} s; the save is "
                "abandoned and the previous complete checkpoint stays the newest. Fix: see those ranks' errors "
                "(their next save or poll reports them)".format(job.step, missing, directory, job.shard_timeout)
            )
        sleep(interval)
        interval = min(interval * 2, POLL_S[1])


def _publish_shared(job: SaveJob, tmp: Path, before_rename: Callable[[], None]) -> Checkpoint:
    markers = wait_for_shards(tmp, job)
    wanted = {marker_name(r) for r in markers}
    for marker in markers.values():
        wanted.update(marker["files"])
    for entry in sorted(os.listdir(str(tmp))):
        if entry not in wanted:  # a killed earlier attempt's files (another save id, or ranks beyond this world)
            _rmtree(tmp / entry)
    for name in sorted(wanted):
        _fsync_file(tmp / name)
    local_copies = {str(r): (m["host"] if m.get("local") else None) for r, m in sorted(markers.items())}
    fields = {"tier": SHARED, "ranks": list(range(job.world)), "save_id": job.save_id, "local_copies": local_copies}
    return _finish(
        Path(job.root),
        job.step,
        tmp,
        SHARDS,
        job.world,
        job.keep,
        job.extra,
        job.torch_version,
        fields=fields,
        before_rename=before_rename,
        spare_newer=True,
    )


Candidate = Tuple[int, str]
"""(step, save id): the same key on every rank and tier for one save."""


def candidates(root: Path, local_root: Optional[Path], rank: int, world: int) -> Dict[Candidate, Tuple[str, Path]]:
    """Every save this rank can load its shard of: key -> (tier, directory). A local copy wins over the shared one
    of the same save (it is on this node's disk)."""
    found: Dict[Candidate, Tuple[str, Path]] = {}
    for checkpoint in complete_checkpoints(root):
        manifest = checkpoint.manifest
        if manifest.get("kind") == SHARDS and manifest.get("world_size") == world and rank in manifest["ranks"]:
            found[(checkpoint.step, str(manifest.get("save_id")))] = (SHARED, checkpoint.path)
    if local_root is not None:
        for checkpoint in complete_checkpoints(rank_directory(local_root, rank)):
            manifest = checkpoint.manifest
            if manifest.get("world_size") == world and manifest.get("ranks") == [rank]:
                found[(checkpoint.step, str(manifest.get("save_id")))] = (LOCAL, checkpoint.path)
    return found


def newest_other(root: Path, world: int) -> Optional[Checkpoint]:
    """The newest complete checkpoint under ``root`` this job cannot resume from (another kind or world size)."""
    others = [
        c
        for c in complete_checkpoints(root)
        if c.manifest.get("kind") != SHARDS or c.manifest.get("world_size") != world
    ]
    return others[-1] if others else None


def pick(common: List[Candidate]) -> Optional[Candidate]:
    """The newest save: highest step, then the latest save id (ids grow with time)."""
    return max(common) if common else None
