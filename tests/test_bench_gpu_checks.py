"""bench/gpu_checks.py's own logic: the launcher summary's arithmetic, the stand-in srun, and that the node it
fakes is one the runtime reads as a HyperPod GPU node (else the health timings would time a skipped check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import gpu_checks  # noqa: E402
from gpu_stats import STAGE2, TORCHRUN, launcher_summary, markdown  # noqa: E402
from training_runtime.health import main as health_main  # noqa: E402


def _run(wall: float, first: float | None, start: float = 1.0) -> dict[str, float | None]:
    return {"wall_s": wall, "first_step_s": first, "worker_start_s": start, "step_median_s": 0.01}


def test_launcher_summary_ratios_are_medians_over_plain_torchrun_and_skip_failed_runs() -> None:
    runs = {
        TORCHRUN: [_run(2.0, 1.5), _run(4.0, 2.5), _run(3.0, 2.0)],
        STAGE2: [_run(3.3, 2.2), _run(4.5, 3.0, 1.5), _run(3.6, 2.4, 1.2), _run(99.0, None)],
    }
    summary = launcher_summary(runs)
    stage2 = summary[STAGE2]
    assert (stage2["runs"], stage2["failed"]) == (4, 1)
    assert stage2["wall_s"]["median"] == 3.6  # the failed run's 99 s is not a sample
    assert stage2["ratio_wall_s"] == pytest.approx(3.6 / 3.0)
    assert stage2["extra_wall_s"] == pytest.approx(0.6)
    assert stage2["ratio_first_step_s"] == pytest.approx(2.4 / 2.0)
    assert stage2["extra_worker_start_s"] == pytest.approx(0.2)
    assert "ratio_wall_s" not in summary[TORCHRUN]


def test_launcher_summary_without_a_good_baseline_run_gives_no_ratio() -> None:
    summary = launcher_summary({TORCHRUN: [_run(2.0, None)], STAGE2: [_run(3.0, 2.0)]})
    assert summary[STAGE2]["ratio_wall_s"] is None
    assert summary[STAGE2]["extra_wall_s"] is None


def test_srun_stand_in_drops_the_options_and_execs_the_step_command(tmp_path: Path) -> None:
    shim = tmp_path / "srun"
    shim.write_text(gpu_checks.SRUN_SHIM)
    shim.chmod(0o755)
    argv = [str(shim), "--auto-resume=1", "--nodes=1", "--export=ALL", "echo", "step", "--on-node", "--", "x"]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert done.stdout == "step --on-node -- x\n"


def test_the_faked_node_is_a_hyperpod_gpu_node_to_the_health_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The smallest one-GPU type without EFA in the hardware table (EC2's facts: g4dn.xlarge, 4 vCPUs, one T4).
    assert gpu_checks.instance_type_for(1) == ("ml.g4dn.xlarge", "")
    instance_type, note = gpu_checks.instance_type_for(0)
    assert instance_type == "ml.g5.xlarge" and note.startswith("MISMATCH")
    root = tmp_path / "root"
    gpu_checks.build_root(root, "ml.g5.xlarge")
    assert health_main(["--report", "--json", "--root", str(root)]) in (0, 1)
    results = {r["name"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert results["gpu"]["status"] != "skipped"  # the facts say one GPU
    assert results["efa"]["status"] == "skipped"
    assert results["shared-storage"]["status"] == "ok"
    assert results["shared-storage"]["detail"] == "/fsx mounted and writable"  # HyperPod: a mount point is required
    assert results["disk"]["status"] == "ok"


def test_markdown_renders_a_report_with_absent_tools() -> None:
    stats = {"n": 1, "median": 1.0, "min": 1.0, "max": 1.0}
    summary = launcher_summary({TORCHRUN: [_run(2.0, 1.0)], STAGE2: [_run(3.0, 1.5)]})
    report = {
        "command": "python3 bench/gpu_checks.py --out x",
        "date": "2026-11-26 01:00",  # a report's field, only printed
        "elapsed_s": 10.0,
        "machine": {"gpus": [], "nproc": 2, "python": "3.12", "torch": {"version": "2.11"}, "driver": ""},
        "tools": {"nvidia-smi": None, "torchrun": "/usr/bin/torchrun"},
        "health": {
            "instance_type": "ml.g5.xlarge",
            "check_runs": 1,
            "commands": {"health --prolog": {"wall_s": stats, "exit": 1, "failed": ["gpu"]}},
            "checks": {"gpu": {"ms": stats, "status": "failed", "detail": "a|b"}},
            "run_checks_parallel_ms": stats,
        },
        "launcher": {
            "runs": 1,
            "steps": 5,
            "device": "cpu",
            "host": "vm",
            "summary": summary,
            "dry_run": {"wall_s": stats, "bare_python_s": stats},
        },
        "metrics": {
            "gpu_jobs": {"prolog_s": stats, "epilog_s": stats, "after_prolog": {"0": "4242"}, "after_epilog": {}},
            "notes": ["nvidia-smi ABSENT"],
        },
    }
    text = markdown(report)
    assert "nvidia-smi ABSENT" in text
    assert "| launch --on-node | 1/1 | 3.000 | 1.000 | 1.500 | 10.00 | 1.50x | 1.000 |" in text
    assert "| gpu | 1.0 | failed | a/b |" in text
