"""The write protocol: prepare a temporary directory, finish it with a manifest, publish it with renames,
move the pointer, prune. Torch-free; :mod:`training_runtime.checkpoint.torch_io` writes the data.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, TypeVar, cast

from training_runtime.checkpoint.layout import (
    _NAME,
    DELETING,
    FORMAT,
    MANIFEST,
    OLD,
    POINTER,
    REQUIRED_FILE,
    TMP,
    Checkpoint,
    CheckpointError,
    _complete_manifest,
    _data_files,
    _entries,
    _fsync_dir,
    _fsync_file,
    _required_files,
    complete_checkpoints,
    step_name,
)
from training_runtime.log import log

_T = TypeVar("_T")


def _check_arguments(step: int, keep: int, extra: Optional[Dict[str, Any]]) -> None:
    """Reject bad arguments before anything is written."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError("step must be an integer >= 0, got {!r}".format(step))
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(
            "keep must be an integer >= 1 (how many complete checkpoints to keep; the newest is never deleted), "
            "got {!r}".format(keep)
        )
    if extra is not None:
        try:
            json.dumps(extra, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(
                "extra must be a JSON-serialisable dict (it goes into {}): {}".format(MANIFEST, error)
            ) from error


def _prepare(root: Path, tmp: Path) -> None:
    """Create ``root`` and an empty ``tmp``; remove leftovers of saves a crash interrupted (never checkpoints)."""
    root.mkdir(parents=True, exist_ok=True)
    for path, _, suffix in _entries(root):
        if suffix in (TMP, DELETING):
            _rmtree(path)
    tmp.mkdir()


def _finish(
    root: Path,
    step: int,
    tmp: Path,
    kind: str,
    world: int,
    keep: int,
    extra: Optional[Dict[str, Any]],
    torch_version: str,
    *,
    fields: Optional[Dict[str, Any]] = None,
    before_rename: Optional[Callable[[], None]] = None,
    spare_newer: bool = False,
) -> Checkpoint:
    """Make the data in ``tmp`` a complete checkpoint: manifest, rename, pointer, retention.

    ``fields`` go into the manifest too; ``before_rename`` runs once the manifest is durable; ``spare_newer``: the
    pruning keeps ``.tmp`` directories of steps above ``step`` (other ranks' writers may be filling them)."""
    files = _data_files(tmp)
    manifest: Dict[str, Any] = {
        "format": FORMAT,
        "step": step,
        "kind": kind,
        "world_size": world,
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch_version,
        "files": files,
        "extra": extra if extra is not None else {},
    }
    manifest.update(fields or {})
    missing = [name for name in _required_files(manifest) or [REQUIRED_FILE.get(kind, kind)] if name not in files]
    if missing:
        raise CheckpointError(
            "{} has no {} after the {} save finished. Fix: check the file system at {} (space, quota, errors in "
            "the job log)".format(tmp, ", ".join(missing), kind, root)
        )
    for name in files:
        _fsync_file(tmp / name)
    with open(str(tmp / MANIFEST), "w") as handle:
        json.dump(manifest, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    _fsync_dir(tmp)
    if before_rename is not None:
        before_rename()
    final = _publish(root, step, tmp)
    checkpoint = Checkpoint(step=step, path=final, manifest=manifest)
    try:
        _write_pointer(root, final.name)
    except OSError as error:
        raise CheckpointError(
            "checkpoint step {} is complete at {}, but the {} pointer could not be moved ({}); latest() still finds "
            "the checkpoint, older ones were not pruned. Fix: check the file system at {}".format(
                step, final, root / POINTER, error, root
            )
        ) from error
    try:
        _prune(root, keep, checkpoint, spare_newer=spare_newer)
    except OSError as error:
        raise CheckpointError(
            "checkpoint step {} is complete at {}, but deleting older ones failed ({}). Fix: check the file "
            "system at {}; the next save retries".format(step, final, error, root)
        ) from error
    return checkpoint


def _publish(root: Path, step: int, tmp: Path) -> Path:
    """Rename the complete ``tmp`` to ``step_<N>`` and return it.

    A re-save of an existing complete step (after a requeue) cannot rename over it: ``rename(2)`` refuses a
    non-empty target and no portable call swaps two directories. The old copy is renamed to ``step_<N>.old``
    first, the new one takes its name, and the old copy is deleted by ``_prune`` afterwards. A kill between the
    two renames leaves the complete old copy as ``.old``, which :func:`complete_checkpoints` accepts while
    ``step_<N>`` is missing, and the complete new copy as ``.tmp``, which nothing reads.
    """
    final = root / step_name(step)
    aside = root / (step_name(step) + OLD)
    if final.exists():
        if _complete_manifest(final, step) is not None:
            if aside.exists():
                _rmtree(aside)  # redundant: ``final`` is a complete copy of the same step
            os.rename(str(final), str(aside))
        else:
            _remove(final)  # not a checkpoint: a foreign or damaged directory under our name
    os.rename(str(tmp), str(final))
    _fsync_dir(root)
    return final


def _write_pointer(root: Path, name: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=str(root), prefix="." + POINTER + ".")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(name + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, str(root / POINTER))
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    _fsync_dir(root)


def _prune(root: Path, keep: int, saved: Checkpoint, spare_newer: bool = False) -> None:
    """Keep the newest ``keep`` complete checkpoints and ``saved``; delete older ones and every leftover (but, with
    ``spare_newer``, the ``.tmp`` directories of steps above ``saved``'s: saves other writers are still filling)."""
    checkpoints = complete_checkpoints(root)
    kept = {c.path for c in checkpoints[-keep:]} | {saved.path}
    for path, step, suffix in _entries(root):
        complete_and_ours = any(c.path == path for c in checkpoints)
        in_progress = spare_newer and suffix == TMP and step > saved.step
        if path not in kept and not in_progress and (suffix != "" or complete_and_ours):
            _remove(path)
    for stale in root.glob("." + POINTER + ".*"):
        stale.unlink()


def _remove(path: Path) -> None:
    """Delete a step directory; a complete one is first renamed out of sight so a half-deleted one is never read."""
    match = _NAME.fullmatch(path.name)
    if match and match.group(2) not in (TMP, DELETING) and path.is_dir():
        trash = path.with_name("step_" + match.group(1) + DELETING)
        if trash.exists():
            _rmtree(trash)
        os.rename(str(path), str(trash))
        path = trash
    _rmtree(path)


def _rmtree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(str(path))
    else:
        path.unlink()


def _discard(tmp: Path) -> None:
    """Best-effort removal of a failed save's directory (a kill leaves it to the next save)."""
    try:
        if tmp.exists():
            _rmtree(tmp)
    except OSError:
        pass


def _on_rank0(dist_on: bool, rank: int, work: Callable[[], _T], root: Path, step: int) -> _T:
    """Run ``work`` on rank 0 and hand its result to every rank, or raise CheckpointError on every rank."""
    result: Optional[_T] = None
    problem: Optional[str] = None
    failure: Optional[BaseException] = None
    if rank == 0:
        try:
            result = work()
        except Exception as error:
            failure = error if isinstance(error, CheckpointError) else _save_failed(root, step, error)
            if failure is not error:
                failure.__cause__ = error
            problem = str(failure)
    if dist_on:
        import torch.distributed as dist

        box: List[Any] = [(result, problem)]
        dist.broadcast_object_list(box, src=0)
        result, problem = box[0]
    if failure is not None:
        raise failure
    if problem is not None:
        raise CheckpointError("rank 0 failed: " + problem)
    return cast(_T, result)


def _save_failed(root: Path, step: int, error: BaseException) -> CheckpointError:
    if isinstance(error, OSError):
        fix = "check that the file system is mounted, writable and has space (df -h {})".format(root)
    else:
        fix = "see the error above; the state passed to the save may be the cause"
    return CheckpointError(
        "could not save checkpoint step {} under {}: {}: {}. The previous complete checkpoint is untouched. "
        "Fix: {}".format(step, root, type(error).__name__, error, fix)
    )


def _log_saved(checkpoint: Checkpoint, started: float) -> None:
    log(
        "checkpoint-saved",
        step=checkpoint.step,
        path=str(checkpoint.path),
        kind=checkpoint.manifest["kind"],
        seconds=round(time.monotonic() - started, 3),
        bytes=sum(checkpoint.manifest["files"].values()),
    )
