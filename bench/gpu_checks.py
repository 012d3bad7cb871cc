"""The GPU checks docs/benchmarks.md owes: the health check's time on a GPU node, the launcher against plain
torchrun on one GPU, and the GPU metrics side (the GPU-to-job mapping, DCGM where installed).

Run in the repo root: ``python3 bench/gpu_checks.py --out DIR`` (the device machine's Python with torch; here
``.venv/bin/python bench/gpu_checks.py --out /tmp/gpu-checks`` runs the same on CPU with gloo). It writes
``DIR/gpu_checks.json`` and ``DIR/gpu_checks.md`` and prints the Markdown.

- Health: a temporary root with the node facts bootstrap would write for a HyperPod node of an instance type
  whose GPU count matches the machine (``ml.g5.xlarge`` for one GPU), the bootstrap marker, a shared
  file system "mounted" at /fsx (the facts' mount table lists it) and links to the machine's nvidia-smi and
  dcgmi; ``python3 -m training_runtime health --periodic|--prolog --root ROOT`` in fresh processes, interleaved,
  and each check in-process. Slurm is absent: the node-state query fails at once (on a node it is one scontrol).
- Launcher: plain ``torchrun --standalone`` against ``launch --on-node`` (stage 2, with a one-node step's Slurm
  environment, so it execs torchrun with its c10d rendezvous on this host) and the whole launcher (stage 1 with
  the temporary root's facts, through a stand-in ``srun`` that execs the step's command: real srun's cost is
  not in it), interleaved, each running bench/gpu_train_step.py; stage 1 alone via ``--dry-run``.
- Metrics: ``metrics.gpu_jobs --prolog/--epilog`` (every job's prolog pays it); nvidia-smi readings of the
  quantities the DCGM counter list names; dcgmi / dcgm-exporter when installed.

Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "bench")]

import gpu_metrics  # noqa: E402
import gpu_stats  # noqa: E402
from gpu_stats import STAGE2, THROUGH_SRUN, TORCHRUN  # noqa: E402
from training_runtime.facts import facts_from  # noqa: E402
from training_runtime.hardware import INSTANCE_HARDWARE, hardware_for  # noqa: E402
from training_runtime.health import CHECKS, PROLOG, Context, load_health_options, run_checks  # noqa: E402
from training_runtime.launch import RDZV_PORT  # noqa: E402
from training_runtime.node import HYPERPOD, HYPERPOD_MARKER  # noqa: E402
from training_runtime.paths import DONE_MARKER, FACTS_PATH, SLURMD_SPOOL_DIR  # noqa: E402

TOOLS = ("nvidia-smi", "dcgmi", "nv-hostengine", "dcgm-exporter", "torchrun", "srun", "scontrol")
NODE = "bench-node-1"
SHARED = "/fsx"
TRAIN = ROOT / "bench" / "gpu_train_step.py"
MARKER = "GPU_TRAIN_STEP "
SRUN_SHIM = (
    "#!/bin/sh\n# stand-in srun: drop the options, exec the step command\n"
    'while [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n'
)
RUN_TIMEOUT_S = 90
"""One training run; a variant whose untimed warm-up run fails or hangs is not run again."""


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, str, str, float]:
    """(exit status, stdout, stderr, seconds); 127 when it could not start, 124 past the timeout."""
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as error:
        return 127, "", str(error), time.perf_counter() - start
    except subprocess.TimeoutExpired as error:
        out = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        return 124, out, f"timed out after {timeout} s", time.perf_counter() - start
    return done.returncode, done.stdout, done.stderr, time.perf_counter() - start


def machine(device: str) -> dict[str, Any]:
    gpus: list[str] = []
    driver = ""
    if shutil.which("nvidia-smi"):
        gpus = [line for line in run(["nvidia-smi", "-L"])[1].splitlines() if line.strip()]
        query = run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])[1].split()
        driver = query[0] if query else ""
    probe = (
        "import json, torch; c = torch.cuda.is_available(); print(json.dumps({'version': torch.__version__, "
        "'cuda': torch.version.cuda, 'available': c, 'device_count': torch.cuda.device_count() if c else 0, "
        "'nccl': str(torch.cuda.nccl.version()) if c else None}))"
    )
    status, out, err, _ = run([sys.executable, "-c", probe], timeout=120)
    torch_info = json.loads(out.strip().splitlines()[-1]) if status == 0 else {"error": err.strip()[-300:]}
    count = len(gpus) if gpus else int(torch_info.get("device_count") or 0)
    return {
        "gpus": gpus,
        "gpu_count": 0 if device == "cpu" else count,
        "driver": driver,
        "torch": torch_info,
        "python": platform.python_version(),
        "executable": sys.executable,
        "nproc": os.cpu_count(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "hostname": socket.gethostname(),
    }


def instance_type_for(gpus: int) -> tuple[str, str]:
    """The smallest table type with ``gpus`` GPUs and no EFA, and a note when the machine does not match it."""
    fits = sorted((hw.cpus, name) for name, hw in INSTANCE_HARDWARE.items() if hw.gpus == gpus and gpus > 0)
    plain = [name for _, name in fits if INSTANCE_HARDWARE[name].efa_interfaces == 0]
    if plain:
        return plain[0], ""
    if fits:
        name = fits[0][1]
        efa = INSTANCE_HARDWARE[name].efa_interfaces
        return name, f"no {gpus}-GPU type without EFA: {name} facts expect {efa} EFA devices (the EFA check fails here)"
    return "ml.g5.xlarge", (
        f"MISMATCH: this machine has {gpus} GPUs; the facts are ml.g5.xlarge's (1 GPU), so the GPU check fails as on "
        "a GPU node whose GPU is gone"
    )


def build_root(root: Path, instance_type: str) -> None:
    """What bootstrap leaves on a HyperPod GPU node, as far as health and launch read it."""
    hardware = hardware_for(instance_type, {})
    assert hardware is not None
    facts = facts_from(
        hardware,
        cluster="bench",
        instance_name=NODE,
        instance_type=instance_type,
        group="gpu",
        role="compute",
        platform=HYPERPOD,
        shared_mount=SHARED,
        slurm_name=NODE,
    )
    for path in (FACTS_PATH, DONE_MARKER):
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    (root / FACTS_PATH.lstrip("/")).write_text(facts.dumps())
    (root / DONE_MARKER.lstrip("/")).write_text("")
    for directory in (HYPERPOD_MARKER, SHARED, "/tmp", SLURMD_SPOOL_DIR, "/proc/self"):
        (root / directory.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "proc/self/mountinfo").write_text(
        f"22 1 259:1 / / rw,relatime - ext4 /dev/root rw\n30 22 0:40 / {SHARED} rw,relatime - lustre fsx rw\n"
    )
    for tool in ("nvidia-smi", "dcgmi"):
        found = shutil.which(tool)
        if found:
            link = root / found.lstrip("/")
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(found)


def health(root: Path, instance_type: str, note: str, runs: int, env: dict[str, str]) -> dict[str, Any]:
    base = [sys.executable, "-m", "training_runtime", "health"]
    commands = {
        "python3 -c pass": [sys.executable, "-c", "pass"],
        "health --periodic": [*base, "--periodic", "--root", str(root)],
        "health --prolog": [*base, "--prolog", "--root", str(root)],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    last: dict[str, dict[str, Any]] = {}
    for round_ in range(runs + 1):  # round 0 warms the page cache, untimed
        for name, argv in commands.items():
            status, out, err, seconds = run(argv, env)
            if round_:
                times[name].append(seconds)
            event = [json.loads(line) for line in out.splitlines() if '"event": "health"' in line]
            last[name] = {"exit": status, "failed": event[-1]["failed"] if event else [], "stderr": err[-400:]}
    result: dict[str, Any] = {"instance_type": instance_type, "note": note, "check_runs": runs, "commands": {}}
    for name in commands:
        result["commands"][name] = {"wall_s": gpu_stats.stats(times[name]), **last[name]}
    facts = json.loads((root / FACTS_PATH.lstrip("/")).read_text())
    from training_runtime.facts import NodeFacts

    ctx_facts = NodeFacts.from_json(facts)
    options = load_health_options(root)
    per_check: dict[str, list[float]] = {name: [] for name, _ in CHECKS}
    outcome: dict[str, Any] = {}
    for _ in range(runs):
        for name, check in CHECKS:
            ctx = Context(facts=ctx_facts, options=options, mode=PROLOG, root=root, node_name=NODE)
            start = time.perf_counter()
            checked = check(ctx)
            per_check[name].append((time.perf_counter() - start) * 1000)
            outcome[name] = {"status": checked.status, "detail": checked.detail}
    together = []
    for _ in range(runs):
        start = time.perf_counter()
        run_checks(Context(facts=ctx_facts, options=options, mode=PROLOG, root=root, node_name=NODE))
        together.append((time.perf_counter() - start) * 1000)
    result["checks"] = {name: {"ms": gpu_stats.stats(per_check[name]), **outcome[name]} for name in per_check}
    result["run_checks_parallel_ms"] = gpu_stats.stats(together)
    return result


def rendezvous_host() -> tuple[str, str]:
    host = socket.gethostname().split(".")[0]
    try:
        socket.getaddrinfo(host, RDZV_PORT)
    except OSError as error:
        return "localhost", f"host name {host!r} does not resolve ({error}); the step's node list is localhost"
    return host, ""


def slurm_env(env: dict[str, str], host: str, gpus: int) -> dict[str, str]:
    """A one-node, one-task step's environment as srun gives it (the launcher reads the node list and counts)."""
    step = dict(env)
    step.update(
        {
            "SLURM_JOB_ID": "4242",
            "SLURM_JOBID": "4242",
            "SLURM_STEP_ID": "0",
            "SLURM_JOB_NODELIST": host,
            "SLURM_NODELIST": host,
            "SLURM_STEP_NODELIST": host,
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_NNODES": "1",
            "SLURM_STEP_NUM_NODES": "1",
            "SLURM_NTASKS": "1",
            "SLURM_NODEID": "0",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURMD_NODENAME": host,
            "SLURM_CPUS_ON_NODE": str(os.cpu_count() or 1),
        }
    )
    if gpus:
        step["SLURM_GPUS_ON_NODE"] = str(gpus)
        step["SLURM_JOB_GPUS"] = ",".join(str(i) for i in range(gpus))
    return step


