"""The emulator is its own distribution (hyperpod-local): it runs without aws_cdk and Node.js, and the
construct library never imports it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "cpu-cluster.yaml"

WITHOUT_CDK = """
import sys
sys.modules["aws_cdk"] = None  # importing it now fails: the emulator must not need it
sys.modules["jsii"] = None
import hyperpod_local
from hyperpod_local import agent, cli, cluster, drill, layout, metrics, platform, staging
from hyperpod_local.layout import local_parameters, plan_layout
from hyperpod_cdk.config import load_config
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


def test_its_command_line_is_its_own() -> None:
    script = Path(sys.executable).with_name("hyperpod-local")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "up" in result.stdout and "down" in result.stdout


def test_the_construct_library_does_not_import_the_emulator() -> None:
    code = (
        "import sys, hyperpod_cdk.stacks, hyperpod_cdk.constructs, hyperpod_cdk.publishing.command, "
        "hyperpod_cdk.validate; print('hyperpod_local' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
