"""The few collectives the trainer's side needs, on the trainer's process group (never from the writer)."""

from __future__ import annotations

from typing import Any, List, Sequence


def _device() -> Any:
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def agree_max(values: Sequence[int], distributed: bool) -> List[int]:
    """The element-wise maximum of ``values`` over every rank (``values`` itself in one process)."""
    if not distributed:
        return list(values)
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(list(values), dtype=torch.int64, device=_device())
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return [int(v) for v in tensor.tolist()]


def gather(value: Any, distributed: bool, world: int) -> List[Any]:
    """Every rank's ``value`` (picklable), in rank order."""
    if not distributed:
        return [value]
    import torch.distributed as dist

    found: List[Any] = [None] * world
    dist.all_gather_object(found, value)
    return found
