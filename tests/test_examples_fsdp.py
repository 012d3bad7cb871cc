"""The FSDP pretraining example trains on two CPU ranks, checkpoints, and resumes exactly where it stopped.

Three torchrun runs of the tiny preset (gloo, CPU): 4 steps, then the same job continued to 7 steps from its
checkpoint, then 7 steps in one go. The continued run must print the same losses as the uninterrupted one:
the model, optimizer and data-loader position all came back from the checkpoint.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from training_runtime import checkpoint

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "jobs" / "fsdp_pretrain.py"
STEP_LINE = re.compile(r"^step (\d+) loss (\d+\.\d{4})$")


@pytest.fixture
def train() -> Callable[[Path, int], list[str]]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }

    def run(checkpoint_dir: Path, steps: int) -> list[str]:
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
def test_fsdp_pretraining_resumes_from_its_checkpoint(tmp_path: Path, train: Callable[[Path, int], list[str]]) -> None:
    directory = tmp_path / "ckpt"

    first = train(directory, 4)
    assert list(losses(first)) == [1, 2, 3, 4]
    assert not any(line.startswith("resumed from") for line in first)
    assert first[-1] == "done 4 steps world=2"
    assert [c.step for c in checkpoint.complete_checkpoints(directory)] == [2, 4]

    second = train(directory, 7)
    resumed = [line for line in second if line.startswith("resumed from")]
    assert resumed == [f"resumed from {directory / 'step_000000004'} at step 5"]
    assert list(losses(second)) == [5, 6, 7]
    assert second[-1] == "done 7 steps world=2"

    final = checkpoint.latest(directory)
    assert final is not None and final.step == 7
    assert final.manifest["kind"] == "dcp" and final.manifest["world_size"] == 2
    assert final.manifest["extra"]["model_size"] == "tiny"
    assert [c.step for c in checkpoint.complete_checkpoints(directory)] == [6, 7]
    assert sorted(p.name for p in directory.iterdir()) == ["latest", "step_000000006", "step_000000007"]

    uninterrupted = losses(train(tmp_path / "reference", 7))
    assert uninterrupted == {**losses(first), **losses(second)}
    assert float(uninterrupted[7]) < float(uninterrupted[1])
