"""Shared pieces of the AsyncCheckpointer tests: a state with every dtype and shape that needs care, and a fixture
that closes (stops the writers of) every checkpointer a test makes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from training_runtime.checkpoint import AsyncCheckpointer, CheckpointError


def state_for(step: int) -> dict[str, Any]:
    """Every dtype and shape that needs care: bf16, bool, int, 0-dim, empty, non-contiguous, nested containers."""
    generator = torch.Generator().manual_seed(step)
    wide = torch.randn(8, 6, generator=generator)
    return {
        "model": {
            "w": torch.randn(64, 32, generator=generator),
            "half": torch.randn(7, generator=generator).to(torch.bfloat16),
            "mask": torch.rand(5, generator=generator) > 0.5,
            "count": torch.tensor(step, dtype=torch.int64),
            "empty": torch.zeros(0, 3),
            "strided": wide.t(),
        },
        "optim": {"state": {0: {"exp_avg": torch.randn(3, generator=generator)}}, "param_groups": [{"lr": 0.1 * step}]},
        "trainer": {"step": step, "names": ("a", "b")},
    }


def blank() -> dict[str, Any]:
    return {
        "model": {
            "w": torch.zeros(64, 32),
            "half": torch.zeros(7, dtype=torch.bfloat16),
            "mask": torch.zeros(5, dtype=torch.bool),
            "count": torch.tensor(0, dtype=torch.int64),
            "empty": torch.zeros(0, 3),
            "strided": torch.zeros(6, 8).t().t(),
        },
        "optim": {"state": {}, "param_groups": [{"lr": 0.0}]},
        "trainer": {"step": 0, "names": ()},
    }


def assert_same(loaded: dict[str, Any], step: int) -> None:
    """Bit-identical: torch.equal on every tensor (and the same dtype), equal plain values."""
    expected = state_for(step)
    for name, tensor in expected["model"].items():
        assert loaded["model"][name].dtype == tensor.dtype, name
        assert torch.equal(loaded["model"][name], tensor), name
    assert torch.equal(loaded["optim"]["state"][0]["exp_avg"], expected["optim"]["state"][0]["exp_avg"])
    assert loaded["optim"]["param_groups"] == expected["optim"]["param_groups"]
    assert loaded["trainer"] == expected["trainer"]


@pytest.fixture(name="made")
def made_fixture(tmp_path: Path) -> Iterator[list[AsyncCheckpointer]]:
    """Checkpointers a test makes; closed (writers stopped) at the end whatever happened, a failed test's held
    breakpoints released first."""
    made: list[AsyncCheckpointer] = []
    yield made
    for ckpt in made:
        points = ckpt.breakpoints
        for stage in points.stages if points is not None else ():
            released(Path(points.directory), stage)
        with contextlib.suppress(CheckpointError):
            ckpt.close(timeout=30)


def checkpointer(made: list[AsyncCheckpointer], root: Path, **kwargs: Any) -> AsyncCheckpointer:
    ckpt = AsyncCheckpointer(root, **kwargs)
    made.append(ckpt)
    return ckpt


def released(directory: Path, stage: str) -> None:
    (directory / (stage + ".go")).touch()


def wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.005)
