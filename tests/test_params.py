"""The parameters contract: one definition, read back exactly, malformed files rejected with every problem."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from runtime_fakes import fake_node, resource_config
from training_runtime.groups import GroupSpec
from training_runtime.hardware import hardware_for
from training_runtime.params import API_DRIVEN, LIFECYCLE_DRIVEN, ParametersError, ProvisioningParameters
from training_runtime.resources import ResourceConfig, ResourceConfigError
from training_runtime.steps.installed import node_facts
from training_runtime.steps.slurm import slurm_nodes


def params(**overrides: object) -> ProvisioningParameters:
    values: dict[str, object] = {
        "cluster_name": "c1",
        "mode": LIFECYCLE_DRIVEN,
        "groups": (
            GroupSpec("controller", "controller", "ml.m5.xlarge"),
            GroupSpec("login", "login", "ml.m5.xlarge"),
            GroupSpec("gpu", "compute", "ml.p5.48xlarge", "train"),
            GroupSpec("cpu", "compute", "ml.c5.4xlarge"),
        ),
        "fsx_dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        "fsx_mountname": "abcdefgh",
    }
    values.update(overrides)
    return ProvisioningParameters(**values)  # type: ignore[arg-type]


def test_hyperpod_keys_are_written_as_hyperpod_reads_them() -> None:
    data = params().to_json()
    assert data["version"] == "1.0.0"
    assert data["workload_manager"] == "slurm"
    assert data["controller_group"] == "controller"
    assert data["login_group"] == "login"
    assert data["worker_groups"] == [
        {"instance_group_name": "gpu", "partition_name": "train"},
        {"instance_group_name": "cpu", "partition_name": "cpu"},
    ]
    assert data["fsx_mountname"] == "abcdefgh"
    assert set(data) - {
        "version",
        "workload_manager",
        "controller_group",
        "login_group",
        "worker_groups",
        "fsx_dns_name",
        "fsx_mountname",
    } == {"hyperpod_cdk"}


def test_round_trip_is_exact() -> None:
    original = params(options={"accounting": True})
    assert ProvisioningParameters.loads(original.dumps()) == original


def test_file_name_depends_on_mode() -> None:
    assert params(mode=LIFECYCLE_DRIVEN).file_name == "provisioning_parameters.json"
    assert params(mode=API_DRIVEN).file_name == "hyperpod_cdk_parameters.json"


def test_every_problem_is_reported_at_once() -> None:
    data = params().to_json()
    ours = data["hyperpod_cdk"]
    ours["mode"] = "manual"
    ours["groups"][0]["role"] = "compute"  # no controller left
    ours["groups"][1]["name"] = "bad_name!"
    with pytest.raises(ParametersError) as error:
        ProvisioningParameters.from_json(data)
    text = str(error.value)
    assert "hyperpod_cdk.mode: got 'manual'" in text
    assert "hyperpod_cdk.groups[1].name: got 'bad_name!'" in text
    assert "exactly one" in text
    assert len(error.value.problems) >= 3


def test_hand_edited_hyperpod_keys_are_caught() -> None:
    data = params().to_json()
    data["controller_group"] = "somewhere-else"
    with pytest.raises(ParametersError, match="controller_group: got 'somewhere-else'"):
        ProvisioningParameters.from_json(data)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "expected a JSON object"),
        (json.dumps({"version": "1.0.0"}), "not produced by hyperpod-cdk"),
    ],
)
def test_malformed_files(text: str, message: str) -> None:
    with pytest.raises(ParametersError, match=message):
        ProvisioningParameters.loads(text)


def test_newer_contract_version_is_refused() -> None:
    data = params().to_json()
    data["hyperpod_cdk"]["contract_version"] = 99
    with pytest.raises(ParametersError, match="contract_version: got 99"):
        ProvisioningParameters.from_json(data)


def test_threads_per_core_is_carried_and_checked() -> None:
    smt = params(
        groups=(
            GroupSpec("controller", "controller", "ml.m5.xlarge"),
            GroupSpec("cpu", "compute", "ml.c5.4xlarge", threads_per_core=2),
        )
    )
    data = smt.to_json()
    assert [g["threads_per_core"] for g in data["hyperpod_cdk"]["groups"]] == [1, 2]
    assert ProvisioningParameters.loads(smt.dumps()) == smt
    for bad in (3, True, "2"):
        data["hyperpod_cdk"]["groups"][1]["threads_per_core"] = bad
        with pytest.raises(ParametersError, match=r"groups\[1\]\.threads_per_core: got"):
            ProvisioningParameters.from_json(data)


# --- an instance type left to HyperPod's resource config (a template with an instance-type parameter) -------


def open_type(name: str = "gpu") -> ProvisioningParameters:
    """The parameters file of a template whose group ``name`` has an instance-type parameter."""
    base = params()
    return params(
        groups=tuple(GroupSpec(g.name, g.role, None, g.partition) if g.name == name else g for g in base.groups)
    )


def test_a_null_or_absent_instance_type_is_read_as_left_open() -> None:
    data = open_type().to_json()
    assert data["hyperpod_cdk"]["groups"][2]["instance_type"] is None
    assert ProvisioningParameters.from_json(data).group("gpu").instance_type is None  # type: ignore[union-attr]
    del data["hyperpod_cdk"]["groups"][2]["instance_type"]  # CDK drops null values when it writes the file
    assert ProvisioningParameters.from_json(data) == open_type()
    data["hyperpod_cdk"]["groups"][2]["instance_type"] = ""
    with pytest.raises(
        ParametersError, match=r"groups\[2\]\.instance_type: got ''; expected an instance type, or null"
    ):
        ProvisioningParameters.from_json(data)


def test_the_node_takes_a_left_open_type_from_the_resource_config(tmp_path: Path) -> None:
    """Every reader on the node (slurm.conf's node sizes, the installed facts) sees the resolved type."""
    instances = {"controller": [("controller-1", "10.1.0.5")], "gpu": [("gpu-1", "10.1.0.6")], "cpu": []}
    node = fake_node(
        tmp_path, instance="gpu-1", params=open_type(), instances=instances, instance_types={"gpu": "ml.g5.8xlarge"}
    )
    assert node.group.instance_type == "ml.g5.8xlarge"
    assert node.params.group("gpu").instance_type == "ml.g5.8xlarge"  # type: ignore[union-attr]
    assert node.params.group("cpu").instance_type == "ml.c5.4xlarge"  # type: ignore[union-attr]  # the file's own
    assert [n.hardware for n in slurm_nodes(node)] == [hardware_for("ml.g5.8xlarge", {})]
    assert node_facts(node).instance_type == "ml.g5.8xlarge" and node_facts(node).gpus == 1


def test_a_left_open_type_missing_from_the_resource_config_names_the_group_and_the_fix(tmp_path: Path) -> None:
    instances = {"controller": [("controller-1", "10.1.0.5")], "gpu": [("gpu-1", "10.1.0.6")]}
    with pytest.raises(ResourceConfigError) as error:
        fake_node(tmp_path, instance="gpu-1", params=open_type(), instances=instances)
    message = str(error.value)
    assert "group 'gpu' has no InstanceType" in message
    assert "publish the template without that parameter" in message
    assert "parameters.instance_groups.gpu.instance_types" in message


def test_the_resource_config_instance_type_is_read_defensively() -> None:
    data = resource_config({"gpu": [], "cpu": [], "odd": []}, {"gpu": "ml.g5.8xlarge"})
    data["InstanceGroups"][2]["InstanceType"] = 7  # not a type: ignored, not fatal
    assert ResourceConfig.from_json(data).instance_types == {"gpu": "ml.g5.8xlarge"}


# --- the explicit FSx flag (published templates: API-driven, names only known at deploy) -------------------


def test_the_fsx_flag_says_fsx_without_its_names_and_round_trips() -> None:
    flagged = params(mode=API_DRIVEN, fsx=True, fsx_dns_name=None, fsx_mountname=None)
    data = flagged.to_json()
    assert data["hyperpod_cdk"]["fsx"] is True
    assert "fsx_dns_name" not in data
    read = ProvisioningParameters.loads(flagged.dumps())
    assert read == flagged
    assert read.has_fsx


def test_without_the_flag_fsx_follows_the_dns_name_as_before() -> None:
    assert "fsx" not in params().to_json()["hyperpod_cdk"]
    assert ProvisioningParameters.loads(params().dumps()).has_fsx
    assert not ProvisioningParameters.loads(params(fsx_dns_name=None, fsx_mountname=None).dumps()).has_fsx


def test_the_fsx_flag_false_wins_over_nothing_and_contradicting_names_are_refused() -> None:
    assert not params(fsx=False, fsx_dns_name=None, fsx_mountname=None).has_fsx
    data = params(mode=API_DRIVEN).to_json()
    data["hyperpod_cdk"]["fsx"] = False
    with pytest.raises(ParametersError, match=r"hyperpod_cdk\.fsx: false, but fsx_dns_name is"):
        ProvisioningParameters.from_json(data)
    data["hyperpod_cdk"]["fsx"] = "yes"
    with pytest.raises(ParametersError, match=r"hyperpod_cdk\.fsx: got 'yes'"):
        ProvisioningParameters.from_json(data)


def test_lifecycle_driven_mode_with_the_flag_needs_the_names_to_mount() -> None:
    flagged = params(mode=LIFECYCLE_DRIVEN, fsx=True, fsx_dns_name=None, fsx_mountname=None)
    with pytest.raises(ParametersError, match=r"required when hyperpod_cdk\.fsx is true in lifecycle-driven mode"):
        ProvisioningParameters.loads(flagged.dumps())
    ProvisioningParameters.loads(params(mode=LIFECYCLE_DRIVEN, fsx=True).dumps())  # with the names: fine


def test_the_openzfs_mount_is_carried_and_moves_the_homes() -> None:
    zfs = dataclasses.replace(params(), openzfs_mount_path="/home")
    data = zfs.to_json()
    assert data["hyperpod_cdk"]["openzfs_mount_path"] == "/home"
    assert ProvisioningParameters.loads(zfs.dumps()) == zfs
    assert (zfs.homes_dir, params().homes_dir) == ("/home", "/fsx/home")
    for bad in ("home", 7):
        data["hyperpod_cdk"]["openzfs_mount_path"] = bad
        with pytest.raises(ParametersError, match=r"hyperpod_cdk\.openzfs_mount_path: got"):
            ProvisioningParameters.from_json(data)


def test_a_groups_capacity_is_carried_checked_and_absent_when_not_said() -> None:
    written = params(
        groups=(
            GroupSpec("controller", "controller", "ml.m5.xlarge"),
            GroupSpec("gpu", "compute", "ml.p5.48xlarge", capacity="spot"),
            GroupSpec("cpu", "compute", "ml.c5.4xlarge", capacity="on-demand"),
            GroupSpec("other", "compute", "ml.c5.4xlarge"),
        )
    )
    data = json.loads(written.dumps())
    assert [g.get("capacity", "absent") for g in data["hyperpod_cdk"]["groups"]] == [
        "absent",
        "spot",
        "on-demand",
        "absent",
    ]
    read = ProvisioningParameters.from_json(data)
    assert read == written
    assert [g.name for g in read.groups if g.is_spot] == ["gpu"]
    data["hyperpod_cdk"]["groups"][3]["capacity"] = "Spot"
    with pytest.raises(ParametersError, match=r"groups\[3\]\.capacity: got 'Spot'; allowed: spot, on-demand"):
        ProvisioningParameters.from_json(data)


def test_the_emulation_key_round_trips_and_is_checked() -> None:
    """``hyperpod_cdk.emulation`` is written only by the local cluster; a deployed file has none."""
    from training_runtime.emulation import Emulation

    base = ProvisioningParameters(
        cluster_name="c",
        mode="api-driven",
        groups=(GroupSpec("ctl", "controller", "ml.m5.large"), GroupSpec("cpu", "compute", "ml.c5.4xlarge")),
    )
    assert "emulation" not in base.to_json()["hyperpod_cdk"] and base.emulated_hardware is False
    emulation = Emulation(hardware=True, imds_url="http://10.0.0.2:8111", sagemaker_url="http://10.0.0.3:8112")
    local = dataclasses.replace(base, emulation=emulation)
    assert local.to_json()["hyperpod_cdk"]["emulation"] == {
        "hardware": True,
        "imds_url": "http://10.0.0.2:8111",
        "sagemaker_url": "http://10.0.0.3:8112",
    }
    assert ProvisioningParameters.from_json(local.to_json()) == local and local.emulated_hardware is True
    broken = local.to_json()
    broken["hyperpod_cdk"]["emulation"] = {"hardware": "yes", "imds_url": "https://x", "sagemaker_url": 3, "extra": 1}
    with pytest.raises(ParametersError) as error:
        ProvisioningParameters.from_json(broken)
    assert len(error.value.problems) == 4, error.value.problems
    assert any("sagemaker_url: got 3" in p for p in error.value.problems)


def test_the_emulations_scaler_timing_is_carried_and_checked() -> None:
    from training_runtime.emulation import Emulation

    base = ProvisioningParameters(
        cluster_name="c",
        mode="api-driven",
        groups=(GroupSpec("ctl", "controller", "ml.m5.large"), GroupSpec("cpu", "compute", "ml.c5.4xlarge")),
    )
    timed = dataclasses.replace(base, emulation=Emulation(scaler_interval_s=1.0, scaler_minute_s=4.0))
    written = timed.to_json()["hyperpod_cdk"]["emulation"]
    assert written == {"hardware": False, "scaler_interval_s": 1.0, "scaler_minute_s": 4.0}
    assert ProvisioningParameters.from_json(timed.to_json()) == timed
    broken = timed.to_json()
    broken["hyperpod_cdk"]["emulation"] = {"scaler_interval_s": 0, "scaler_minute_s": True}
    with pytest.raises(ParametersError) as error:
        ProvisioningParameters.from_json(broken)
    assert len(error.value.problems) == 2, error.value.problems
    assert any("scaler_interval_s: got 0; expected a positive number" in p for p in error.value.problems)


def test_a_groups_scaling_is_carried_checked_and_absent_when_not_said() -> None:
    from training_runtime.scaling import ScalingSpec

    written = params(
        groups=(
            GroupSpec("controller", "controller", "ml.m5.xlarge"),
            GroupSpec("gpu", "compute", "ml.p5.48xlarge", scaling=ScalingSpec(0, 8, 30)),
            GroupSpec("cpu", "compute", "ml.c5.4xlarge"),
        )
    )
    data = json.loads(written.dumps())
    assert [g.get("scaling", "absent") for g in data["hyperpod_cdk"]["groups"]] == [
        "absent",
        {"min": 0, "max": 8, "idle_minutes": 30},
        "absent",
    ]
    assert ProvisioningParameters.from_json(data) == written
    del data["hyperpod_cdk"]["groups"][1]["scaling"]["idle_minutes"]
    assert ProvisioningParameters.from_json(data).groups[1].scaling == ScalingSpec(0, 8, 10)
    data["hyperpod_cdk"]["groups"][1]["scaling"] = {"min": 3, "max": 2, "idle_minutes": 0, "step": 1}
    with pytest.raises(ParametersError) as raised:
        ProvisioningParameters.from_json(data)
    message = str(raised.value)
    assert r"groups[1].scaling: unknown keys step; allowed: min, max, idle_minutes" in message
    assert "groups[1].scaling.idle_minutes: got 0; expected a whole number >= 1" in message
    assert "groups[1].scaling: min 3 is above max 2; set min <= max" in message
