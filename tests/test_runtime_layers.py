"""Job-time tools (health checks, launcher, checkpoints) never import bootstrap machinery.

They run in every job's prolog and launch, long after bootstrap; importing ``plan``, ``steps`` or ``apt``
would slow every job and couple them to code that may change a node.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from import_scan import imported_modules

SRC = Path(__file__).resolve().parent.parent / "src"
BOOTSTRAP = ("training_runtime.plan", "training_runtime.steps", "training_runtime.apt")


@pytest.mark.parametrize(
    "module",
    [
        "training_runtime.health",
        "training_runtime.launch",
        "training_runtime.launch_container",
        "training_runtime.checkpoint",
        "training_runtime.paths",
        "training_runtime.spot",  # the Spot watcher, a daemon that runs for the node's life
        "training_runtime.metrics.collect",  # the metrics collector's loop
        "training_runtime.imds_guard",  # the metadata service's rules, put back at every boot
        "training_runtime.guard.__main__",  # the Slurm guard, a daemon that runs for the node's life
    ],
)
def test_job_time_tools_do_not_load_bootstrap_machinery(module: str) -> None:
    probe = f"import sys, {module}\nprint('\\n'.join(m for m in sys.modules if m.startswith({BOOTSTRAP!r})))"
    result = subprocess.run(
        [sys.executable, "-c", probe], env={"PYTHONPATH": str(SRC)}, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == [], f"{module} imports bootstrap modules"


CONTRACT = ("params", "groups", "group_rules", "scaling", "options", "option_types", "option_rules", "users")
"""The parameters file's contract and what it is made of: the bottom layer every service reads."""
SERVICES = ("training_runtime.scaler", "training_runtime.spot", "training_runtime.health", "training_runtime.metrics")


@pytest.mark.parametrize("module", CONTRACT)
def test_the_contract_imports_no_service(module: str) -> None:
    """``ScalingSpec`` is part of the contract (``groups[].scaling``), so it lives in the bottom layer
    (``training_runtime.scaling``), not in the scaler that reads it."""
    path = SRC / "training_runtime" / f"{module}.py"
    upward = sorted(m for m in imported_modules(path) if m.startswith(SERVICES + BOOTSTRAP))
    assert upward == [], f"training_runtime.{module} imports {upward}"
