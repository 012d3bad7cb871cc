"""The write probe of a shared file system, run in a child process with a deadline.

A write to a hung Lustre mount blocks in the kernel, and no retry can interrupt it; only a child process
can be abandoned at the deadline. Bootstrap (``steps/storage.py``) and the health checks ask the same
question this one way.
"""

from __future__ import annotations

import shutil
import sys
from typing import List

from training_runtime.node import SYSTEM_PATH

PROBE_TIMEOUT_S = 10.0

PROBE = """import os, sys
directory, name = sys.argv[1], sys.argv[2]
os.makedirs(directory, mode=0o755, exist_ok=True)
path = os.path.join(directory, name)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
try:
    os.write(fd, b"hyperpod-cdk health probe\\n")
    os.fsync(fd)
finally:
    os.close(fd)
os.unlink(path)
"""
"""Run in a child process: a write to a hung Lustre mount blocks in the kernel, and only a child can be
abandoned at the deadline without keeping this program from exiting."""


def python_executable() -> str:
    """This interpreter, for the probe. ``sys.executable`` is empty when Python was started through a
    PATH lookup with no PATH in its environment, which is how slurmd starts the programs."""
    return sys.executable or shutil.which("python3", path=SYSTEM_PATH) or "/usr/bin/python3"


def probe_argv(directory: str, name: str) -> List[str]:
    """The command that creates, fsyncs and removes ``directory/name`` (creating ``directory``)."""
    return [python_executable(), "-c", PROBE, directory, name]
