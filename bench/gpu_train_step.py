"""A tiny DDP training loop for bench/gpu_checks.py: run it under torchrun (directly or through the launcher).

``torchrun --standalone --nproc-per-node=1 bench/gpu_train_step.py [--steps N] [--device auto|cuda|cpu]``

An MLP, DistributedDataParallel with NCCL on CUDA (gloo on CPU), ``--steps`` optimizer steps on random data. Rank 0
prints one line ``GPU_TRAIN_STEP {json}``: the wall-clock (epoch) times at which the script started, the process
group was up and the first step finished, and the per-step times after the first (CUDA synchronised each step).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

STARTED = time.time()  # before torch is imported: the import is part of the time to the first step

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

MARKER = "GPU_TRAIN_STEP "


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend="nccl" if cuda else "gloo")
    group_up = time.time()
    width = args.width
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 10),
    ).to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    inputs = torch.randn(args.batch, width, device=device)
    labels = torch.randint(0, 10, (args.batch,), device=device)
    step_times = []
    first_step = 0.0
    for step in range(args.steps):
        begin = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(ddp(inputs), labels)
        loss.backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize(device)
        if step == 0:
            first_step = time.time()
        else:
            step_times.append(time.perf_counter() - begin)
    if dist.get_rank() == 0:
        record = {
            "started": STARTED,
            "group_up": group_up,
            "first_step": first_step,
            "steps": args.steps,
            "step_median_s": statistics.median(step_times) if step_times else None,
            "device": str(device),
            "backend": dist.get_backend(),
            "world_size": dist.get_world_size(),
            "loss": float(loss.item()),
            "torchelastic_run_id": os.environ.get("TORCHELASTIC_RUN_ID", ""),
            "master": "{}:{}".format(os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")),
        }
        print(MARKER + json.dumps(record, sort_keys=True), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
