"""The node runtime's entry point, run from a copy of the uploaded prefix as HyperPod would."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hyperpod_cdk.constructs.lifecycle import staged_assets
from training_runtime.params import GroupSpec, ProvisioningParameters

PARAMS = ProvisioningParameters(
    cluster_name="c1",
    mode="api-driven",
    groups=(
        GroupSpec("controller", "controller", "ml.m5.large"),
        GroupSpec("workers", "compute", "ml.c5.large"),
    ),
)
RESOURCE_CONFIG = {
    "ClusterConfig": {"ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefghijkl"},
    "InstanceGroups": [
        {
            "Name": "controller",
            "Instances": [{"InstanceName": "controller-1", "CustomerIpAddress": "10.1.0.5"}],
        },
        {"Name": "workers", "Instances": [{"InstanceName": "workers-1", "CustomerIpAddress": "10.1.0.6"}]},
        {"Name": "empty", "Instances": None},
    ],
}


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """The lifecycle prefix as a node downloads it: scripts, runtime, parameters."""
    shutil.copytree(staged_assets(), tmp_path / "prefix")
    (tmp_path / "prefix" / PARAMS.file_name).write_text(PARAMS.dumps())
    (tmp_path / "resource_config.json").write_text(json.dumps(RESOURCE_CONFIG))
    return tmp_path / "prefix"


def run(prefix: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "training_runtime", *args, "--assets-dir", str(prefix)],
        cwd=prefix,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONPATH": str(prefix), "PATH": "/usr/bin:/bin"},
    )


def bootstrap(prefix: Path, ip: str) -> subprocess.CompletedProcess[str]:
    return run(prefix, "bootstrap", "--resource-config", str(prefix.parent / "resource_config.json"), "--ip", ip)


def events(result: subprocess.CompletedProcess[str]) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_bootstrap_identifies_the_node_group(prefix: Path) -> None:
    result = bootstrap(prefix, "10.1.0.6")
    assert result.returncode == 0, result.stdout + result.stderr
    role = next(e for e in events(result) if e["event"] == "role")
    assert (role["group"], role["role"]) == ("workers", "compute")
    assert events(result)[-1]["event"] == "done"


def test_unknown_node_fails_with_one_clear_line(prefix: Path) -> None:
    result = bootstrap(prefix, "192.0.2.1")
    assert result.returncode == 2
    assert events(result)[-1]["event"] == "failed"
    assert "no instance group" in events(result)[-1]["error"]


def test_malformed_parameters_fail_before_anything_else(prefix: Path) -> None:
    (prefix / PARAMS.file_name).write_text('{"version": "1.0.0"}')
    result = run(prefix, "validate")
    assert result.returncode == 2
    failure = events(result)[-1]
    assert failure["step"] == "parameters" and "not produced by hyperpod-cdk" in failure["error"]
