"""A few steps of DDP on CPUs (gloo) for ``cpu_ddp.sbatch``: every rank trains a small model on its own data,
DDP averages the gradients, and rank 0 reports whether every rank ended with the same weights."""

from __future__ import annotations

import argparse
import gc
import socket
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights everywhere; DDP keeps them equal from then on
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1000 + rank)  # different data on every rank
    for _ in range(args.steps):
        loss = model(torch.randn(16, 8, generator=data)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = [torch.zeros_like(weights) for _ in range(world)]
    dist.all_gather(every, weights)
    hosts: list[object] = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    in_sync = all(torch.equal(every[0], w) for w in every)
    if rank == 0:
        print(
            f"cpu-ddp: world_size={world} nodes={len(set(hosts))} steps={args.steps} weights_in_sync={in_sync}",
            flush=True,
        )
    dist.barrier()  # every rank done with the group before any tears it down
    # Free what holds the process group (DDP/FSDP modules, DTensors) before destroying it: gloo's threads then
    # stop while Python runs; left to interpreter shutdown they can abort the process after a good run
    # (docs/local-cluster.md, "Job scripts").
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()
    return 0 if in_sync else 1


if __name__ == "__main__":
    sys.exit(main())
