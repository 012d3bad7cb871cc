"""The torch side: ``save`` / ``load`` (one process, ``torch.save``) and ``save_distributed`` /
``load_distributed`` (every rank, ``torch.distributed.checkpoint``). ``torch`` is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple, Union

from training_runtime.checkpoint.layout import (
    DCP,
    STATE_FILE,
    TMP,
    TORCH_SAVE,
    Checkpoint,
    CheckpointError,
    _verified,
    step_name,
)
from training_runtime.checkpoint.publish import (
    _check_arguments,
    _discard,
    _finish,
    _log_saved,
    _on_rank0,
    _prepare,
    _save_failed,
)


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
