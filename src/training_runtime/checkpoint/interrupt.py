"""Checkpoint on a signal: how a training script saves and hands its job back when its node is going away.

The Spot watcher (:mod:`training_runtime.spot`) sends :data:`CHECKPOINT_SIGNAL` to the job's steps
(``scancel --signal=USR1``) when EC2 posts an interruption notice. The launcher makes torchrun ignore that
signal (an ignored disposition survives ``exec`` and is inherited by the workers), so only a script that asks
for it sees it::

    stop = checkpoint.StopRequest()            # before the training loop, in every rank
    for step in range(start, steps):
        train_one_step(step)
        if stop.agreed(checkpoint.any_rank):  # every rank, every step: they stop at the same step
            if rank == 0:
                checkpoint.save(directory, step, state)
            break
    if stop.requested_anywhere and rank == 0:
        checkpoint.requeue_job()              # the job runs again, elsewhere, from this checkpoint

``torch`` is imported inside :func:`any_rank` only (the rest of the package needs no torch).
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any, Callable, Mapping, Optional, Sequence

CHECKPOINT_SIGNAL = signal.SIGUSR1
"""The signal that asks a training job to checkpoint and stop (Slurm names it ``USR1``)."""
CHECKPOINT_SIGNAL_NAME = CHECKPOINT_SIGNAL.name[len("SIG") :]
REQUEUE_TIMEOUT_S = 60


class StopRequest:
    """Remembers that :data:`CHECKPOINT_SIGNAL` arrived; create it in the main thread of every rank."""

    def __init__(self, signum: int = CHECKPOINT_SIGNAL) -> None:
        self.requested = False
        """This process received the signal."""
        self.requested_anywhere = False
        """:meth:`agreed` returned True: some rank received it."""
        signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def agreed(self, reduce: Optional[Callable[[bool], bool]] = None) -> bool:
        """Whether any rank was asked to stop. Every rank calls it at the same point of the same step, with
        ``reduce`` = :func:`any_rank` when there are several processes (a signal reaches the ranks at
        different moments; stopping on the local flag alone would leave the others waiting in a collective)."""
        found = reduce(self.requested) if reduce is not None else self.requested
        self.requested_anywhere = self.requested_anywhere or found
        return found


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is True on at least one (a MAX all-reduce); ``flag`` without a process
    group."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def requeue_job(
    env: Optional[Mapping[str, str]] = None,
    run: Callable[..., Any] = subprocess.run,
    scontrol: str = "scontrol",
) -> Sequence[str]:
    """``scontrol requeue $SLURM_JOB_ID``: Slurm ends this job and queues it again (it starts on other nodes
    once the drained one is excluded). Call it after the checkpoint is complete, from one rank. Returns the
    command it ran; raises :class:`RuntimeError` outside a Slurm job or when scontrol refuses."""
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID", "")
    if not job:
        raise RuntimeError("requeue_job: SLURM_JOB_ID is not set; it requeues the Slurm job it runs in")
    argv = [scontrol, "requeue", job]
    result = run(argv, capture_output=True, text=True, timeout=REQUEUE_TIMEOUT_S)
    if result.returncode != 0:
        raise RuntimeError("{} failed ({}): {}".format(" ".join(argv), result.returncode, result.stderr.strip()))
    return argv
