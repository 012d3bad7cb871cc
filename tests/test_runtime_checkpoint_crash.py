"""SIGKILL at every stage of an asynchronous save leaves a loadable previous checkpoint, and resume is bit-identical.

A trainer process (the script below) saves step 1, then step 2 with a breakpoint at one stage: the process that
reaches it (the trainer for ``staging``, its writer for the others) waits there, and the test SIGKILLs the trainer,
the writer, or both (the node). Then it checks what a restarted job sees: on the shared tier, and through the
local tier when the node survived; each loads bit-identical tensors; and the next save succeeds and clears every
leftover. Retention is 1 on both tiers, so a save that deleted the previous checkpoint too early would show.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from training_runtime import checkpoint
from training_runtime.checkpoint import AsyncCheckpointer

SRC = Path(__file__).resolve().parents[1] / "src"
TRAINER = """
import json, os, sys, torch
from pathlib import Path
from training_runtime.checkpoint import AsyncCheckpointer, Breakpoints, CheckpointError
sys.path.insert(0, sys.argv[5])
from test_runtime_checkpoint_crash import state_for
root, local, points, stage = sys.argv[1], sys.argv[2] or None, Path(sys.argv[3]), sys.argv[4]
ckpt = AsyncCheckpointer(root, local_root=local, keep=1, keep_local=1)
ckpt.save(1, state_for(1))
ckpt.flush()
(points / "pids.json").write_text(json.dumps({"trainer": os.getpid(), "writer": ckpt.writer_pid}))
ckpt.breakpoints = Breakpoints(str(points), (stage,))
ckpt.save(2, state_for(2))
try:
    ckpt.flush()
    print("flushed", flush=True)
except CheckpointError as error:
    print("lost:", error, flush=True)
ckpt.close()
"""
WRITER_STAGES = ("writing", "publishing", "copying", "publishing-shared")
LOCAL_DONE = ("copying", "publishing-shared")
"""Stages at which step 2 is already complete on the local tier."""


def state_for(step: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(step)
    return {
        "model": {"w": torch.randn(256, 64, generator=generator), "b": torch.randn(9, generator=generator).half()},
        "trainer": {"step": step},
    }


def blank() -> dict[str, Any]:
    return {"model": {"w": torch.zeros(256, 64), "b": torch.zeros(9).half()}, "trainer": {"step": 0}}


def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_until(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def resumed_step(root: Path, local: Path | None) -> int:
    """What a restarted job loads (checked bit-identical to what was saved at that step)."""
    target = blank()
    step = AsyncCheckpointer(root, local_root=local).resume(target)
    assert step is not None, "no complete checkpoint left"
    expected = state_for(step)
    assert torch.equal(target["model"]["w"], expected["model"]["w"])
    assert torch.equal(target["model"]["b"], expected["model"]["b"])
    assert target["trainer"] == expected["trainer"]
    return step


def crash(tmp_path: Path, stage: str, victim: str, local: Path | None) -> None:
    root, points = tmp_path / "shared", tmp_path / "points"
    points.mkdir()
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-c", TRAINER, str(root), str(local or ""), str(points), stage, str(Path(__file__).parent)]
    trainer = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: (points / (stage + ".reached")).exists() or trainer.poll() is not None, "no breakpoint")
        assert trainer.poll() is None, trainer.communicate()[0].decode()[-3000:]
        pids = json.loads((points / "pids.json").read_text())
        if victim in ("writer", "node"):
            os.kill(pids["writer"], signal.SIGKILL)
            # dead before anyone goes on: a writer still dying when the trainer hands it the save takes the save
            # with it (reported at flush as lost, never silently), which is another case than "died before it had it"
            wait_until(lambda: gone(pids["writer"]), "the killed writer lives on")
        if victim in ("trainer", "node"):
            trainer.kill()
        (points / (stage + ".go")).touch()  # whoever survived goes on
        output = trainer.communicate(timeout=60)[0].decode()
        wait_until(lambda: gone(pids["writer"]), "the writer outlived its trainer's end")
    finally:
        trainer.kill()
        trainer.wait()
    if victim == "writer" and stage in WRITER_STAGES:
        assert "lost: background save of checkpoint step 2 lost" in output, output[-3000:]


slow = pytest.mark.slow
STAGES = {
    "staging": ("staging", True),
    "writing-local": ("writing", True),
    "publishing-local": ("publishing", True),
    "copying": ("copying", True),
    "publishing-shared": ("publishing-shared", True),
    "writing": ("writing", False),
    "publishing": ("publishing", False),
}
"""Where the kill lands (the case's id -> stage, with a node-local tier)."""
QUICK = {("writing-local", "trainer"), ("publishing", "writer"), ("copying", "node")}
"""One case per victim in ``make test-fast``; the whole matrix (21 cases, about 26 s) is ``slow``: ``make test``."""


@pytest.mark.parametrize(
    ("stage", "tiered", "victim"),
    [
        pytest.param(*STAGES[case], victim, id=f"{case}-{victim}", marks=() if (case, victim) in QUICK else slow)
        for victim in ("trainer", "writer", "node")
        for case in STAGES
    ],
)
def test_sigkill_at_every_stage_leaves_a_loadable_checkpoint(
    tmp_path: Path, stage: str, tiered: bool, victim: str
) -> None:
    local = tmp_path / "nvme" if tiered else None
    crash(tmp_path, stage, victim, local)
    root = tmp_path / "shared"

    # the save goes on when its writer survives it (a trainer killed after staging loses nothing), or when the
    # writer died before it had the save (staging: the trainer starts a new one)
    survived = (victim == "trainer" and stage != "staging") or (victim == "writer" and stage == "staging")
    shared = 2 if survived else 1
    assert resumed_step(root, None) == shared  # a replaced node: the shared tier alone
    if local is not None:
        on_local = 2 if survived or stage in LOCAL_DONE else 1
        assert resumed_step(root, local) == on_local  # the node survived: its local copy when newer

    # the restarted job saves again: it works, and every leftover of the killed save is gone
    restarted = AsyncCheckpointer(root, local_root=local, keep=1, keep_local=1)
    assert restarted.save(3, state_for(3))
    restarted.close()
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_000000003"]
    if local is not None:
        assert sorted(p.name for p in (local / "rank_00000").iterdir()) == ["latest", "step_000000003"]
    assert resumed_step(root, local) == 3
    assert checkpoint.latest(root).step == 3  # type: ignore[union-attr]
