"""Atomic checkpoints on shared storage (FSx for Lustre or any POSIX file system): never resume from a partial one.

Layout under ``root`` (one training job writes to a root at a time)::

    step_000000120/        a complete checkpoint: its data files and manifest.json
    step_000000140.tmp/    a save in progress, or one a crash interrupted: never read, removed by the next save
    step_000000120.old/    the previous copy of a step while it is being saved again (see ``_publish``)
    latest                 the name of the most recently published checkpoint, for people and other tools

A save writes everything into ``step_<N>.tmp``, fsyncs the files, writes and fsyncs ``manifest.json`` (sizes of
every data file), renames the directory to ``step_<N>`` (atomic within one file system), fsyncs ``root``, moves the
``latest`` pointer (temporary file + ``os.replace``), and only then deletes checkpoints beyond ``keep``. Readers do
not trust the pointer: :func:`latest` scans for the highest step whose manifest checks out against the files on
disk, so a kill at any point leaves the previous complete checkpoint readable.

``torch`` is imported inside the functions that need it: the package imports on nodes without torch.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import re
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar, Union, cast

from training_runtime.log import log

FORMAT = "hyperpod-cdk-checkpoint/1"
MANIFEST = "manifest.json"
POINTER = "latest"
STATE_FILE = "state.pt"
DCP_METADATA = ".metadata"
TORCH_SAVE = "torch.save"
DCP = "dcp"
REQUIRED_FILE = {TORCH_SAVE: STATE_FILE, DCP: DCP_METADATA}
TMP = ".tmp"
OLD = ".old"
DELETING = ".deleting"

_NAME = re.compile(r"^step_(\d{9,})(\.tmp|\.old|\.deleting)?$")
_T = TypeVar("_T")


class CheckpointError(RuntimeError):
    """A checkpoint could not be saved or loaded; the message says what, where and how to fix it."""


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: its step, its directory and its parsed manifest."""

    step: int
    path: Path
    manifest: Dict[str, Any]


def step_name(step: int) -> str:
    """Directory name of a complete checkpoint, e.g. ``step_000000120``."""
    return "step_{:09d}".format(step)


def latest(root: Union[str, Path]) -> Optional[Checkpoint]:
    """Newest COMPLETE checkpoint, or None. Never returns a partial one.

    The highest complete step wins, whatever the ``latest`` pointer says: the pointer lags when a save was killed
    between its rename and the pointer move.
    """
    checkpoints = complete_checkpoints(root)
    return checkpoints[-1] if checkpoints else None


def complete_checkpoints(root: Union[str, Path]) -> List[Checkpoint]:
    """Every complete checkpoint under ``root``, oldest first; an empty list when ``root`` does not exist.

    ``step_<N>.old`` stands in for ``step_<N>`` only while ``step_<N>`` is absent or incomplete (a re-save of that
    step was killed between its two renames).
    """
    by_step: Dict[int, Checkpoint] = {}
    for path, step, suffix in _entries(Path(root)):
        if suffix not in ("", OLD) or (step in by_step and suffix == OLD):
            continue
        manifest = _complete_manifest(path, step)
        if manifest is not None and (step not in by_step or suffix == ""):
            by_step[step] = Checkpoint(step=step, path=path, manifest=manifest)
    return [by_step[step] for step in sorted(by_step)]


