"""The emulator is its own distribution (hyperpod-local): it runs without aws_cdk and Node.js, and the
construct library never imports it."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "cpu-cluster.yaml"

WITHOUT_CDK = """
import sys
sys.modules["aws_cdk"] = None  # importing it now fails: the emulator must not need it
sys.modules["jsii"] = None
import hyperpod_local
from hyperpod_local import agent, cli, cluster, drill, hyperpod_platform, layout, metrics, staging
from hyperpod_local.layout import plan_layout
from hyperpod_local.overlay import local_parameters
from hyperpod_cdk.core.config import load_config
config = load_config(sys.argv[1])
params = local_parameters(config)
print(params.cluster_name, len(plan_layout(config).nodes))
"""


def test_the_emulator_runs_without_aws_cdk_or_jsii() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_CDK, str(CONFIG)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "cpu-cluster"


COMMANDS = ["up", "control-plane", "exec", "crash", "boot", "reboot", "bootstrap", "replace", "break", "status", "down"]
"""The emulator's commands, in its parser's order (hyperpod-local/README.md lists them, generated)."""


def test_its_command_line_is_its_own() -> None:
    script = Path(sys.executable).with_name("hyperpod-local")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: hyperpod-local [-h]"), result.stdout  # its own program name
    listed = re.search(r"^usage: .*?\{([a-z,-]+)\}", result.stdout, flags=re.MULTILINE | re.DOTALL)
    assert listed is not None, result.stdout
    assert listed.group(1).split(",") == COMMANDS


def test_the_readme_lists_every_command_from_the_parser() -> None:
    spec = importlib.util.spec_from_file_location("gen_local_commands", ROOT / "scripts" / "gen_local_commands.py")
    assert spec and spec.loader
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "hyperpod-local/README.md is stale: run scripts/gen_local_commands.py"
    assert re.findall(r"^\| `([a-z-]+)` \|", text, flags=re.MULTILINE) == COMMANDS


def test_the_construct_library_does_not_import_the_emulator() -> None:
    code = (
        "import sys, hyperpod_cdk.stacks, hyperpod_cdk.constructs, hyperpod_cdk.publishing.command, "
        "hyperpod_cdk.validate; print('hyperpod_local' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_the_wheel_carries_every_file_the_emulator_uses(tmp_path: Path) -> None:
    """Installed outside the checkout, the emulator finds its node init, root file system script and package
    list, and the example jobs (hyperpod_local.paths) in the wheel."""
    from hyperpod_local.paths import PACKAGE_DATA, PACKAGE_DIR

    source = tmp_path / "hyperpod-local"  # a copy: the build leaves its directories beside the sources
    shutil.copytree(ROOT / "hyperpod-local", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), source],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("hyperpod_local-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    wanted = {
        f"hyperpod_local/{path.relative_to(PACKAGE_DIR)}"
        for item in PACKAGE_DATA
        for path in ([p for p in item.iterdir() if p.is_file()] if item.is_dir() else [item])
    }
    assert {"hyperpod_local/jobs/ddp.sbatch", "hyperpod_local/build-node-rootfs.sh"} <= wanted
    assert wanted <= names, sorted(wanted - names)


def test_the_example_jobs_have_one_home() -> None:
    """examples/jobs is a link to the packaged job scripts, not a copy that could drift."""
    from hyperpod_local.paths import JOBS_DIR

    link = ROOT / "examples" / "jobs"
    assert link.is_symlink() and link.resolve() == JOBS_DIR


def test_the_emulator_loads_no_bootstrap_machinery_of_the_runtime() -> None:
    """The facts it shares with the node runtime (munge's key and daemon, the health check's program and log, the
    metric labels) live in the runtime's bottom layer (training_runtime.paths, facts, metrics.layout)."""
    code = (
        "import importlib, pkgutil, sys, hyperpod_local\n"
        "for m in pkgutil.iter_modules(hyperpod_local.__path__): importlib.import_module('hyperpod_local.' + m.name)\n"
        "print(sorted(k for k in sys.modules if k.split('.')[:2] in (['training_runtime', 'steps'], "
        "['training_runtime', 'plan'], ['training_runtime', 'apt'])))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
