"""The lifecycle entry script's log (lifecycle_assets/bootstrap.sh): root only, while the runtime it starts keeps
root's umask (what it installs for users, pip's files and parent directories among them, is created by the umask).
The script runs with its log path moved into a temporary directory and a stand-in runtime."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOG = "/var/log/hyperpod-cdk/bootstrap.log"
RUNTIME = "import os\nprint('umask %03o' % os.umask(0o022))\nopen('made-by-runtime', 'w').close()\n"


def run_entry(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = (ROOT / "src/hyperpod_cdk/lifecycle_assets/bootstrap.sh").read_text()
    assert LOG in script
    log = tmp_path / "logs" / "bootstrap.log"
    (tmp_path / "bootstrap.sh").write_text(script.replace(LOG, str(log)))
    (tmp_path / "training_runtime").mkdir(exist_ok=True)
    # a regular package: a directory without __init__.py is a namespace portion, which loses to the real package
    # wherever the python3 on PATH has it installed (make's PATH puts the project's venv first)
    (tmp_path / "training_runtime/__init__.py").write_text("")
    (tmp_path / "training_runtime/__main__.py").write_text(RUNTIME)
    ran = subprocess.run(
        ["bash", "-c", f"umask 022 && cd {tmp_path} && bash bootstrap.sh"], capture_output=True, text=True, timeout=60
    )
    return ran, log


@pytest.mark.parametrize("existing", [False, True], ids=["new-log", "world-readable-log-from-before"])
def test_the_bootstrap_log_is_root_only_and_the_runtime_keeps_its_umask(tmp_path: Path, existing: bool) -> None:
    if existing:
        (tmp_path / "logs").mkdir()
        (tmp_path / "logs/bootstrap.log").write_text("an older run\n")
        os.chmod(tmp_path / "logs/bootstrap.log", 0o644)
    ran, log = run_entry(tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "umask 022" in log.read_text()  # the runtime's own files are made by root's umask, as before
    assert stat.S_IMODE((tmp_path / "made-by-runtime").stat().st_mode) == 0o644
