"""Asynchronous against synchronous checkpoints on this machine: two gloo ranks, the trainer's time blocked per save,
the background write's throughput against ``dd`` of the same bytes, and the steps a crash loses with and without the
node-local tier. Timings are reported, never asserted.

Run in the repository root: ``.venv/bin/python bench/async_checkpoint.py [--sizes-gb 1 4] [--dir DIR]``. And
``bench/async_checkpoint.py job --mode async|sync --dir DIR``: a whole job (40 steps of 0.25 s, a save of 1 GB per rank
every 5), for a whole-process timer to compare the two modes.

* **Blocked per save.** Each rank holds ``SIZE`` GB of float32 state (decimal GB) and saves it ``--saves`` times
  with ``AsyncCheckpointer(asynchronous=False)`` (the trainer writes and publishes), then with the default
  asynchronous one (the trainer stages into its reused host buffers; the writer process writes and publishes). Both
  to ``DIR`` only (no node-local tier), so both write the same bytes to the same file system. The first
  asynchronous save allocates the buffers: the figures are the median of the later saves, the first shown apart.
* **Background write against dd.** The time from an asynchronous save's start until it is published on every rank
  (rank 0's writer publishes once both shards are in) gives the write throughput of both ranks' bytes together;
  right after, ``dd if=/dev/zero of=DIR/dd.bin bs=64M count=N conv=fsync`` writes the same number of bytes to the
  same file system (the writer fsyncs every file too).
* **Steps lost to a crash.** Two ranks of ``--crash-gb`` GB (default 1) save every step (``policy="skip"``: a save
  while one is in flight is skipped) with 0.25 s steps; after ``--crash-after`` seconds every process of the job,
  writers included, is SIGKILLed, as a node crash does. Then the job resumes (every rank,
  ``AsyncCheckpointer.resume``) and the steps lost are the last step logged minus the step it resumed from. Three
  cases: no local tier (the writer writes the shared directory), a local tier on a node that survived, and the same
  crash with rank 1's local tier deleted (its node replaced). Here both tiers are on the same disk, so the local
  tier's gain is only the lag of the copy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GB = 10**9
STEP_S = 0.25


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_ranks(args: list[str], *, timeout: float | None = None, kill_after: float | None = None) -> int:
    """Two rank processes of ``bench/async_checkpoint.py rank ARGS`` in a new process group; with ``kill_after``,
    SIGKILL the whole group (ranks and their writers) after that many seconds."""
    port = free_port()
    launcher = [sys.executable, __file__, "ranks", str(port), *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    process = subprocess.Popen(launcher, env=env, start_new_session=True)
    try:
        return process.wait(timeout=kill_after if kill_after is not None else timeout)
    except subprocess.TimeoutExpired:
        if kill_after is None:
            raise
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return -signal.SIGKILL


def ranks(port: str, args: list[str]) -> int:
    """The job: two ranks (this process's children, in its process group), like torchrun's on one node."""
    children = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        children.append(subprocess.Popen([sys.executable, __file__, *args], env=env))
    codes = [child.wait() for child in children]
    return max(codes, key=abs)


def make_state(size: int, rank: int) -> dict[str, Any]:
    """``size`` bytes of float32 in 8 tensors (a model's parameters and its optimizer's moments, say)."""
    import torch

    count = size // 4 // 8
    return {"model": {f"layer{i}": torch.full((count,), float(rank * 8 + i)) for i in range(8)}}


def setup() -> tuple[int, int]:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size()


def blocked(directory: str, size: int, saves: int, out: str) -> None:
    """Each mode's saves: (seconds blocked, seconds until published) per save, rank 0 writes them all to ``out``."""
    import torch.distributed as dist

    from training_runtime.checkpoint import AsyncCheckpointer, state_bytes

    rank, world = setup()
    state = make_state(size, rank)
    found: dict[str, Any] = {"bytes_per_rank": state_bytes(state), "world": world}
    for mode in ("sync", "async"):
        root = Path(directory, mode)
        ckpt = AsyncCheckpointer(root, keep=1, asynchronous=mode == "async")
        times = []
        for step in range(saves):
            dist.barrier()
            began = time.perf_counter()
            ckpt.save(step, state)
            held = time.perf_counter() - began
            while ckpt.in_flight is not None:
                ckpt.poll()
                time.sleep(0.002)
            times.append((held, time.perf_counter() - began))
            dist.barrier()
        ckpt.close()
        every: list[Any] = [None] * world
        dist.all_gather_object(every, times)
        found[mode] = every
        dist.barrier()
        if rank == 0:
            shutil.rmtree(root, ignore_errors=True)
    if rank == 0:
        Path(out).write_text(json.dumps(found))
    dist.destroy_process_group()


def train(shared: str, local: str, size: int, progress: str) -> None:
    """Save every step until killed; rank 0 appends each step it finished to ``progress``."""
    from training_runtime.checkpoint import AsyncCheckpointer

    rank, _ = setup()
    state = make_state(size, rank)
    ckpt = AsyncCheckpointer(shared, local_root=local or None, keep=2, keep_local=2, policy="skip")
    for step in range(10**6):
        time.sleep(STEP_S)
        ckpt.poll()
        ckpt.save(step, state)
        if rank == 0:
            with open(progress, "a") as handle:
                handle.write(f"{step}\n")


def job_rank(mode: str, size: int, steps: int, every: int, directory: str) -> None:
    """A training job's shape: ``steps`` steps of :data:`STEP_S` (the accelerator's time, no CPU), a save every
    ``every`` steps, the last save flushed at the end."""
    from training_runtime.checkpoint import AsyncCheckpointer

    rank, _ = setup()
    state = make_state(size, rank)
    ckpt = AsyncCheckpointer(directory, keep=1, asynchronous=mode == "async")
    for step in range(steps):
        time.sleep(STEP_S)
        ckpt.poll()
        if (step + 1) % every == 0:
            ckpt.save(step, state)
    ckpt.close()


def job(argv: list[str]) -> int:
    """``job --mode async|sync [--gb 1] [--steps 40] [--every 5] --dir DIR``: one whole job, for a whole-process timer
    (the two modes side by side)."""
    parser = argparse.ArgumentParser(prog="async_checkpoint.py job")
    parser.add_argument("--mode", choices=("async", "sync"), required=True)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    root = args.dir / args.mode
    shutil.rmtree(root, ignore_errors=True)
    code = run_ranks(["job-rank", args.mode, str(int(args.gb * GB)), str(args.steps), str(args.every), str(root)])
    shutil.rmtree(root, ignore_errors=True)
    return code


def resume(shared: str, local: str, size: int, out: str) -> None:
    import torch.distributed as dist

    from training_runtime.checkpoint import AsyncCheckpointer

    rank, world = setup()
    state = make_state(size, rank)
    ckpt = AsyncCheckpointer(shared, local_root=local or None)
    step = ckpt.resume(state)
    tiers: list[Any] = [None] * world
    dist.all_gather_object(tiers, None if ckpt.resumed is None else ckpt.resumed.tier)
    if rank == 0:
        Path(out).write_text(json.dumps({"step": step, "tiers": tiers}))
    ckpt.close()
    dist.destroy_process_group()


def dd_seconds(directory: Path, total: int) -> float:
    target = directory / "dd.bin"
    count = -(-total // (64 << 20))
    began = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=64M", f"count={count}", "conv=fsync"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - began
    written = target.stat().st_size
    target.unlink()
    return seconds * total / written


def median(values: list[float]) -> float:
    return statistics.median(values)


def measure_size(directory: Path, gb: float, saves: int) -> dict[str, Any]:
    out = directory / "blocked.json"
    code = run_ranks(["blocked", str(directory), str(int(gb * GB)), str(saves), str(out)], timeout=3600)
    if code != 0:
        sys.exit(f"the ranks of the {gb} GB case failed ({code})")
    found = json.loads(out.read_text())
    total = found["bytes_per_rank"] * found["world"]
    later = slice(1, None)
    sync_blocked = median([max(r[i][0] for r in found["sync"]) for i in range(saves)])
    async_blocked = median([max(r[i][0] for r in found["async"]) for i in range(saves)][later])
    first_async = max(r[0][0] for r in found["async"])
    drained = median([max(r[i][1] for r in found["async"]) for i in range(saves)][later])
    dd = dd_seconds(directory, total)
    return {
        "gb_per_rank": gb,
        "bytes_per_rank": found["bytes_per_rank"],
        "sync_blocked_s": sync_blocked,
        "async_blocked_s": async_blocked,
        "async_first_blocked_s": first_async,
        "blocked_ratio": async_blocked / sync_blocked,
        "async_published_s": drained,
        "background_mb_s": total / drained / 1e6,
        "dd_mb_s": total / dd / 1e6,
        "throughput_ratio": dd / drained,
    }


def steps_lost(directory: Path, gb: float, crash_after: float) -> dict[str, Any]:
    size = str(int(gb * GB))
    results: dict[str, Any] = {}
    for case, with_local in (("no local tier", False), ("local tier", True)):
        shared, local = directory / "crash" / "shared", directory / "crash" / "local"
        shutil.rmtree(directory / "crash", ignore_errors=True)
        progress = directory / "crash" / "progress"
        progress.parent.mkdir(parents=True)
        local_arg = str(local) if with_local else ""
        run_ranks(["train", str(shared), local_arg, size, str(progress)], kill_after=crash_after)
        last = int(progress.read_text().split()[-1])
        cases = [(case if not with_local else "local tier, node survived", False)]
        if with_local:
            cases.append(("local tier, rank 1's node replaced", True))
        for name, replaced in cases:
            if replaced:
                shutil.rmtree(local / "rank_00001")
            out = directory / "crash" / "resumed.json"
            if run_ranks(["resume", str(shared), local_arg, size, str(out)], timeout=600) != 0:
                sys.exit(f"resume failed ({name})")
            found = json.loads(out.read_text())
            results[name] = {"last_step": last, "resumed": found["step"], "tiers": found["tiers"]}
            results[name]["lost"] = last - (found["step"] if found["step"] is not None else -1)
    shutil.rmtree(directory / "crash", ignore_errors=True)
    return results


def report(sizes: list[dict[str, Any]], crashes: dict[str, Any]) -> None:
    print("| State per rank | Sync: blocked per save | Async: blocked per save (first) | Async/sync | "
          "Async: published after | Background write | dd, same bytes | Background/dd |")  # fmt: skip
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for s in sizes:
        print(
            f"| {s['gb_per_rank']:g} GB | {s['sync_blocked_s']:.2f} s | {s['async_blocked_s']:.3f} s "
            f"({s['async_first_blocked_s']:.2f} s) | {s['blocked_ratio']:.1%} | {s['async_published_s']:.2f} s | "
            f"{s['background_mb_s']:.0f} MB/s | {s['dd_mb_s']:.0f} MB/s | {s['throughput_ratio']:.0%} |"
        )
    if crashes:
        print("\n| Crash case | Last step logged | Resumed from step | Tiers (rank 0, 1) | Steps lost |")
        print("|---|--:|--:|---|--:|")
        for name, c in crashes.items():
            print(f"| {name} | {c['last_step']} | {c['resumed']} | {', '.join(map(str, c['tiers']))} | {c['lost']} |")
    print(json.dumps({"sizes": sizes, "crashes": crashes}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-gb", type=float, nargs="+", default=[1.0], help="state per rank, decimal GB")
    parser.add_argument("--saves", type=int, default=4, help="saves per mode and size (the first is set apart)")
    parser.add_argument("--crash-after", type=float, default=30.0, help="seconds of training before the crash")
    parser.add_argument("--no-crash", action="store_true", help="skip the steps-lost drill")
    parser.add_argument("--crash-gb", type=float, default=1.0, help="state per rank of the steps-lost drill, GB")
    parser.add_argument("--dir", type=Path, help="where to write (default: a new directory in the temporary one)")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="bench-ckpt-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        sizes = [measure_size(directory, gb, args.saves) for gb in args.sizes_gb]
        crashes = {} if args.no_crash else steps_lost(directory, args.crash_gb, args.crash_after)
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    report(sizes, crashes)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "ranks":
        sys.exit(ranks(sys.argv[2], sys.argv[3:]))
    if len(sys.argv) > 1 and sys.argv[1] == "job":
        sys.exit(job(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "job-rank":
        sys.path.insert(0, str(ROOT / "src"))
        job_rank(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] in ("blocked", "train", "resume"):
        sys.path.insert(0, str(ROOT / "src"))
        command, rest = sys.argv[1], sys.argv[2:]
        if command == "blocked":
            blocked(rest[0], int(rest[1]), int(rest[2]), rest[3])
        elif command == "train":
            train(rest[0], rest[1], int(rest[2]), rest[3])
        else:
            resume(rest[0], rest[1], int(rest[2]), rest[3])
        sys.exit(0)
    main()
