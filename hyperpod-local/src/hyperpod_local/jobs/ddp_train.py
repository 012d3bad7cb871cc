"""PyTorch DDP training that survives node failures: resumes from the newest complete checkpoint.

The shape of the HyperPod CPU DDP workshop (a linear model on synthetic data, a checkpoint every few
steps), written so that a requeued or auto-resumed job continues where the last complete checkpoint left
off:

* checkpoints are asynchronous and tiered by default (``training_runtime.launch_checkpoint.checkpointer``: the
  launcher's settings, ``launch --sync-checkpoints`` for synchronous ones): every rank stages its state in host
  memory and goes on while a writer process publishes it on the node-local tier, where the node has one, and
  on the shared one (temporary directory, manifest, atomic rename, pointer, the newest ``--keep`` kept), so a
  crash in the middle of a save never leaves a partial checkpoint to load; a restart resumes from the newest
  complete one on any tier every rank can read;
* every batch is a function of the step number, so a resumed run sees the same data it would have seen;
* rank 0 prints one ``step N loss X`` line per step, which is what the fault tests read, and on a resume the
  tier each rank loaded from and its host (``resumed tiers local@node-a,local@node-a,shared@node-b,shared@node-b``);
* on the Spot watcher's signal (``checkpoint.StopRequest``) every rank stops after the same step, saves that
  step and waits for it to be published, and rank 0 requeues the job (``checkpoint.requeue_job``), so a Spot
  reclaim loses no step; on ``SIGTERM`` (scancel, requeue, time limit) every rank waits for the save in flight
  and stops.

Runs under torchrun (``python3 -m training_runtime launch -- ddp_train.py ...``): CPU with gloo, or one
GPU per process with NCCL when CUDA is available.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import signal
import socket
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from training_runtime import checkpoint
from training_runtime.launch_checkpoint import ENDED, SPOT, Stopping, checkpointer


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="train until this many steps are done")
    parser.add_argument("--checkpoint-dir", required=True, help="on shared storage, e.g. /fsx/checkpoints/<run>")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints")
    parser.add_argument("--keep", type=int, default=3, help="complete checkpoints to keep")
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step (slows the tiny model down)")
    return parser.parse_args()


def batch(step: int, rank: int, size: int, features: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The same batch for the same (step, rank) in every incarnation of the job."""
    generator = torch.Generator().manual_seed(step * 1_000_003 + rank)
    x = torch.rand(size, features, generator=generator)
    y = x.sum(dim=1, keepdim=True) * 0.5 + 0.1
    return x.to(device), y.to(device)


def training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What a checkpoint holds; the model's tensors are the parameters themselves (a resume loads into them)."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict()}


def save(ckpt: Any, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, world: int) -> None:
    """Every rank: checkpoint ``step`` (returns once the state is staged, when asynchronous)."""
    ckpt.save(step, training_state(model, optimizer), extra={"world_size": world})


def main() -> None:
    args = arguments()
    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    print(f"[{socket.gethostname()}] rank {rank}/{world} device {device} slurm_restart={restart}", flush=True)

    torch.manual_seed(0)
    model = torch.nn.Linear(args.features, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    ckpt = checkpointer(args.checkpoint_dir, training_state(model, optimizer), keep=args.keep)
    start = 0
    state = training_state(model, optimizer)
    resumed = ckpt.resume(state)
    if resumed is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = resumed + 1
        assert ckpt.resumed is not None
        tiers: list[object] = [None] * world
        dist.all_gather_object(tiers, f"{ckpt.resumed.tier}@{socket.gethostname()}")
        if rank == 0:
            print(f"resumed from {ckpt.resumed.checkpoint.path} at step {start}", flush=True)
            print(f"resumed tiers {','.join(map(str, tiers))}", flush=True)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)

    stopping = Stopping()
    stopped = None
    began = time.monotonic()
    for step in range(start, args.steps):
        x, y = batch(step, rank, args.batch_size, args.features, device)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ckpt.poll()  # a background save that failed raises here, on every rank
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        saved = (step + 1) % args.checkpoint_every == 0 or step + 1 == args.steps
        if saved:
            save(ckpt, step, model, optimizer, world)
        stopped = stopping.check(ckpt, functools.partial(save, ckpt, step, model, optimizer, world), saved)
        if stopped == SPOT and rank == 0:
            print(f"stopping after step {step}: checkpointed on the checkpoint signal", flush=True)
        if stopped is not None:
            break
        if args.step_seconds:
            time.sleep(args.step_seconds)
    ckpt.close()  # waits for the last save to be published on every tier
    dist.barrier()
    # Free what holds the process group (DDP/FSDP modules, DTensors) before destroying it: gloo's threads then
    # stop while Python runs; left to interpreter shutdown they can abort the process after a good run
    # (docs/local-cluster.md, "Job scripts").
    del ddp, model, optimizer
    gc.collect()
    if stopped == SPOT:
        if rank == 0:
            checkpoint.requeue_job()
        dist.destroy_process_group()
        return
    if stopped == ENDED:
        dist.destroy_process_group()
        raise SystemExit(128 + signal.SIGTERM)
    if rank == 0:
        print(f"done {args.steps} steps world={world} in {time.monotonic() - began:.1f}s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
