"""``runtime.slurm.version``: /opt/slurm switched to the AMI's other Slurm major before any Slurm daemon starts.

The AMI's two directories and the link are built under a temporary root (AWS's runbook: awslabs/awsome-distributed-ai
PR #1107); the switch happens only where nothing of Slurm runs yet, and is refused, naming why, everywhere else.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from hyperpod_cdk.validate import validate_file
from runtime_fakes import fake_node, running_daemon, touch
from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.plan import describe_plan
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.slurm import slurmd
from training_runtime.steps.slurm_version import SlurmVersion, link_target

SLURM_CONF = "SlurmctldHost=ip-10-1-0-10\n"


def ami(root: Path, *, versions: tuple[str, ...] = ("24.11", "25.11"), active: str = "24.11") -> None:
    """HyperPod's AMI: /opt/slurm-<version> for each version, /opt/slurm a link to the active one, whose etc/
    holds HyperPod's slurm.conf and a plugstack include linked in (as AWS's scripts link pyxis.conf)."""
    (root / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
    for version in versions:
        (root / f"opt/slurm-{version}/etc").mkdir(parents=True)
    touch(root, f"/opt/slurm-{active}/etc/slurm.conf", SLURM_CONF)
    touch(root, f"/opt/slurm-{active}/etc/slurmdbd.conf", "StoragePass=x\n").chmod(0o600)
    (root / f"opt/slurm-{active}/etc/plugstack.conf.d").mkdir()
    os.symlink("/usr/local/share/pyxis/pyxis.conf", root / f"opt/slurm-{active}/etc/plugstack.conf.d/pyxis.conf")
    os.symlink(f"/opt/slurm-{active}", root / "opt/slurm")


def node_with(root: Path, version: str | None, *, instance: str = "workers-1") -> Node:
    options = {"slurm": {"version": version}} if version else {}
    return fake_node(root, instance=instance, options=options, fsx=False)


def test_the_switch_copies_the_configuration_and_points_the_link_at_the_version(tmp_path: Path) -> None:
    ami(tmp_path)
    node = node_with(tmp_path, "25.11")
    step = SlurmVersion("25.11")
    assert step.needed(node)
    step.apply(node)
    assert os.readlink(tmp_path / "opt/slurm") == "/opt/slurm-25.11"
    assert link_target(node) == "/opt/slurm-25.11"
    copied = tmp_path / "opt/slurm-25.11/etc"
    assert (copied / "slurm.conf").read_text() == SLURM_CONF
    assert (copied / "slurmdbd.conf").stat().st_mode & 0o777 == 0o600  # slurmdbd refuses a readable one
    assert os.readlink(copied / "plugstack.conf.d/pyxis.conf") == "/usr/local/share/pyxis/pyxis.conf"
    assert not step.needed(node)  # a re-run (a patched node runs the script again) leaves it
    assert (tmp_path / "opt/slurm-24.11/etc/slurm.conf").read_text() == SLURM_CONF  # the old one is kept


def test_the_step_comes_after_hyperpods_slurm_conf_and_before_any_daemon(tmp_path: Path) -> None:
    ami(tmp_path)
    names = [s.name for s in steps_for(node_with(tmp_path, "25.11", instance="controller-1"))]
    assert names.index("slurm-config") + 1 == names.index("slurm-version") < names.index("daemon:slurmctld")
    assert "slurm-version" not in [s.name for s in steps_for(node_with(tmp_path, None, instance="controller-1"))]
    generic = fake_node(tmp_path / "generic", options={"slurm": {"version": "25.11"}})
    assert "slurm-version" not in [s.name for s in steps_for(generic)]  # the host's Slurm: nothing to switch


def test_a_version_the_ami_lacks_is_refused_naming_the_ones_it_has(tmp_path: Path) -> None:
    ami(tmp_path)
    node = node_with(tmp_path, "26.05")
    with pytest.raises(StepFailed, match=r"no /opt/slurm-26.05 \(it carries /opt/slurm-24.11, /opt/slurm-25.11\)"):
        SlurmVersion("26.05").apply(node)
    assert link_target(node) == "/opt/slurm-24.11"
    [row] = describe_plan(node, [SlurmVersion("26.05")])
    assert row["actions"][0].startswith("REFUSE: this AMI has no /opt/slurm-26.05")


def test_an_ami_with_one_slurm_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "opt/slurm-25.11/etc").mkdir(parents=True)
    (tmp_path / "opt/slurm/etc").mkdir(parents=True)
    node = node_with(tmp_path, "25.11")
    with pytest.raises(StepFailed, match="/opt/slurm is not a link"):
        SlurmVersion("25.11").apply(node)


def test_no_switch_under_a_running_slurm_daemon(tmp_path: Path) -> None:
    """api-driven mode: HyperPod started slurmd before the script; switching now is AWS's manual runbook, not ours."""
    ami(tmp_path)
    node = node_with(tmp_path, "25.11")
    daemon = slurmd(node)
    running_daemon(node, daemon)
    node.run(list(daemon.argv))  # the recording runner's hook writes its pid file: slurmd runs
    with pytest.raises(StepFailed, match=r"slurmd already run from /opt/slurm-24\.11"):
        SlurmVersion("25.11").apply(node)
    assert link_target(node) == "/opt/slurm-24.11"
    assert not (tmp_path / "opt/slurm-25.11/etc/slurm.conf").exists()


def test_already_on_the_version_nothing_is_needed_even_with_slurm_running(tmp_path: Path) -> None:
    ami(tmp_path, active="25.11")
    node = node_with(tmp_path, "25.11")
    running_daemon(node, slurmd(node))
    node.run(list(slurmd(node).argv))
    assert not SlurmVersion("25.11").needed(node)


def _config(tmp_path: Path, mode: str) -> Path:
    path = tmp_path / f"{mode}.yaml"
    path.write_text(yaml.safe_dump({"mode": mode, "runtime": {"slurm": {"version": "25.11"}}}))
    return path


def test_validation_accepts_a_version_in_lifecycle_driven_mode_only(tmp_path: Path) -> None:
    _, lifecycle = validate_file(_config(tmp_path, "lifecycle-driven"), None, None)
    # Accepted; the security gate warns that 25.11 releases before 25.11.8 are affected (tests/test_slurm_security.py)
    assert [p.rule for p in lifecycle if "slurm.version" in p.path] == ["RT-SLURM-SECURITY"]
    assert all(p.level == "warning" for p in lifecycle if "slurm.version" in p.path)
    _, api = validate_file(_config(tmp_path, "api-driven"), None, None)
    assert [p.rule for p in api if "slurm.version" in p.path] == ["CL-SLURM-VERSION-MODE"]