def save(
    root: Union[str, Path],
    step: int,
    state: Dict[str, Any],
    *,
    keep: int = 3,
    extra: Optional[Dict[str, Any]] = None,
) -> Checkpoint:
    """torch.save flavour: called by ONE process (rank 0). Writes state.pt.

    ``extra`` (JSON-serialisable) is stored in the manifest. After the new checkpoint is complete, the newest
    ``keep`` complete checkpoints and the new one are kept and older ones deleted.
    """
    _check_arguments(step, keep, extra)
    _, rank, world = _world()
    if rank != 0:
        raise CheckpointError(
            "checkpoint.save() was called on rank {}: it writes from one process. Fix: call it on rank 0 only "
            "(`if dist.get_rank() == 0: save(...)`), or call save_distributed() on every rank".format(rank)
        )
    import torch

    root = Path(root)
    started = time.monotonic()
    tmp = root / (step_name(step) + TMP)
    try:
        _prepare(root, tmp)
        with open(str(tmp / STATE_FILE), "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        checkpoint = _finish(root, step, tmp, TORCH_SAVE, world, keep, extra, torch.__version__)
    except CheckpointError:
        _discard(tmp)
        raise
    except Exception as error:
        _discard(tmp)
        raise _save_failed(root, step, error) from error
    _log_saved(checkpoint, started)
    return checkpoint


def load(checkpoint: Checkpoint, map_location: str = "cpu", *, weights_only: bool = True) -> Dict[str, Any]:
    """The state a :func:`save` wrote, read with ``torch.load``.

    ``weights_only=True`` (the default) unpickles only tensors, containers and primitive types, which covers model
    and optimizer state dicts and refuses arbitrary code in a tampered file; pass ``weights_only=False`` for a
    state holding other Python objects, and only for files you trust.
    """
    import pickle

    import torch

    manifest = _verified(checkpoint, TORCH_SAVE)
    try:
        state = torch.load(str(checkpoint.path / STATE_FILE), map_location=map_location, weights_only=weights_only)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            "cannot load {} with weights_only=True: it holds objects other than tensors and plain types ({}). "
            "Fix: pass weights_only=False if you trust this file".format(checkpoint.path / STATE_FILE, error)
        ) from error
    if not isinstance(state, dict):
        raise CheckpointError(
            "{} holds a {}, not the dict save() writes (manifest step {}). Fix: point load() at a checkpoint "
            "written by checkpoint.save()".format(checkpoint.path / STATE_FILE, type(state).__name__, manifest["step"])
        )
    return state


def save_distributed(
    root: Union[str, Path],
    step: int,
    state_dict: Dict[str, Any],
    *,
    keep: int = 3,
    extra: Optional[Dict[str, Any]] = None,
) -> Optional[Checkpoint]:
    """torch.distributed.checkpoint flavour: called by EVERY rank (collective). Returns the Checkpoint on every rank.

    All ranks write their shards into the same ``step_<N>.tmp``; rank 0 then writes the manifest, publishes the
    directory and prunes, and every rank gets the result, or a :class:`CheckpointError` when any part failed.
    Works without an initialised process group (one process). With NCCL, set the CUDA device first.
    """
    _check_arguments(step, keep, extra)
    dist_on, rank, world = _world()
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    root = Path(root)
    started = time.monotonic()
    tmp = root / (step_name(step) + TMP)
    _on_rank0(dist_on, rank, lambda: _prepare(root, tmp), root, step)
    try:
        with _quiet_single_process():
            dcp.save(state_dict, storage_writer=dcp.FileSystemWriter(str(tmp)), no_dist=not dist_on)
    except Exception as error:
        raise _save_failed(root, step, error) from error
    if dist_on:
        dist.barrier()
    checkpoint = _on_rank0(
        dist_on, rank, lambda: _finish(root, step, tmp, DCP, world, keep, extra, torch.__version__), root, step
    )
    if rank == 0:
        _log_saved(checkpoint, started)
    return checkpoint


def load_distributed(checkpoint: Checkpoint, state_dict: Dict[str, Any]) -> None:
    """Load a :func:`save_distributed` checkpoint into ``state_dict`` in place; every rank calls it (collective).

    The checkpoint may have been written by a different number of ranks: torch.distributed.checkpoint reshards.
    """
    import torch.distributed.checkpoint as dcp

    _verified(checkpoint, DCP)
    dist_on, _, _ = _world()
    with _quiet_single_process():
        dcp.load(state_dict, storage_reader=dcp.FileSystemReader(str(checkpoint.path)), no_dist=not dist_on)


# --- saving -------------------------------------------------------------------------------------------------------


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


