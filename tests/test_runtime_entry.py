"""The node runtime's command line, run from a copy of the uploaded prefix as HyperPod would."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hyperpod_cdk.constructs.lifecycle import staged_assets
from runtime_fakes import resource_config
from training_runtime.groups import GroupSpec
from training_runtime.params import ProvisioningParameters

PARAMS = ProvisioningParameters(
    cluster_name="c1",
    mode="lifecycle-driven",
    groups=(
        GroupSpec("controller", "controller", "ml.m5.large"),
        GroupSpec("workers", "compute", "ml.c5.large"),
        GroupSpec("empty", "compute", "ml.c5.large"),
    ),
)
RESOURCES = resource_config(
    {"controller": [("controller-1", "10.1.0.5")], "workers": [("workers-1", "10.1.0.6")], "empty": []}
)


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """The lifecycle prefix as a node downloads it (scripts, runtime, parameters) and an empty fake root."""
    shutil.copytree(staged_assets(), tmp_path / "prefix")
    (tmp_path / "prefix" / PARAMS.file_name).write_text(PARAMS.dumps())
    (tmp_path / "resource_config.json").write_text(json.dumps(RESOURCES))
    (tmp_path / "root").mkdir()
    return tmp_path / "prefix"


def run(prefix: Path, command: str, ip: str = "10.1.0.6", *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "training_runtime",
            command,
            "--assets-dir",
            str(prefix),
            "--ip",
            ip,
            "--resource-config",
            str(prefix.parent / "resource_config.json"),
            "--root",
            str(prefix.parent / "root"),
            *extra,
        ],
        cwd=prefix,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONPATH": str(prefix), "PATH": "/usr/bin:/bin"},
    )


def events(result: subprocess.CompletedProcess[str]) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def untouched(prefix: Path) -> bool:
    return not any((prefix.parent / "root").iterdir())


def test_validate_names_the_node_group_and_role(prefix: Path) -> None:
    result = run(prefix, "validate")
    assert result.returncode == 0, result.stdout + result.stderr
    node = next(e for e in events(result) if e["event"] == "node")
    assert (node["group"], node["role"], node["instance"], node["platform"]) == (
        "workers",
        "compute",
        "workers-1",
        "generic",
    )


def test_plan_lists_the_steps_and_changes_nothing(prefix: Path) -> None:
    result = run(prefix, "plan", "10.1.0.6", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [e for e in events(result) if "step" in e and "needed" in e]
    assert [r["step"] for r in rows][:5] == [
        "installed-runtime",
        "health-checks",
        "hosts",
        "packages:slurm",
        "shared-storage",
    ]
    slurmd = next(r for r in rows if r["step"] == "daemon:slurmd")
    assert slurmd["needed"] and rows[-1]["step"] == "daemon:prometheus-node-exporter" and rows[-1]["needed"]
    assert untouched(prefix)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda p: (p / PARAMS.file_name).write_text('{"version": "1.0.0"}'), "not produced by hyperpod-cdk"),
        (lambda p: (p.parent / "resource_config.json").write_text("{not json"), "not valid JSON"),
        (
            lambda p: (p.parent / "resource_config.json").write_text(json.dumps({"InstanceGroups": [{"Name": "x"}]})),
            "not in the parameters file",
        ),
        (
            lambda p: (p.parent / "resource_config.json").write_text(
                json.dumps({"InstanceGroups": [{"Name": "workers", "Instances": [{"InstanceName": "w"}]}]})
            ),
            "InstanceGroups[0].Instances[0].CustomerIpAddress",
        ),
    ],
    ids=["parameters", "resource-config-json", "unknown-group", "instance-without-address"],
)
def test_malformed_inputs_fail_with_one_line_and_leave_the_node_untouched(prefix: Path, damage, expected) -> None:
    damage(prefix)
    result = run(prefix, "bootstrap")
    assert result.returncode == 2
    failure = events(result)[-1]
    assert failure["event"] == "failed" and failure["step"] == "inputs" and expected in failure["error"]
    assert result.stderr.startswith("hyperpod-cdk: FAILED at inputs: ")
    assert expected in result.stderr.splitlines()[0]  # the one line says what is wrong
    assert untouched(prefix)


def test_unknown_node_fails_clearly(prefix: Path) -> None:
    result = run(prefix, "bootstrap", "192.0.2.1")
    assert result.returncode == 2 and "192.0.2.1" in events(result)[-1]["error"]
    assert untouched(prefix)


def test_a_type_left_to_the_resource_config_is_resolved_or_named(prefix: Path) -> None:
    """A template with an instance-type parameter writes no type for that group; the node reads HyperPod's."""
    open_type = ProvisioningParameters(
        cluster_name=PARAMS.cluster_name,
        mode=PARAMS.mode,
        groups=tuple(GroupSpec(g.name, g.role, None) if g.name == "workers" else g for g in PARAMS.groups),
    )
    (prefix / open_type.file_name).write_text(open_type.dumps())
    result = run(prefix, "bootstrap")
    assert result.returncode == 2 and untouched(prefix)
    assert "group 'workers' has no InstanceType" in result.stderr.splitlines()[0]
    with_type = json.loads(json.dumps(RESOURCES))
    for group in with_type["InstanceGroups"]:
        group["InstanceType"] = "ml.c5.large"
    (prefix.parent / "resource_config.json").write_text(json.dumps(with_type))
    result = run(prefix, "validate")
    assert result.returncode == 0, result.stdout + result.stderr
