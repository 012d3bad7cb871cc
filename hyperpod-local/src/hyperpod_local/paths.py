"""Where the emulator's own Python code comes from, for the helper processes it starts (agent, fake IMDS)."""

from __future__ import annotations

import os
from pathlib import Path

import hyperpod_local
import training_runtime


def subprocess_env() -> dict[str, str]:
    """This environment with ``PYTHONPATH`` naming the directories this package and the node runtime were
    imported from (a checkout's source directories or site-packages), so ``python -m hyperpod_local.<x>``
    runs the same code as this process."""
    roots = dict.fromkeys(str(Path(m.__file__ or "").resolve().parents[1]) for m in (hyperpod_local, training_runtime))
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*roots, *inherited])}
