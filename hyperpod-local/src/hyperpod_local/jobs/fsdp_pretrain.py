"""Pretrain a decoder-only transformer language model with FSDP2, checkpointing to shared storage and resuming.

Run under torchrun (``fsdp.sbatch`` does it through ``python3 -m training_runtime launch``)::

    torchrun --standalone --nproc-per-node=2 examples/jobs/fsdp_pretrain.py --model-size tiny --steps 20 \\
        --checkpoint-dir /fsx/checkpoints/demo --checkpoint-every 5

Steps are numbered from 1. A checkpoint named step N holds the state after step N, so a restarted job prints
``resumed from <dir> at step N+1`` and continues with step N+1. The data is synthetic: token sequences drawn
from a fixed random bigram table, so the loss falls; batch ``i`` of rank ``r`` is a pure function of
(seed, i, r), which makes the data-loader position a single number saved with the checkpoint.

Checkpoints are asynchronous and tiered by default (``training_runtime.launch_checkpoint.checkpointer``, the
launcher's settings; ``launch --sync-checkpoints`` for synchronous ones): every rank stages its shard of the model
and optimizer in host memory and trains on while a writer process publishes it, on the node-local tier first where
the node has one. A resume needs the world size that saved (the shards are the ranks' own). On the Spot watcher's
signal every rank saves the step it is at, waits for it to be published, and rank 0 requeues the job; on
``SIGTERM`` every rank waits for the save in flight and stops.

On GPUs (``cuda`` available) each rank uses ``cuda:$LOCAL_RANK`` with NCCL and bf16 compute; elsewhere it runs on
CPU with gloo. The model is built in full on every rank before sharding: the ``1b`` preset needs about 5 GiB of
host memory per rank for a moment.
"""

from __future__ import annotations

import argparse
import functools
import gc
import math
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from training_runtime import checkpoint
from training_runtime.launch_checkpoint import SPOT, Stopping, checkpointer


@dataclass(frozen=True)
class Preset:
    layers: int
    d_model: int
    heads: int
    vocab: int
    seq_len: int
    batch: int  # sequences per rank per step
    lr: float
    warmup: int  # steps of linear warm-up before the cosine decay


PRESETS = {
    "tiny": Preset(layers=2, d_model=64, heads=4, vocab=256, seq_len=32, batch=8, lr=3e-3, warmup=2),
    "small": Preset(layers=12, d_model=768, heads=12, vocab=32000, seq_len=1024, batch=8, lr=6e-4, warmup=100),
    "1b": Preset(layers=24, d_model=2048, heads=16, vocab=32000, seq_len=2048, batch=4, lr=3e-4, warmup=200),
}
SUCCESSORS = 4  # each token of the synthetic language has this many equally likely successors


class Block(nn.Module):  # type: ignore[misc]  # torch is Any to mypy (follow_imports = "skip")
    """Pre-norm transformer block: causal self-attention and a GELU MLP."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model, bias=False), nn.GELU(), nn.Linear(4 * d_model, d_model, bias=False)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, seq, width))
        return x + self.mlp(self.norm2(x))


class LanguageModel(nn.Module):  # type: ignore[misc]
    def __init__(self, preset: Preset) -> None:
        super().__init__()
        self.embed = nn.Embedding(preset.vocab, preset.d_model)
        self.position = nn.Embedding(preset.seq_len, preset.d_model)
        self.blocks = nn.ModuleList(Block(preset.d_model, preset.heads) for _ in range(preset.layers))
        self.norm = nn.LayerNorm(preset.d_model)
        self.head = nn.Linear(preset.d_model, preset.vocab, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class SyntheticTokens:
    """Batches from a seeded bigram language; ``batch(i)`` is the same on every run for a given rank and seed."""

    def __init__(self, preset: Preset, seed: int, rank: int) -> None:
        self.preset, self.seed, self.rank = preset, seed, rank
        table = torch.Generator().manual_seed(seed)
        self.successors = torch.randint(preset.vocab, (preset.vocab, SUCCESSORS), generator=table)

    def batch(self, index: int) -> torch.Tensor:
        """``batch`` sequences of ``seq_len + 1`` tokens: inputs and the targets shifted by one."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index * 4099 + self.rank)
        rows, length = self.preset.batch, self.preset.seq_len + 1
        choices = torch.randint(SUCCESSORS, (rows, length), generator=generator)
        tokens = torch.empty(rows, length, dtype=torch.long)
        tokens[:, 0] = torch.randint(self.preset.vocab, (rows,), generator=generator)
        for position in range(1, length):
            tokens[:, position] = self.successors[tokens[:, position - 1], choices[:, position]]
        return tokens


