"""The runtime as installed on a node: package copy, node facts, the launch wrapper."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from runtime_fakes import fake_node, touch
from training_runtime.emulation import Emulation
from training_runtime.facts import FactsError, load_facts
from training_runtime.node import HYPERPOD_MARKER
from training_runtime.paths import FACTS_PATH, INSTALL_DIR
from training_runtime.steps.installed import LAUNCH_WRAPPER, InstalledRuntime, package_files


def test_installs_the_package_facts_and_wrapper_once(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="workers-2")
    step = InstalledRuntime()
    assert step.needed(node)
    step.apply(node)
    assert not step.needed(node)

    installed = tmp_path / INSTALL_DIR.lstrip("/") / "training_runtime"
    assert {p: installed.joinpath(p).read_bytes() for p in package_files()} == package_files()
    assert not list(installed.rglob("__pycache__"))
    facts = load_facts(tmp_path)
    assert (facts.instance_name, facts.group, facts.role, facts.platform) == (
        "workers-2",
        "workers",
        "compute",
        "generic",
    )
    assert (facts.instance_type, facts.neuron_devices, facts.neuron_cores) == ("ml.trn1.32xlarge", 16, 32)
    assert facts.efa_interfaces == 8 and facts.gpus == 0 and facts.shared_mount == "/fsx"
    wrapper = tmp_path / LAUNCH_WRAPPER.lstrip("/")
    assert wrapper.stat().st_mode & 0o777 == 0o755
    assert f"PYTHONPATH={INSTALL_DIR} exec python3 -m training_runtime launch" in wrapper.read_text()


def test_a_changed_package_file_is_reinstalled(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    step = InstalledRuntime()
    step.apply(node)
    stale = tmp_path / INSTALL_DIR.lstrip("/") / "training_runtime" / "launch.py"
    stale.write_text("# an older runtime\n")
    stamp = tmp_path / InstalledRuntime.STAMP.lstrip("/")
    stamp.write_text("older\n")
    assert step.needed(node)
    step.apply(node)
    assert stale.read_bytes() == package_files()["launch.py"]


def test_hyperpod_node_without_fsx_has_no_shared_mount(tmp_path: Path) -> None:
    touch(tmp_path, HYPERPOD_MARKER + "/.keep")
    node = fake_node(tmp_path, fsx=False, mode="api-driven")
    InstalledRuntime().apply(node)
    facts = load_facts(tmp_path)
    assert facts.platform == "hyperpod" and facts.shared_mount is None


def test_facts_file_is_world_readable_json_without_secrets(tmp_path: Path) -> None:
    node = fake_node(tmp_path, options={"accounting": {"enabled": True}})
    InstalledRuntime().apply(node)
    path = tmp_path / FACTS_PATH.lstrip("/")
    assert path.stat().st_mode & 0o777 == 0o644
    assert set(json.loads(path.read_text())) == {
        "cluster",
        "instance_name",
        "instance_type",
        "group",
        "role",
        "platform",
        "shared_mount",
        "cpus",
        "gpus",
        "neuron_devices",
        "neuron_cores",
        "efa_interfaces",
        "emulated_hardware",
        "slurm_name",
    }
    assert json.loads(path.read_text())["slurm_name"] == node.instance.name  # the generic platform's names
    assert json.loads(path.read_text())["emulated_hardware"] is False, "a deployed node checks its devices"
    emulated = fake_node(tmp_path / "local", emulation=Emulation(hardware=True))
    InstalledRuntime().apply(emulated)
    local = tmp_path / "local" / FACTS_PATH.lstrip("/")
    assert json.loads(local.read_text())["emulated_hardware"] is True


def test_missing_facts_say_how_to_fix(tmp_path: Path) -> None:
    try:
        load_facts(tmp_path)
    except FactsError as error:
        assert "was not bootstrapped by hyperpod-cdk" in str(error) and "--instance-type" in str(error)
    else:
        raise AssertionError("load_facts did not fail")


def test_installed_copy_runs_on_its_own(tmp_path: Path) -> None:
    """The copy under /opt/hyperpod-cdk/lib is a complete package: its launcher runs from there."""
    node = fake_node(tmp_path)
    InstalledRuntime().apply(node)
    result = subprocess.run(
        ["python3", "-m", "training_runtime", "launch", "--dry-run", "--root", str(tmp_path), "--", "t.py"],
        cwd="/",
        env={"PYTHONPATH": str(tmp_path / INSTALL_DIR.lstrip("/")), "SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "w1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "family trn1, platform generic, 1 node(s) x 32 process(es)" in result.stdout