def _world() -> Tuple[bool, int, int]:
    """(process group initialised, rank, world size); (False, 0, 1) without torch.distributed."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return True, dist.get_rank(), dist.get_world_size()
    return False, 0, 1


@contextlib.contextmanager
def _quiet_single_process() -> Iterator[None]:
    """Silence DCP's warning that it runs in one process: without a process group that is what we asked for."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        yield


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
) -> Checkpoint:
    """Make the data in ``tmp`` a complete checkpoint: manifest, rename, pointer, retention."""
    files = _data_files(tmp)
    if REQUIRED_FILE[kind] not in files:
        raise CheckpointError(
            "{} has no {} after the {} save finished. Fix: check the file system at {} (space, quota, errors in "
            "the job log)".format(tmp, REQUIRED_FILE[kind], kind, root)
        )
    for name in files:
        _fsync_file(tmp / name)
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
    with open(str(tmp / MANIFEST), "w") as handle:
        json.dump(manifest, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    _fsync_dir(tmp)
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
        _prune(root, keep, checkpoint)
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


def _prune(root: Path, keep: int, saved: Checkpoint) -> None:
    """Keep the newest ``keep`` complete checkpoints and ``saved``; delete older ones and every leftover."""
    checkpoints = complete_checkpoints(root)
    kept = {c.path for c in checkpoints[-keep:]} | {saved.path}
    for path, _, suffix in _entries(root):
        complete_and_ours = any(c.path == path for c in checkpoints)
        if path not in kept and (suffix != "" or complete_and_ours):
            _remove(path)
    for stale in root.glob("." + POINTER + ".*"):
        stale.unlink()


def _remove(path: Path) -> None:
    """Delete a step directory; a complete one is first renamed out of sight so a half-deleted one is never read."""
    match = _NAME.match(path.name)
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


# --- reading ------------------------------------------------------------------------------------------------------


def _entries(root: Path) -> List[Tuple[Path, int, str]]:
    """(path, step, suffix) of every step directory under ``root``, by name; suffix is '' for a published one."""
    try:
        names = os.listdir(str(root))
    except FileNotFoundError:
        return []
    found = []
    for name in sorted(names):
        match = _NAME.match(name)
        if match:
            found.append((root / name, int(match.group(1)), match.group(2) or ""))
    return found


def _complete_manifest(path: Path, step: int) -> Optional[Dict[str, Any]]:
    """The manifest of a complete checkpoint of ``step`` at ``path``, or None."""
    return _inspect(path, step)[0]


def _inspect(path: Path, step: int) -> Tuple[Optional[Dict[str, Any]], str]:
    """(manifest, '') when ``path`` holds a complete checkpoint of ``step``, else (None, why not)."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        return None, "no readable {} ({})".format(MANIFEST, error)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None, "{} is not a {} manifest".format(MANIFEST, FORMAT)
    if manifest.get("step") != step or isinstance(manifest.get("step"), bool):
        return None, "{} says step {!r}, the directory name says {}".format(MANIFEST, manifest.get("step"), step)
    kind = manifest.get("kind")
    files = manifest.get("files")
    if kind not in REQUIRED_FILE or not isinstance(files, dict) or REQUIRED_FILE[kind] not in files:
        return None, "{} has kind {!r} and does not list its required file".format(MANIFEST, kind)
    for name, size in files.items():
        if not _safe_relative(name) or isinstance(size, bool) or not isinstance(size, int):
            return None, "{} lists {!r} with size {!r}".format(MANIFEST, name, size)
        try:
            actual = os.stat(str(path / name)).st_size
        except OSError:
            return None, "{} is missing".format(name)
        if actual != size:
            return None, "{} has {} bytes, the manifest says {}".format(name, actual, size)
    return manifest, ""


def _verified(checkpoint: Checkpoint, kind: str) -> Dict[str, Any]:
    manifest, problem = _inspect(checkpoint.path, checkpoint.step)
    if manifest is None:
        raise CheckpointError(
            "{} is not a complete checkpoint of step {}: {}. Fix: load checkpoint.latest(root) instead".format(
                checkpoint.path, checkpoint.step, problem
            )
        )
    if manifest["kind"] != kind:
        other = "load_distributed()" if manifest["kind"] == DCP else "load()"
        raise CheckpointError(
            "{} was written with {}; read it with {}".format(checkpoint.path, manifest["kind"], other)
        )
    return manifest


def _safe_relative(name: Any) -> bool:
    if not isinstance(name, str) or not name or name.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def _data_files(directory: Path) -> Dict[str, int]:
    """{relative name: size in bytes} of every regular file under ``directory`` except the manifest."""
    files: Dict[str, int] = {}
    for parent, _, names in os.walk(str(directory)):
        for name in names:
            full = Path(parent) / name
            relative = full.relative_to(directory).as_posix()
            if relative != MANIFEST and full.is_file():
                files[relative] = full.stat().st_size
    return dict(sorted(files.items()))


def _fsync_file(path: Path) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Make renames and new entries in ``path`` durable; a file system that cannot fsync a directory is skipped."""
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)