def find_torchrun(scratch: Path) -> str:
    beside = Path(sys.executable).with_name("torchrun")
    found = str(beside) if beside.exists() else shutil.which("torchrun")
    if found:
        return found
    wrapper = scratch / "torchrun"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m torch.distributed.run "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def timed_training(argv: list[str], env: dict[str, str], keep_stderr: bool = False) -> dict[str, Any]:
    spawned = time.time()
    status, out, err, seconds = run(argv, env, timeout=RUN_TIMEOUT_S)
    record: dict[str, Any] = {"exit": status, "wall_s": seconds, "first_step_s": None}
    if keep_stderr:
        record["stderr_head"] = err[:1000]
    lines = [line for line in out.splitlines() if line.startswith(MARKER)]
    if status != 0 or not lines:
        record["error"] = (out + err)[-800:]
        output = (out + err).splitlines()
        causes = [line for line in output if re.search(r"\w(Error|Exception)\b", line) and "ChildFailed" not in line]
        record["error_line"] = causes[-1].strip()[-400:] if causes else ""
        return record
    data = json.loads(lines[-1][len(MARKER) :])
    record.update(
        worker_start_s=data["started"] - spawned,
        group_up_s=data["group_up"] - spawned,
        first_step_s=data["first_step"] - spawned,
        step_median_s=data["step_median_s"],
        backend=data["backend"],
        master=data["master"],
        run_id=data["torchelastic_run_id"],
    )
    return record


