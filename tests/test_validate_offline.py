"""`hyperpod-cdk validate` and `schema` run offline: no aws_cdk import, no Node.js on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import sys
from hyperpod_cdk.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m == "aws_cdk" or m.startswith(("aws_cdk.", "jsii")))
print("LOADED=" + ",".join(loaded), file=sys.stderr)
sys.exit(code)
"""


def run_without_node(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh interpreter whose PATH holds only the interpreter's directory (no node, no npx)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": bin_dir, "HOME": os.environ.get("HOME", "/root"), "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_no_node_on_the_probe_path() -> None:
    bin_dir = Path(sys.executable).parent
    assert not (bin_dir / "node").exists(), "the probe PATH must not hold node"


def test_validate_runs_without_node_and_without_cdk(tmp_path: Path) -> None:
    good = ROOT / "examples" / "gpu-cluster.yaml"
    result = run_without_node("validate", str(good), "--region", "us-west-2")
    assert result.returncode == 0, result.stderr
    assert "is valid" in result.stdout
    assert "LOADED=\n" in result.stderr or result.stderr.strip().endswith("LOADED="), result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster_name: -bad-\nnetwork: {cidr: not-a-cidr}\n")
    result = run_without_node("validate", str(bad), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert {p["rule"] for p in report["problems"]} == {"CL-NAME", "NET-CIDR"}
    assert result.stderr.strip().endswith("LOADED=")


def test_schema_runs_without_node_and_without_cdk() -> None:
    result = run_without_node("schema")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["title"] == "hyperpod-cdk cluster configuration"
    assert result.stderr.strip().endswith("LOADED=")
