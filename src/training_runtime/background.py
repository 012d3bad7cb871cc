"""Running a runtime service in the background where there is no systemd (containers, the local cluster).

One definition for every service the runtime starts itself (the Spot watcher, the scaler): a double fork, the
log file as standard output and error, a pid file, and the process name in ``/proc/<pid>/comm``, by which
:mod:`training_runtime.services` finds the daemon. Stdlib only; job-time tools may import it.
"""

from __future__ import annotations

import os
from pathlib import Path


def name_process(name: str) -> None:
    """``/proc/self/comm`` = ``name`` (at most 15 characters are kept by the kernel)."""
    try:
        with open("/proc/self/comm", "w") as handle:
            handle.write(name)
    except OSError:
        pass


def daemonize(pid_file: Path, log_file: Path, name: str) -> None:
    """Double fork into the background, log to ``log_file``, write the pid file, name the process."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    out = os.open(str(log_file), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    name_process(name)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text("{}\n".format(os.getpid()))