def _progress(label: str, name: str, record: dict[str, Any]) -> None:
    figures = {k: round(v, 3) for k, v in record.items() if k.endswith("_s") and isinstance(v, float)}
    print(label, name, json.dumps(figures), record.get("error_line", ""), flush=True)


def launcher(root: Path, scratch: Path, args: argparse.Namespace, gpus: int, env: dict[str, str]) -> dict[str, Any]:
    host, note = rendezvous_host()
    device = "cuda" if gpus else "cpu"
    torchrun = find_torchrun(scratch)
    shim_dir = scratch / "shim"
    shim_dir.mkdir()
    (shim_dir / "srun").write_text(SRUN_SHIM)
    (shim_dir / "srun").chmod(0o755)
    step = slurm_env(env, host, gpus)
    through_srun = dict(step, PATH="{}:{}".format(shim_dir, step.get("PATH", "")))
    script = [str(TRAIN), "--steps", str(args.steps), "--device", device]
    launch = [sys.executable, "-m", "training_runtime", "launch"]
    variants = {
        TORCHRUN: ([torchrun, "--standalone", "--nproc-per-node=1", *script], step),
        STAGE2: (
            [*launch, "--on-node", "--nproc-per-node=1", "--max-restarts=0", "--torchrun=" + torchrun, "--", *script],
            step,
        ),
        THROUGH_SRUN: ([*launch, "--root", str(root), "--torchrun=" + torchrun, "--", *script], through_srun),
    }
    if args.no_srun_shim:
        del variants[THROUGH_SRUN]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    warmup = {}
    for name, (argv, e) in variants.items():
        warmup[name] = timed_training(argv, e, keep_stderr=True)
        _progress("warm-up", name, warmup[name])
    working = {name: variant for name, variant in variants.items() if warmup[name]["first_step_s"] is not None}
    for round_ in range(args.runs):
        if time.monotonic() > args.deadline:
            note += f" Stopped after {round_} round(s): --budget-s reached."
            break
        for name, (argv, e) in working.items():
            runs[name].append(timed_training(argv, e))
            _progress(f"round {round_ + 1}", name, runs[name][-1])
    dry_argv = [*launch, "--dry-run", "--root", str(root), "--torchrun=" + torchrun, "--", *script]
    dry, bare = [], []
    for round_ in range(args.health_runs + 1):
        dry_status, dry_out, dry_err, seconds = run(dry_argv, step)
        bare_seconds = run([sys.executable, "-c", "pass"])[3]
        if round_:
            dry.append(seconds)
            bare.append(bare_seconds)
    return {
        "host": host,
        "note": note.strip(),
        "device": device,
        "steps": args.steps,
        "runs": args.runs,
        "torchrun": torchrun,
        "commands": {name: shlex.join(argv) for name, (argv, _) in variants.items()},
        "warmup": warmup,
        "samples": runs,
        "summary": gpu_stats.launcher_summary(runs),
        "dry_run": {
            "exit": dry_status,
            "output": (dry_out or dry_err)[-1500:],
            "wall_s": gpu_stats.stats(dry),
            "bare_python_s": gpu_stats.stats(bare),
        },
    }