def learning_rate(step: int, decay_steps: int, preset: Preset, peak: float) -> float:
    """Linear warm-up to ``peak``, then cosine decay to a tenth of it at ``decay_steps`` (and flat after)."""
    if step <= preset.warmup:
        return peak * step / preset.warmup
    progress = (step - preset.warmup) / max(1, decay_steps - preset.warmup)
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, progress))))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-size", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--steps", type=int, default=100, help="train until this step (a resumed run continues)")
    parser.add_argument("--checkpoint-dir", help="shared directory for checkpoints; none: no checkpoints")
    parser.add_argument("--checkpoint-every", type=int, default=50, help="save after every N-th step and the last")
    parser.add_argument("--keep", type=int, default=3, help="complete checkpoints to keep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, help="peak learning rate (default: the preset's)")
    parser.add_argument("--decay-steps", type=int, help="end of the cosine decay (default: --steps)")
    parser.add_argument("--grad-clip", type=float, default=1.0, help="clip the global gradient norm to this")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.checkpoint_every < 1 or args.keep < 1:
        parser.error("--steps, --checkpoint-every and --keep must be >= 1")
    return args


def setup() -> tuple[torch.device, int, int]:
    """Join the process group torchrun describes (or a one-process one); return (device, rank, world)."""
    for name, default in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500"), ("RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(name, default)
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device, dist.get_rank(), dist.get_world_size()


def training_state(model: nn.Module, optimizer: torch.optim.Optimizer, step: int, position: int) -> dict[str, Any]:
    """What a checkpoint holds: sharded model and optimizer state, the step and the data-loader position."""
    model_state, optimizer_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optim": optimizer_state, "trainer": {"step": step, "data_position": position}}


def save_step(
    ckpt: checkpoint.AsyncCheckpointer,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    step: int,
    position: int,
    extra: dict[str, Any],
) -> None:
    """Every rank: checkpoint the state after ``step`` (returns once it is staged, when asynchronous)."""
    ckpt.save(step, training_state(model, optimizer, step, position), extra=extra)


def resume(
    ckpt: checkpoint.AsyncCheckpointer, model: nn.Module, optimizer: torch.optim.Optimizer, size: str
) -> tuple[int, int, str]:
    """Load the newest complete checkpoint every rank can read, from the nearest tier: (last step done, batches
    consumed, its path); (0, 0, "") if none."""
    state = training_state(model, optimizer, 0, 0)
    if ckpt.resume(state) is None or ckpt.resumed is None:
        return 0, 0, ""
    found = ckpt.resumed.checkpoint
    saved_size = ckpt.resumed.extra.get("model_size")
    if saved_size != size:
        raise SystemExit(
            f"{found.path} holds a {saved_size!r} model, this run trains {size!r}. "
            "Fix: pass the same --model-size, or another --checkpoint-dir"
        )
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(state["trainer"]["step"]), int(state["trainer"]["data_position"]), str(found.path)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    preset = PRESETS[args.model_size]
    device, rank, world = setup()
    torch.manual_seed(args.seed)  # the same initial weights on every rank and every run
    model = LanguageModel(preset)
    parameters = sum(p.numel() for p in model.parameters())
    mesh = init_device_mesh(device.type, (world,))
    precision = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16 if device.type == "cuda" else None, reduce_dtype=torch.float32
    )
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=precision)
    fully_shard(model, mesh=mesh, mp_policy=precision)
    peak = args.lr if args.lr is not None else preset.lr
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak, betas=(0.9, 0.95), weight_decay=0.1)

    done, position = 0, 0
    ckpt = None
    if args.checkpoint_dir:
        ckpt = checkpointer(args.checkpoint_dir, training_state(model, optimizer, 0, 0), keep=args.keep)
        done, position, path = resume(ckpt, model, optimizer, args.model_size)
        if path and rank == 0:
            print(f"resumed from {path} at step {done + 1}", flush=True)
    if rank == 0:
        print(f"model {args.model_size} parameters {parameters} world {world} device {device.type}", flush=True)

    data = SyntheticTokens(preset, args.seed, rank)
    stopping, stopped = Stopping(), None
    save: Any = None
    for step in range(done + 1, args.steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.decay_steps or args.steps, preset, peak)
        position += 1
        tokens = data.batch(position).to(device, non_blocking=True)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, preset.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        reported = loss.detach().clone()
        dist.all_reduce(reported)  # gloo has no AVG
        if rank == 0:
            print(f"step {step} loss {reported.item() / world:.4f}", flush=True)
        if ckpt is None:
            continue
        ckpt.poll()  # a background save that failed raises here, on every rank
        saved = step % args.checkpoint_every == 0 or step == args.steps
        extra = {
            "model_size": args.model_size,
            "seed": args.seed,
            "tokens_per_step": preset.batch * preset.seq_len * world,
        }
        save = functools.partial(save_step, ckpt, model, optimizer, step, position, extra)
        if saved:
            save()
        stopped = stopping.check(ckpt, save, saved)
        if stopped is not None:
            break
    save = None  # it holds the model
    if ckpt is not None:
        ckpt.close()  # waits for the last save to be published on every tier
    if stopped == SPOT and rank == 0:
        print(f"stopping after step {step}: checkpointed on the checkpoint signal", flush=True)
        checkpoint.requeue_job()
    if stopped is not None:
        dist.barrier()
        del model, optimizer, mesh
        gc.collect()
        dist.destroy_process_group()
        return 0 if stopped == SPOT else 128 + signal.SIGTERM
    if rank == 0:
        print(f"done {args.steps} steps world={world}", flush=True)
    dist.barrier()
    # Free what holds the process group (DDP/FSDP modules, DTensors) before destroying it: gloo's threads then
    # stop while Python runs; left to interpreter shutdown they can abort the process after a good run
    # (docs/local-cluster.md, "Job scripts").
    del model, optimizer, mesh
    gc.collect()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
