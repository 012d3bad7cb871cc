"""Operator commands never import aws_cdk or need Node; `--help` does not even import boto3 or rich."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ops_support import MotoCluster, aws_env, moto_url  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import sys
from hyperpod_cdk.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as done:
    code = done.code
heavy = ("aws_cdk", "jsii", "boto3", "botocore", "rich")
loaded = sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy[:2])))
print("LOADED=" + ",".join(sorted({m.split(".")[0] for m in loaded})), file=sys.stderr)
sys.exit(code)
"""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh interpreter whose PATH holds only the interpreter's directory (no node)."""
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    env.update({"PATH": str(Path(sys.executable).parent), "HOME": os.environ.get("HOME", "/root")})
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_help_imports_neither_cdk_nor_boto3_nor_rich() -> None:
    for args in (["--help"], ["status", "--help"], ["reboot", "--help"], ["publish", "--help"]):
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip().endswith("LOADED="), (args, result.stderr)


@pytest.mark.usefixtures("aws_env")
def test_an_operator_command_runs_without_cdk_or_node() -> None:
    MotoCluster("probe", {"controller": ("ml.m5.xlarge", 1, "Controller")}).create()
    result = run_cli("status", "probe", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "InService"
    assert result.stderr.strip().endswith("LOADED=boto3,botocore"), result.stderr  # --json needs no rich
