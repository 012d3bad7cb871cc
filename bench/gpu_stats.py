"""The arithmetic and the Markdown of bench/gpu_checks.py (no torch, no subprocesses: unit-tested alone)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

STAGE2 = "launch --on-node"
TORCHRUN = "torchrun --standalone"
THROUGH_SRUN = "launch (stage 1) -> srun shim -> stage 2"
ORDER = (TORCHRUN, STAGE2, THROUGH_SRUN)


def stats(samples: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and count of ``samples``; None figures when there are none."""
    values = [float(v) for v in samples]
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values)}


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``; None when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def launcher_summary(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Per variant: medians of wall time, time to the worker's start and to the first step, and the step time;
    then each variant's median wall and time to first step over plain torchrun's (``ratio_*``) and the difference
    in seconds (``extra_*``). Failed runs (no ``first_step_s``) count only in ``failed``."""
    summary: dict[str, Any] = {}
    for name, records in runs.items():
        good = [r for r in records if r.get("first_step_s") is not None]
        summary[name] = {
            "runs": len(records),
            "failed": len(records) - len(good),
            "wall_s": stats([r["wall_s"] for r in good]),
            "worker_start_s": stats([r["worker_start_s"] for r in good]),
            "first_step_s": stats([r["first_step_s"] for r in good]),
            "step_s": stats([r["step_median_s"] for r in good if r.get("step_median_s") is not None]),
        }
    base = summary.get(TORCHRUN)
    for name, entry in summary.items():
        if base is None or name == TORCHRUN:
            continue
        for key in ("wall_s", "first_step_s", "worker_start_s"):
            mine, theirs = entry[key]["median"], base[key]["median"]
            entry["ratio_" + key] = ratio(mine, theirs)
            entry["extra_" + key] = None if mine is None or theirs is None else mine - theirs
    return summary


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else "{:.{}f}".format(value, digits)


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def markdown(report: Mapping[str, Any]) -> str:
    """The docs-ready summary of a bench/gpu_checks.py report."""
    machine = report["machine"]
    lines = [
        "# GPU checks (bench/gpu_checks.py)",
        "",
        "- Command: `{}`".format(report["command"]),
        "- Date: {} UTC; total {:.0f} s".format(report["date"], report["elapsed_s"]),
        "- Machine: {}; nproc {}; Python {}; torch {} (CUDA {}, {} device(s)); driver {}".format(
            "; ".join(machine["gpus"]) or "no GPU",
            machine["nproc"],
            machine["python"],
            machine["torch"].get("version"),
            machine["torch"].get("cuda"),
            machine["torch"].get("device_count"),
            machine.get("driver") or "-",
        ),
        "- Tools: " + ", ".join("{} {}".format(k, "present" if v else "ABSENT") for k, v in report["tools"].items()),
        "",
        "## Health check (`python3 -m training_runtime health`, fresh process, facts of {})".format(
            report["health"]["instance_type"]
        ),
        "",
    ]
    health = report["health"]
    if health.get("note"):
        lines += [health["note"], ""]
    lines += ["| Command | Runs | Median s | Min s | Exit | Failed checks |", "| --- | --: | --: | --: | --: | --- |"]
    for name, entry in health["commands"].items():
        lines.append(
            "| `{}` | {} | {} | {} | {} | {} |".format(
                name,
                entry["wall_s"]["n"],
                _f(entry["wall_s"]["median"]),
                _f(entry["wall_s"]["min"]),
                entry.get("exit", "-"),
                ", ".join(entry.get("failed") or []) or "none",
            )
        )
    lines += ["", "Each check in-process (median of {} runs, mode prolog):".format(health["check_runs"]), ""]
    lines += ["| Check | Median ms | Status | Detail |", "| --- | --: | --- | --- |"]
    for name, entry in health["checks"].items():
        lines.append(
            "| {} | {} | {} | {} |".format(
                name, _f(entry["ms"]["median"], 1), entry["status"], entry["detail"].replace("|", "/")
            )
        )
    lines += [
        "",
        "All checks together in-process (`run_checks`, parallel threads): median {} ms; DCGM host engine started "
        "for the run: {}.".format(
            _f(health["run_checks_parallel_ms"]["median"], 1), "yes" if health.get("hostengine_started") else "no"
        ),
    ]
    launcher = report["launcher"]
    lines += [
        "",
        "## Launcher against plain torchrun ({} run(s) each, interleaved, {} steps, device {})".format(
            launcher["runs"], launcher["steps"], launcher["device"]
        ),
        "",
        *([launcher["note"], ""] if launcher.get("note") else []),
        "Rendezvous host for the launcher: `{}`. Times from the parent's spawn: worker start = the training "
        "script's first line, first step = its first optimizer step done.".format(launcher["host"]),
        "",
        "| Variant | OK/runs | Wall median s | Worker start s | First step s | Step ms | Wall ratio | Extra s |",
        "| --- | --: | --: | --: | --: | --: | --: | --: |",
    ]
    summary = launcher["summary"]
    order = [n for n in ORDER if n in summary] + [n for n in summary if n not in ORDER]
    for name in order:
        entry = summary[name]
        step = entry["step_s"]["median"]
        lines.append(
            "| {} | {}/{} | {} | {} | {} | {} | {} | {} |".format(
                name,
                entry["runs"] - entry["failed"],
                entry["runs"],
                _f(entry["wall_s"]["median"]),
                _f(entry["worker_start_s"]["median"]),
                _f(entry["first_step_s"]["median"]),
                _f(None if step is None else step * 1000, 2),
                _x(entry.get("ratio_wall_s")),
                _f(entry.get("extra_wall_s")),
            )
        )
    for name in launcher["summary"]:
        failures = [r for r in [launcher.get("warmup", {}).get(name), *launcher.get("samples", {}).get(name, [])] if r]
        failed = [r for r in failures if r.get("first_step_s") is None]
        if failed:
            tail = failed[0].get("error_line") or " ".join(str(failed[0].get("error", "")).split())[-400:]
            lines += ["", "{} failed (exit {}): `{}`".format(name, failed[0].get("exit"), tail.replace("`", "'"))]
    dry = launcher["dry_run"]
    lines += [
        "",
        "Stage 1 alone (`launch --dry-run`, fresh process): median {} s, min {} s; `python -c pass` {} s.".format(
            _f(dry["wall_s"]["median"]), _f(dry["wall_s"]["min"]), _f(dry["bare_python_s"]["median"])
        ),
        "",
        "## Metrics",
        "",
    ]
    metrics = report["metrics"]
    jobs = metrics["gpu_jobs"]
    lines.append(
        "- GPU-to-job mapping (`metrics.gpu_jobs --prolog` / `--epilog`): median {} s / {} s; prolog wrote {}, "
        "epilog left {}".format(
            _f(jobs["prolog_s"]["median"]),
            _f(jobs["epilog_s"]["median"]),
            jobs["after_prolog"],
            jobs["after_epilog"],
        )
    )
    for line in metrics["notes"]:
        lines.append("- " + line)
    return "\n".join(lines) + "\n"