def save(out: Path, report: dict[str, Any]) -> None:
    """The JSON so far (a run cut short by its time limit still leaves the sections it finished)."""
    (out / "gpu_checks.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for gpu_checks.json and gpu_checks.md")
    parser.add_argument("--device", choices=("auto", "cpu"), default="auto", help="cpu: ignore any GPU")
    parser.add_argument("--runs", type=int, default=5, help="timed launcher runs per variant (after one warm-up)")
    parser.add_argument("--steps", type=int, default=50, help="training steps per launcher run")
    parser.add_argument("--health-runs", type=int, default=9, help="timed runs of each health command")
    parser.add_argument("--no-srun-shim", action="store_true", help="skip the whole-launcher variant")
    parser.add_argument("--budget-s", type=float, default=150.0, help="start no launcher round after this many seconds")
    args = parser.parse_args(argv)
    started = time.monotonic()
    args.deadline = started + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    env["SLURMD_NODENAME"] = NODE
    report: dict[str, Any] = {
        "command": shlex.join(["python3", "bench/gpu_checks.py", *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "tools": {tool: shutil.which(tool) for tool in TOOLS},
    }
    report["machine"] = machine(args.device)
    print("machine:", json.dumps(report["machine"]), "\ntools:", json.dumps(report["tools"]), flush=True)
    gpus = report["machine"]["gpu_count"]
    instance_type, note = instance_type_for(gpus)
    if report["tools"]["dcgmi"] and args.health_runs > 3:
        args.health_runs = 3  # each prolog then runs dcgmi diag -r 1 (seconds)
        note = (note + " dcgmi is installed: 3 health runs.").strip()
    engine = gpu_metrics.hostengine(report["tools"])
    with tempfile.TemporaryDirectory(prefix="gpu-checks-") as tmp:
        scratch = Path(tmp)
        root = scratch / "root"
        build_root(root, instance_type)
        try:
            report["health"] = health(root, instance_type, note, args.health_runs, env)
            save(args.out, report)
        finally:
            if engine is not None:
                engine.terminate()
                engine.wait(10)
        report["health"]["hostengine_started"] = engine is not None
        print("health:", json.dumps(report["health"]["commands"]), flush=True)
        report["launcher"] = launcher(root, scratch, args, gpus, env)
        save(args.out, report)
        print("launcher:", json.dumps(report["launcher"]["summary"]), flush=True)
        report["metrics"] = gpu_metrics.collect(scratch, gpus, args.health_runs, env, report["tools"])
    report["elapsed_s"] = time.monotonic() - started
    save(args.out, report)
    text = gpu_stats.markdown(report)
    (args.out / "gpu_checks.md").write_text(text)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
