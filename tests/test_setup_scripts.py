"""`make synth` needs Python 3.11+, Node.js and npm and says which are missing in one message; the local
cluster's system packages say once why they are skipped on a machine without apt (scripts/*.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASH = shutil.which("bash") or "/bin/bash"


def tools(tmp_path: Path, **scripts: str) -> Path:
    """A PATH holding only the given commands (name: shell script body, or '@python' for this interpreter)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in scripts.items():
        path = folder / name
        if body == "@python":
            path.symlink_to(sys.executable)
        else:
            path.write_text(f"#!{BASH}\n{body}\n")
            path.chmod(0o755)
    return folder


def run(script: str, path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, str(ROOT / "scripts" / script)],
        env={"PATH": str(path), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_all_there_is_silent(tmp_path: Path) -> None:
    result = run("check-prerequisites.sh", tools(tmp_path, python3="@python", node="exit 0", npm="exit 0"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_one_message_names_everything_missing(tmp_path: Path) -> None:
    result = run("check-prerequisites.sh", tools(tmp_path, python3="@python"))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "make synth needs Python 3.11+, Node.js and npm, nothing else. Missing here:",
        "  - Node.js (https://nodejs.org, 20 or newer)",
        "  - npm (comes with Node.js)",
    ]


@pytest.mark.parametrize(
    ("python", "found"),
    [
        ('case "$*" in *platform*) echo 3.10.4;; *) exit 1;; esac', "python3 is 3.10.4"),
        (None, "python3 not found"),
    ],
)
def test_an_old_or_missing_python_is_named(tmp_path: Path, python: str | None, found: str) -> None:
    commands = {"node": "exit 0", "npm": "exit 0", **({"python3": python} if python else {})}
    result = run("check-prerequisites.sh", tools(tmp_path, **commands))
    assert result.returncode == 1
    assert f"  - Python 3.11+ ({found}" in result.stderr
    assert "set PYTHON3=/path/to/python3.11" in result.stderr


def test_the_python_that_python3_names_is_the_one_checked(tmp_path: Path) -> None:
    path = tools(tmp_path, node="exit 0", npm="exit 0", python3="exit 1")
    result = run("check-prerequisites.sh", path, PYTHON3=sys.executable)
    assert result.returncode == 0, result.stderr


def test_system_packages_skip_with_one_message_without_apt(tmp_path: Path) -> None:
    result = run("install-system-packages.sh", tools(tmp_path, id="echo 0"), HOME=str(tmp_path))
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "system-packages: skipped: the local cluster needs a Debian or Ubuntu machine (apt) and root; its tests "
        "skip here, and make synth needs none of it"
    ]


def test_system_packages_name_what_is_missing_without_root(tmp_path: Path) -> None:
    path = tools(tmp_path, id="echo 1000", grep="exit 1", **{"dpkg-query": "exit 1", "apt-get": "exit 99"})
    result = run("install-system-packages.sh", path)
    assert result.returncode == 0
    assert result.stderr.startswith("system-packages: skipped: missing slurm-wlm slurmdbd munge")
    assert "installing them needs root (sudo make system-packages)" in result.stderr


def test_the_makefile_synth_needs_no_dev_tools_or_system_packages() -> None:
    """`make synth` depends on the package's own install and the CDK CLI only (make -n: nothing runs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    plan = subprocess.run(
        ["make", "-n", "-B", "synth"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "--editable ." in plan and "npm ci" in plan and "cdk synth" in plan
    for heavy in ("[dev]", "checkov", "install-system-packages", "build-node-rootfs", "hyperpod-local"):
        assert heavy not in plan, heavy
