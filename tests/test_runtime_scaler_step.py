"""The scaler's bootstrap step (training_runtime.steps.scaler): where it runs and what it writes."""

from __future__ import annotations

import json
from pathlib import Path

from runtime_fakes import fake_node
from training_runtime.emulation import Emulation
from training_runtime.groups import GroupSpec
from training_runtime.scaler.config import CONFIG_PATH, ScalerConfig
from training_runtime.scaling import ScalingSpec
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.scaler import SCALER_PROGRAM, UNIT_FILE, ScalerFiles, scaler_steps

SCALED = (
    GroupSpec("controller", "controller", "ml.m5.xlarge"),
    GroupSpec("login", "login", "ml.m5.large"),
    GroupSpec("workers", "compute", "ml.trn1.32xlarge", "trn", scaling=ScalingSpec(0, 8, 15)),
)


def test_only_the_primary_controller_of_a_cluster_with_a_scaled_group_runs_it(tmp_path: Path) -> None:
    controller = fake_node(tmp_path / "a", groups=SCALED, instance="controller-1")
    assert [s.name for s in scaler_steps(controller)] == [
        "scaler",
        "scaler-job-submit",  # tests/test_runtime_scaler_hold.py
        "scaler-job-submit-reconfigure",
        "daemon:hyperpod-cdk-scaler.service",
    ]
    names = [s.name for s in steps_for(controller)]
    assert names.index("scaler") > names.index("daemon:slurmctld")
    assert ScalerFiles().describe(controller) == [
        f"write {path} (scaled groups: workers 0..8)" for path in (CONFIG_PATH, SCALER_PROGRAM)
    ]
    assert scaler_steps(fake_node(tmp_path / "b", groups=SCALED)) == []  # a compute node
    assert scaler_steps(fake_node(tmp_path / "c", groups=SCALED, instance="login-1")) == []
    assert scaler_steps(fake_node(tmp_path / "d", instance="controller-1")) == []  # nothing scaled


def test_the_config_names_the_cluster_groups_and_aws_endpoint(tmp_path: Path) -> None:
    node = fake_node(tmp_path, groups=SCALED, instance="controller-1")
    ScalerFiles().apply(node)
    config = ScalerConfig.from_json(json.loads(node.path(CONFIG_PATH).read_text()))
    assert config.endpoint == "https://api.sagemaker.us-east-1.amazonaws.com/"
    assert config.region == "us-east-1" and config.cluster_name == "test"
    assert [(g.name, g.partition, g.scaling) for g in config.groups] == [("workers", "trn", ScalingSpec(0, 8, 15))]
    assert config.imds_url == "http://169.254.169.254"
    assert node.path(CONFIG_PATH).stat().st_mode & 0o777 == 0o600
    assert "training_runtime scaler run" in node.path(SCALER_PROGRAM).read_text()
    assert not ScalerFiles().needed(node)


def test_the_emulators_metadata_service_is_used(tmp_path: Path) -> None:
    node = fake_node(tmp_path, groups=SCALED, instance="controller-1", emulation=Emulation(imds_url="http://10.9.0.1"))
    ScalerFiles().apply(node)
    assert json.loads(node.path(CONFIG_PATH).read_text())["imds_url"] == "http://10.9.0.1"


def test_with_systemd_it_is_a_unit_that_restarts(tmp_path: Path) -> None:
    (tmp_path / "run" / "systemd" / "system").mkdir(parents=True)
    node = fake_node(tmp_path, groups=SCALED, instance="controller-1")
    ScalerFiles().apply(node)
    assert f"ExecStart={SCALER_PROGRAM}\nRestart=always" in node.path(UNIT_FILE).read_text()
    assert node.runner.commands == [["systemctl", "daemon-reload"]]  # type: ignore[attr-defined]


def test_the_emulated_control_plane_is_the_endpoint_when_the_parameters_name_one(tmp_path: Path) -> None:
    emulation = Emulation(sagemaker_url="http://10.89.0.1:8080/")
    node = fake_node(tmp_path, groups=SCALED, instance="controller-1", emulation=emulation)
    ScalerFiles().apply(node)
    written = json.loads(node.path(CONFIG_PATH).read_text())
    assert written["endpoint"] == "http://10.89.0.1:8080/"
    assert (written["interval_s"], written["minute_s"]) == (60.0, 60.0)  # AWS's minute unless the emulator says


def test_the_emulators_scaler_timing_reaches_the_service(tmp_path: Path) -> None:
    emulation = Emulation(scaler_interval_s=1.0, scaler_minute_s=4.0)
    node = fake_node(tmp_path, groups=SCALED, instance="controller-1", emulation=emulation)
    ScalerFiles().apply(node)
    config = ScalerConfig.from_json(json.loads(node.path(CONFIG_PATH).read_text()))
    assert (config.interval_s, config.minute_s) == (1.0, 4.0)
