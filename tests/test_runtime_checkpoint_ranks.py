"""AsyncCheckpointer on two gloo ranks (two processes, torch.distributed over tcp://127.0.0.1), each rank with its
own node-local directory as two nodes would have: a DTensor sharded over the ranks, a rank's own tensor and a
replicated one; save, resume bit-identical, and resume after one node's local tier is lost."""

from __future__ import annotations

import gc
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
import torch

from training_runtime import checkpoint
from training_runtime.checkpoint import AsyncCheckpointer


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def rank_state(step: int, rank: int, mesh: Any, zeros: bool = False) -> dict[str, Any]:
    from torch.distributed.tensor import Shard, distribute_tensor

    full = torch.arange(64.0).reshape(8, 8) * step
    own = torch.full((3,), float(10 * step + rank))
    if zeros:
        full, own = torch.zeros(8, 8), torch.zeros(3)
    return {
        "model": {"w": distribute_tensor(full, mesh, [Shard(0)]), "bias": torch.ones(4) * (0 if zeros else step)},
        "rank_only": own,
        "trainer": {"step": 0 if zeros else step},
    }


def assert_resumed(state: dict[str, Any], step: int, rank: int) -> None:
    full = torch.arange(64.0).reshape(8, 8) * step
    assert torch.equal(state["model"]["w"].to_local(), full[rank * 4 : rank * 4 + 4])
    assert torch.equal(state["model"]["bias"], torch.ones(4) * step)
    assert torch.equal(state["rank_only"], torch.full((3,), float(10 * step + rank)))
    assert state["trainer"] == {"step": step}


def checks(rank: int, world: int, root: Path, local_roots: list[Path]) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (world,))
    local = local_roots[rank]  # each rank's "node"
    ckpt = AsyncCheckpointer(root, local_root=local, keep=3, keep_local=2)
    for step in (1, 2):
        assert ckpt.save(step, rank_state(step, rank, mesh), extra={"data_position": step * 8})
    ckpt.flush()
    dist.barrier()  # rank 0's flush means published; the others' means their shard is in
    found = checkpoint.latest(root)
    assert found is not None and found.step == 2
    manifest = found.manifest
    assert manifest["ranks"] == [0, 1] and manifest["world_size"] == 2
    assert {"shard_00000.bin", "shard_00001.bin", "shard_00000.idx", "shard_00001.idx"} <= set(manifest["files"])
    assert set(manifest["local_copies"]) == {"0", "1"}

    fresh = rank_state(0, rank, mesh, zeros=True)
    assert AsyncCheckpointer(root, local_root=local).resume(fresh) == 2
    assert_resumed(fresh, 2, rank)

    # step 3 is on both nodes' local tiers but never reached the shared one (its publish "did not happen")
    assert ckpt.save(3, rank_state(3, rank, mesh))
    ckpt.flush()
    dist.barrier()
    if rank == 0:
        shutil.rmtree(root / "step_000000003")
    dist.barrier()
    again = AsyncCheckpointer(root, local_root=local)
    fresh = rank_state(0, rank, mesh, zeros=True)
    assert again.resume(fresh) == 3  # both nodes survived: their local copies
    assert again.resumed is not None and again.resumed.tier == "local"
    assert again.resumed.extra == {}
    assert_resumed(fresh, 3, rank)

    # rank 1's node is replaced: its instance store is empty; step 3 is no longer everywhere, step 2 is
    dist.barrier()
    if rank == 1:
        shutil.rmtree(local)
    dist.barrier()
    replaced = AsyncCheckpointer(root, local_root=local)
    fresh = rank_state(0, rank, mesh, zeros=True)
    assert replaced.resume(fresh) == 2
    assert replaced.resumed is not None
    assert replaced.resumed.tier == ("local" if rank == 0 else "shared")
    assert replaced.resumed.extra == {"data_position": 16}
    assert_resumed(fresh, 2, rank)
    ckpt.close()
    dist.barrier()


def worker(rank: int, world: int, port: int, root: str, local_roots: list[str]) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        checks(rank, world, Path(root), [Path(p) for p in local_roots])
    finally:
        gc.collect()  # the DTensors and mesh go before the process group (see test_runtime_checkpoint.py)
        dist.destroy_process_group()


@pytest.mark.slow  # 5 s or more: make test, not make test-fast
def test_two_ranks_save_and_resume_over_both_tiers(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    root = tmp_path / "shared"
    nodes = [str(tmp_path / "node0" / "nvme"), str(tmp_path / "node1" / "nvme")]
    mp.spawn(worker, args=(2, free_port(), str(root), nodes), nprocs=2, join=True)
    # the shared tier's newest is whole: one process reads both shards' manifest
    found = checkpoint.latest(root)
    assert found is not None and found.step == 2
