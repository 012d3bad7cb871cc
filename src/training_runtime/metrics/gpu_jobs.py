"""The GPU-to-job mapping dcgm-exporter reads (``--hpc-job-mapping-dir``): one file per GPU index, one
Slurm job id per line. The Slurm prolog adds the job to the files of its GPUs, the epilog removes it.

``python3 -m training_runtime.metrics.gpu_jobs --prolog|--epilog [--dir DIR]``, with Slurm's environment
(``SLURM_JOB_ID``, ``SLURM_JOB_GPUS`` or else ``CUDA_VISIBLE_DEVICES``). It never fails a job: a problem is
printed and the exit code is 0 (a prolog's failure would drain the node). Imports only the standard
library and :mod:`.layout`: a prolog gates every job.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import sys
from typing import List, Mapping, Optional, Sequence

from training_runtime.metrics.layout import GPU_JOB_DIR

LOCK = ".lock"


def job_gpus(env: Mapping[str, str]) -> List[str]:
    """The job's GPU indexes: ``SLURM_JOB_GPUS`` (``0,1``), else ``CUDA_VISIBLE_DEVICES``; [] when none."""
    raw = env.get("SLURM_JOB_GPUS") or env.get("CUDA_VISIBLE_DEVICES") or ""
    return [part.strip() for part in raw.split(",") if part.strip().isdigit()]


def _read(path: str) -> List[str]:
    try:
        with open(path) as handle:
            return [line.strip() for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def _write(path: str, jobs: List[str]) -> None:
    if not jobs:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    temporary = "{}.{}.tmp".format(path, os.getpid())
    with open(temporary, "w") as handle:
        handle.write("".join(job + "\n" for job in jobs))
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def update(directory: str, job_id: str, gpus: Sequence[str], add: bool) -> None:
    """Add ``job_id`` to (or remove it from) the file of each GPU in ``gpus``, under a lock (jobs sharing a
    node start and end concurrently)."""
    os.makedirs(directory, mode=0o755, exist_ok=True)
    with open(os.path.join(directory, LOCK), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        for gpu in gpus:
            path = os.path.join(directory, gpu)
            jobs = [j for j in _read(path) if j != job_id]
            _write(path, [*jobs, job_id] if add else jobs)


def main(argv: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_jobs", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--prolog", action="store_true", help="add the job to its GPUs' files")
    mode.add_argument("--epilog", action="store_true", help="remove the job from its GPUs' files")
    parser.add_argument("--dir", default=GPU_JOB_DIR, help="the mapping directory (default %(default)s)")
    args = parser.parse_args(argv)
    environment = os.environ if env is None else env
    job_id = environment.get("SLURM_JOB_ID", "")
    gpus = job_gpus(environment)
    if not job_id or not gpus:
        return 0
    try:
        update(args.dir, job_id, gpus, add=args.prolog)
    except OSError as error:
        print("gpu_jobs: could not update {}: {}".format(args.dir, error), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
