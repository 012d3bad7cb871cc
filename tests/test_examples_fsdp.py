"""The FSDP pretraining example trains on two CPU ranks, checkpoints, and resumes exactly where it stopped.

Three torchrun runs of the tiny preset (gloo, CPU): 4 steps, then the same job continued to 7 steps from its
checkpoint, both with the launcher's defaults (asynchronous checkpoints with a node-local tier), then 7 steps in one
go with synchronous checkpoints (``HYPERPOD_CDK_CHECKPOINT=sync``, what ``launch --sync-checkpoints`` exports). The
continued run must print the same losses as the uninterrupted one: the model, optimizer and data-loader position all
came back from the checkpoint.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from training_runtime import checkpoint, launch_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "jobs" / "fsdp_pretrain.py"
STEP_LINE = re.compile(r"^step (\d+) loss (\d+\.\d{4})$")


Train = Callable[..., list[str]]


@pytest.fixture
def train() -> Train:
    base = {name: value for name, value in os.environ.items() if not name.startswith("HYPERPOD_CDK_CHECKPOINT")}
    base.update(PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")

    def run(checkpoint_dir: Path, steps: int, **settings: str) -> list[str]:
        env = {**base, **settings}
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            str(SCRIPT),
            "--model-size=tiny",
            f"--steps={steps}",
            "--decay-steps=7",
            f"--checkpoint-dir={checkpoint_dir}",
            "--checkpoint-every=2",
            "--keep=2",
        ]
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout.splitlines()

    return run


def losses(lines: list[str]) -> dict[int, str]:
    found = [STEP_LINE.match(line) for line in lines]
    return {int(m.group(1)): m.group(2) for m in found if m}


@pytest.mark.slow  # handed out first (tests/conftest.py)
def test_fsdp_pretraining_resumes_from_its_checkpoint(tmp_path: Path, train: Train) -> None:
    directory, parent = tmp_path / "ckpt", tmp_path / "instance-store"
    parent.mkdir()
    local = launch_checkpoint.local_root(str(directory), str(parent), os.getuid())
    tiered = {launch_checkpoint.LOCAL_VARIABLE: str(parent)}  # as the launcher exports it on an instance store

    first = train(directory, 4, **tiered)
    assert list(losses(first)) == [1, 2, 3, 4]
    assert not any(line.startswith("resumed from") for line in first)
    assert first[-1] == "done 4 steps world=2"
    assert [c.step for c in checkpoint.complete_checkpoints(directory)] == [2, 4]
    # The default is asynchronous and tiered: every rank published its shard on the node-local tier too.
    for rank in (0, 1):
        assert [c.step for c in checkpoint.complete_checkpoints(local / f"rank_{rank:05d}")] == [2, 4]

    second = train(directory, 7, **tiered)
    resumed = [line for line in second if line.startswith("resumed from")]
    assert resumed == [f"resumed from {local / 'rank_00000' / 'step_000000004'} at step 5"]  # the nearest tier
    assert list(losses(second)) == [5, 6, 7]
    assert second[-1] == "done 7 steps world=2"

    final = checkpoint.latest(directory)
    assert final is not None and final.step == 7
    assert final.manifest["kind"] == checkpoint.SHARDS and final.manifest["world_size"] == 2
    assert final.manifest["extra"]["model_size"] == "tiny"
    assert [c.step for c in checkpoint.complete_checkpoints(directory)] == [6, 7]
    assert sorted(p.name for p in directory.iterdir()) == ["latest", "step_000000006", "step_000000007"]

    reference = tmp_path / "reference"
    uninterrupted = losses(train(reference, 7, **tiered, HYPERPOD_CDK_CHECKPOINT="sync"))
    assert uninterrupted == {**losses(first), **losses(second)}
    assert float(uninterrupted[7]) < float(uninterrupted[1])
    # Synchronous: the shared tier only, written by the trainer.
    assert [c.step for c in checkpoint.complete_checkpoints(reference)] == [6, 7]
    assert not launch_checkpoint.local_root(str(reference), str(parent), os.getuid()).joinpath("rank_00000").exists()
