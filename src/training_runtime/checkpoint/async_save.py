"""Asynchronous, tiered checkpoints: the trainer blocks only while its state is copied into host memory.

::

    ckpt = AsyncCheckpointer("/fsx/checkpoints/run", local_root=node_local_root(instance_type, "run"))
    start = (ckpt.resume(state) or -1) + 1         # every rank; state = {"model": ..., "optim": ...}
    for step in range(start, steps):
        train_one_step(step)
        ckpt.poll()                                  # a failed background save raises here
        if step % every == 0:
            ckpt.save(step, state)                   # every rank; returns once the state is staged
    ckpt.close()                                     # waits for the last save and its copy between tiers

A save (every rank calls it at the same step, like ``save_distributed``): the ranks agree on the save's id, on
whether to go on (policy ``wait``: each first waits for its save in flight; ``skip``: the save is skipped on every
rank when any rank still has one in flight) and on whether an earlier background save failed anywhere (then every
rank raises). Each rank copies its tensors (a DTensor's local part) into its reused host buffers
(:mod:`.staging`) and hands them to its writer process (:mod:`.writer`), which writes and publishes the shard
through the tiers (:mod:`.tiers`). ``asynchronous=False`` does the same writing in the trainer, with no staging
copy, and returns when the save is published.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

from training_runtime.checkpoint.collective import agree_max
from training_runtime.checkpoint.jobs import Breakpoints, SaveJob, reach
from training_runtime.checkpoint.layout import CheckpointError
from training_runtime.checkpoint.publish import _check_arguments, _save_failed
from training_runtime.checkpoint.resume import Resumed, resume
from training_runtime.checkpoint.shards import Flat, flatten, tensor_memory
from training_runtime.checkpoint.staging import StagingBuffers
from training_runtime.checkpoint.tiers import execute, write_all
from training_runtime.checkpoint.writer_client import WriterGone, WriterProcess
from training_runtime.log import log

WAIT = "wait"
SKIP = "skip"
POLICIES = (WAIT, SKIP)
DEFAULT_SHARD_TIMEOUT_S = 1800.0


class AsyncCheckpointer:
    """Saves and resumes one job's checkpoints under ``root`` (the shared tier) and ``local_root`` (node-local).

    ``keep`` / ``keep_local``: complete checkpoints kept per tier (the newest is never deleted). ``policy``: what a
    save does while this job's previous save is in flight, ``wait`` or ``skip`` (it returns False). ``pin``: page-lock
    the staging buffers (None: when CUDA is available). ``breakpoints``: hold saves at named stages (crash tests).
    """

    def __init__(
        self,
        root: Union[str, Path],
        *,
        local_root: Optional[Union[str, Path]] = None,
        keep: int = 3,
        keep_local: int = 2,
        policy: str = WAIT,
        asynchronous: bool = True,
        shard_timeout: float = DEFAULT_SHARD_TIMEOUT_S,
        pin: Optional[bool] = None,
        breakpoints: Optional[Breakpoints] = None,
    ) -> None:
        problems = []
        for name, value in (("keep", keep), ("keep_local", keep_local)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(
                    "{} must be an integer >= 1 (checkpoints kept on its tier), got {!r}".format(name, value)
                )
        if policy not in POLICIES:
            problems.append("policy must be one of {}, got {!r}".format(", ".join(POLICIES), policy))
        if not (isinstance(shard_timeout, (int, float)) and shard_timeout > 0):
            problems.append("shard_timeout must be a number of seconds > 0, got {!r}".format(shard_timeout))
        if problems:
            raise ValueError("AsyncCheckpointer: " + "; ".join(problems))
        self.root = Path(root)
        self.local_root = None if local_root is None else Path(local_root)
        self.keep = keep
        self.keep_local = keep_local
        self.policy = policy
        self.asynchronous = asynchronous
        self.shard_timeout = float(shard_timeout)
        self.breakpoints = breakpoints
        self.last_blocked_s: Optional[float] = None
        """Seconds the last :meth:`save` kept the trainer (agreement, staging, hand-over; everything when
        synchronous)."""
        self.resumed: Optional[Resumed] = None
        """What the last :meth:`resume` loaded: step, tier, checkpoint (its manifest's ``extra``)."""
        self._staging = StagingBuffers(pin)
        self._writer: Optional[WriterProcess] = None
        self._in_flight: Optional[SaveJob] = None
        self._failure: Optional[CheckpointError] = None
        self._closed = False

    # --- the API -------------------------------------------------------------------------------------------------

    @property
    def staging_bytes(self) -> int:
        """Host memory held for staging now (0 before the first asynchronous save and after :meth:`close`)."""
        return self._staging.used

    @property
    def staging_allocations(self) -> int:
        """How many times staging buffers were allocated (once while the state keeps its shapes and dtypes)."""
        return self._staging.allocations

    @property
    def writer_pid(self) -> Optional[int]:
        return None if self._writer is None else self._writer.pid

    @property
    def in_flight(self) -> Optional[int]:
        """The step of the save in flight (after the last :meth:`poll`), or None."""
        return None if self._in_flight is None else self._in_flight.step

    def save(self, step: int, state_dict: Dict[str, Any], *, extra: Optional[Dict[str, Any]] = None) -> bool:
        """Start a save of ``state_dict`` as checkpoint ``step`` (every rank); True once it is staged (synchronous:
        published), False when policy ``skip`` skipped it. Raises :class:`CheckpointError` for an earlier background
        save that failed on any rank."""
        self._check_open()
        _check_arguments(step, self.keep, extra)
        started = time.monotonic()
        from training_runtime.checkpoint.torch_io import _world

        distributed, rank, world = _world()
        self._settle(None if self.policy == WAIT else 0.0)
        nonce = _nonce() if rank == 0 else 0
        failed, busy, nonce = agree_max([self._failure is not None, self._in_flight is not None, nonce], distributed)
        if failed:
            raise self._take_failure() or CheckpointError(
                "checkpoint step {} not started: another rank's background save failed (see its error)".format(step)
            )
        if busy:
            log("checkpoint-skipped", step=step, in_flight=self.in_flight, policy=self.policy)
            return False
        flat = flatten(state_dict)
        job = self._job(step, "{:016x}".format(nonce), rank, world, flat.size, extra)
        index = flat.index_bytes(rank, world, step)
        if not self.asynchronous:
            self._save_now(job, flat, index)
        else:
            self._staging.prepare(flat)
            self._staging.stage(flat, halfway=lambda: reach(self.breakpoints, "staging"))
            self._submit(job, index)
            self._in_flight = job
        self.last_blocked_s = time.monotonic() - started
        return True

    def poll(self) -> None:
        """Collect the writer's news without waiting; raises the :class:`CheckpointError` of a failed save once."""
        self._check_open()
        self._settle(0.0)
        failure = self._take_failure()
        if failure is not None:
            raise failure

    def flush(self, timeout: Optional[float] = None) -> None:
        """Wait until the save in flight is published on every tier (the SIGTERM / Spot path); raises its failure,
        or :class:`CheckpointError` when it is still in flight after ``timeout`` seconds."""
        self._check_open()
        self._settle(timeout)
        failure = self._take_failure()
        if failure is not None:
            raise failure
        if self._in_flight is not None:
            raise CheckpointError(
                "checkpoint step {} is still being written after {} s; the previous complete checkpoint is the "
                "newest. Fix: flush with a longer timeout".format(self._in_flight.step, timeout)
            )

    def resume(self, state_dict: Dict[str, Any], *, weights_only: bool = True) -> Optional[int]:
        """Load the newest complete checkpoint over every tier this job can read into ``state_dict`` in place (every
        rank); its step, or None when there is none. Then call ``load_state_dict`` where ``state_dict()`` returned
        copies (an optimizer's hyperparameters), as with ``load_distributed``."""
        self._check_open()
        self.resumed = resume(self.root, self.local_root, state_dict, weights_only)
        if self.resumed is not None:
            log(
                "checkpoint-resumed",
                step=self.resumed.step,
                tier=self.resumed.tier,
                path=str(self.resumed.checkpoint.path),
            )
        return None if self.resumed is None else self.resumed.step

    def close(self, timeout: Optional[float] = None) -> None:
        """Flush, stop the writer, free the buffers. Raises the flush's failure after cleaning up."""
        if self._closed:
            return
        try:
            if self._in_flight is not None or self._failure is not None:
                self.flush(timeout)
        finally:
            self._closed = True
            if self._writer is not None:
                self._writer.stop()
                self._writer = None
            self._staging.release()

    def __enter__(self) -> "AsyncCheckpointer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- inside --------------------------------------------------------------------------------------------------

    def _job(
        self, step: int, save_id: str, rank: int, world: int, size: int, extra: Optional[Dict[str, Any]]
    ) -> SaveJob:
        import torch

        return SaveJob(
            step=step,
            save_id=save_id,
            rank=rank,
            world=world,
            root=str(self.root),
            local_root=None if self.local_root is None else str(self.local_root),
            keep=self.keep,
            keep_local=self.keep_local,
            size=size,
            host=socket.gethostname(),
            torch_version=torch.__version__,
            shard_timeout=self.shard_timeout,
            extra=dict(extra or {}),
            breakpoints=self.breakpoints,
        )

    def _save_now(self, job: SaveJob, flat: Flat, index: bytes) -> None:
        try:
            execute(job, index, lambda fd, halfway: _write_tensors(flat, fd, halfway))
        except CheckpointError:
            raise
        except Exception as error:
            raise _save_failed(self.root, job.step, error) from error

    def _submit(self, job: SaveJob, index: bytes) -> None:
        """Hand the staged save to the writer, starting one if there is none (or it died while idle)."""
        for attempt in (1, 2):
            try:
                if self._writer is None or self._writer.process.poll() is not None:
                    self._writer = WriterProcess()
                if self._writer.buffer_generation != self._staging.generation:
                    assert self._staging.fd is not None
                    self._writer.attach(self._staging.fd, self._staging.size, self._staging.generation)
                self._writer.submit(job, index)
                return
            except WriterGone as gone:
                self._writer = None
                if attempt == 2:
                    raise CheckpointError(
                        "checkpoint step {} not saved: {} twice in a row. Fix: see the writer's error above".format(
                            job.step, gone.describe
                        )
                    ) from gone

    def _settle(self, timeout: Optional[float]) -> None:
        """Take the writer's answer to the save in flight, waiting up to ``timeout`` (None: until it comes)."""
        job = self._in_flight
        if job is None or self._writer is None:
            return
        try:
            answer = self._writer.answer(timeout)
        except WriterGone as gone:
            self._writer = None
            self._in_flight = None
            self._failure = CheckpointError(
                "background save of checkpoint step {} lost: {}. The previous complete checkpoint is untouched; the "
                "next save starts a new writer".format(job.step, gone.describe)
            )
            return
        if answer is None:
            return
        self._in_flight = None
        if answer.get("event") == "failed":
            self._failure = CheckpointError(
                "background save of checkpoint step {} failed: {}. The previous complete checkpoint is untouched. "
                "Fix: check the file systems at {}".format(
                    job.step, answer.get("error"), ", ".join(str(p) for p in (self.local_root, self.root) if p)
                )
            )

    def _take_failure(self) -> Optional[CheckpointError]:
        failure, self._failure = self._failure, None
        return failure

    def _check_open(self) -> None:
        if self._closed:
            raise CheckpointError("this AsyncCheckpointer is closed. Fix: create a new one")


def _nonce() -> int:
    """A save id that grows with time (milliseconds, then 20 random bits): ids of one step order by age."""
    return (int(time.time() * 1000) << 20) | int.from_bytes(os.urandom(3), "big") >> 4


def _write_tensors(flat: Flat, fd: int, halfway: Callable[[], None]) -> None:
    """The synchronous path: the data file straight from the tensors (a GPU tensor goes through host memory)."""
    position = 0
    half = len(flat.tensors) // 2
    for i, tensor in enumerate(flat.tensors):
        slot = flat.slots[i]
        if i == half:
            halfway()
        host = tensor.cpu() if tensor.device.type != "cpu" else tensor
        host = host.contiguous()
        if slot.offset > position:
            write_all(fd, memoryview(bytes(slot.offset - position)))
        write_all(fd, tensor_memory(host))
        position = slot.offset + slot.nbytes
    if not flat.tensors:
        halfway()
    if flat.size > position:
        write_all(fd, memoryview(bytes(flat.size - position)))
