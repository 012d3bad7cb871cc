"""`hyperpod-cdk plan CONFIG`: offline against ``--previous FILE``, and against a deployed example (its stack in
moto, its cluster in the emulated control plane: tests/plan_support.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.aws.session import make_session
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.deployed.config import deployed_config
from hyperpod_cdk.deployed.stack import Deployed
from ops_support import Operator, aws_env, moto_url  # noqa: F401
from plan_support import cluster_groups, control_plane, deploy_stack, snapshot

EXAMPLES = Path(__file__).parent.parent / "examples"
EXAMPLE = "continuous-cluster"
NODE_TYPE_QUOTE = "NodeType is immutable. Once set during cluster creation, it cannot be changed."


def edited(tmp_path: Path, example: str, *edits: tuple[str, str], name: str = "new.yaml") -> str:
    text = (EXAMPLES / f"{example}.yaml").read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(text)
    return str(path)


LOGIN_TO_COMPUTE = ("  - name: login\n    role: login\n", "  - name: login\n    role: compute\n")
GPU_COUNT = ("    count: 4\n", "    count: 6\n")


def test_offline_refused_change_exits_1_naming_the_field_and_aws_quote(tmp_path: Path) -> None:
    new = edited(tmp_path, EXAMPLE, LOGIN_TO_COMPUTE)
    result = Operator()("plan", new, "--previous", str(EXAMPLES / f"{EXAMPLE}.yaml"), "--json")
    assert result.code == 1, result.err
    (change,) = result.json()["changes"]
    assert (change["path"], change["before"], change["after"]) == ("instance_groups[1].role", "login", "compute")
    assert change["kind"] == "refused" and change["blocks"] is True
    assert NODE_TYPE_QUOTE in change["quote"]
    assert change["source"] == "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ref.html"
    text = Operator()("plan", new, "--previous", str(EXAMPLES / f"{EXAMPLE}.yaml"))
    assert text.code == 1
    assert "instance_groups[1].role" in text.out and "refused (blocks) [1]" in text.out
    assert f'[1] AWS: "{NODE_TYPE_QUOTE}' in text.out
    assert "1 of 1 changes block the deploy: instance_groups[1].role" in text.out


def test_offline_in_place_change_exits_0(tmp_path: Path) -> None:
    new = edited(tmp_path, EXAMPLE, GPU_COUNT)
    result = Operator()("plan", new, "--previous", str(EXAMPLES / f"{EXAMPLE}.yaml"), "--json")
    assert result.code == 0, result.err
    (change,) = result.json()["changes"]
    assert (change["path"], change["before"], change["after"], change["kind"]) == (
        "instance_groups[2].count",
        4,
        6,
        "in-place",
    )
    assert change["blocks"] is False and change["why"] and change["todo"]


def test_offline_no_change_and_a_bad_previous_file(tmp_path: Path) -> None:
    same = Operator()("plan", str(EXAMPLES / f"{EXAMPLE}.yaml"), "--previous", str(EXAMPLES / f"{EXAMPLE}.yaml"))
    assert same.code == 0 and "No change to the deployed config." in same.out
    bad = tmp_path / "old.yaml"
    bad.write_text("instance_groups: 3\n")
    result = Operator()("plan", str(EXAMPLES / f"{EXAMPLE}.yaml"), "--previous", str(bad))
    assert result.code == 2
    assert "instance_groups" in result.err and "hyperpod-cdk validate" in result.err


@pytest.fixture
def deployed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The example deployed: its stack in moto, its cluster in the control plane; ``targets`` may be edited
    before ``start()`` (what the scaler or an operator changed)."""
    request.getfixturevalue("aws_env")
    _, template, _ = snapshot(EXAMPLE)
    state: dict[str, Any] = {"template": template, "groups": cluster_groups(template), "targets": {}}
    with_cluster: list[Any] = []

    def start(stack: bool = True) -> None:
        if stack:
            deploy_stack(make_session(None, None), EXAMPLE, state["template"])
        plane = control_plane(EXAMPLE, state["groups"], state["targets"])
        with_cluster.append(plane)
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", plane.__enter__())

    state["start"] = start
    yield state
    for plane in with_cluster:
        plane.__exit__(None, None, None)


def test_deployed_in_place_change_exits_0(tmp_path: Path, deployed: dict[str, Any]) -> None:
    deployed["start"]()
    result = Operator()("plan", edited(tmp_path, EXAMPLE, GPU_COUNT), "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["compared_with"].startswith("stack hyperpod-continuous-cluster and cluster continuous-cluster")
    assert [(c["path"], c["before"], c["after"], c["kind"]) for c in report["changes"]] == [
        ("instance_groups[2].count", 4, 6, "in-place")
    ]
    assert report["drift"] == [] and report["notes"] == []


def test_deployed_refused_change_exits_1_with_aws_quote(tmp_path: Path, deployed: dict[str, Any]) -> None:
    deployed["start"]()
    result = Operator()("plan", edited(tmp_path, EXAMPLE, LOGIN_TO_COMPUTE))
    assert result.code == 1, result.err
    assert "instance_groups[1].role" in result.out and "refused (blocks)" in result.out
    assert NODE_TYPE_QUOTE in result.out


def test_drift_scaled_outside_cloudformation_and_a_group_added(tmp_path: Path, deployed: dict[str, Any]) -> None:
    deployed["targets"]["gpu"] = 7
    extra = {**deployed["groups"][2], "InstanceGroupName": "gpu-extra", "InstanceCount": 1}
    deployed["groups"] = [*deployed["groups"], extra]
    deployed["start"]()
    result = Operator()("plan", str(EXAMPLES / f"{EXAMPLE}.yaml"), "--json")
    assert result.code == 0, result.err  # drift alone does not block
    report = result.json()
    assert report["changes"] == []
    drift = {(d["group"], d["what"]): d for d in report["drift"]}
    assert set(drift) == {("gpu", "count"), ("gpu-extra", "group")}
    assert (drift["gpu", "count"]["deployed"], drift["gpu", "count"]["old"], drift["gpu", "count"]["new"]) == (7, 4, 4)
    assert "removes 3 nodes" in drift["gpu", "count"]["note"]
    assert drift["gpu-extra", "group"]["deployed"] == "present (1 nodes)"
    assert drift["gpu-extra", "group"]["old"] == "absent"
    text = Operator()("plan", str(EXAMPLES / f"{EXAMPLE}.yaml"))
    assert "Drift" in text.out and "gpu-extra" in text.out


@pytest.mark.usefixtures("aws_env")
def test_nothing_deployed_exits_0_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    with control_plane("another-cluster", []) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", url)
        result = Operator()("plan", str(EXAMPLES / f"{EXAMPLE}.yaml"), "--json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["changes"] == [] and report["drift"] == []
    assert any("nothing deployed" in n for n in report["notes"])
    assert any("no CloudFormation stack 'hyperpod-continuous-cluster'" in n for n in report["notes"])


def test_a_launch_choice_in_the_template_is_not_a_change() -> None:
    """A count the template takes from a stack parameter (a ``Ref``) is not the config's: no change is made up."""
    new = parse_model(_example())
    _, template, _ = snapshot(EXAMPLE)
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    cluster["Properties"]["InstanceGroups"][2]["InstanceCount"] = {"Ref": "GpuCount"}
    cluster["Properties"]["InstanceGroups"][1]["ThreadsPerCore"] = 2
    before = deployed_config(new, Deployed("s", "c", template=template, stack_parameters={"GpuCount": "9"}))
    assert before.instance_groups[2].count == 4  # the new config's: not compared
    assert before.instance_groups[1].threads_per_core == 2  # a literal: compared


def _example() -> Any:
    import yaml

    return yaml.safe_load((EXAMPLES / f"{EXAMPLE}.yaml").read_text())


def _read_back(example: str, edit: Any = None) -> list[tuple[str, Any, Any]]:
    """The changes between an example and its own snapshot read back as deployed, the template ``edit``ed."""
    import yaml

    from hyperpod_cdk.aws_data.update_policy import changes

    stack, template, parameters = snapshot(example)
    if edit is not None:
        edit(template, parameters["content"])
    new = parse_model(yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text()))
    found = Deployed(stack, new.cluster_name, template=template, parameters_file=parameters["content"])
    return [(c.path, c.before, c.after) for c in changes(deployed_config(new, found), new)]


@pytest.mark.parametrize(
    "example",
    sorted(
        p.name.split(".")[0]
        for p in Path(__file__).parent.glob("snapshots/*.parameters.json")
        if (EXAMPLES / f"{p.name.split('.')[0]}.yaml").exists()
    ),
)
def test_each_example_read_back_from_its_snapshot_is_unchanged(example: str) -> None:
    assert _read_back(example) == []


def test_deployed_values_read_back_from_the_template_and_parameters_file() -> None:
    def edit(template: dict[str, Any], parameters: dict[str, Any]) -> None:
        resources = template["Resources"].values()
        (cluster,) = [r["Properties"] for r in resources if r["Type"] == "AWS::SageMaker::Cluster"]
        cluster["NodeRecovery"] = "None"
        controller, login, gpu = cluster["InstanceGroups"]
        controller["InstanceType"] = "ml.m5.4xlarge"
        login["ThreadsPerCore"] = 2
        login["SlurmConfig"]["NodeType"] = "Compute"
        gpu.update(
            InstanceCount=3,
            MinInstanceCount=1,
            OnStartDeepHealthChecks=["InstanceStress"],
            ImageId="ami-0123456789abcdef0",
        )
        gpu["InstanceStorageConfigs"][0]["EbsVolumeConfig"]["VolumeSizeInGB"] = 400
        gpu["SlurmConfig"]["PartitionNames"] = ["big"]
        (lustre,) = [r for r in resources if r["Properties"].get("FileSystemType") == "LUSTRE"]
        lustre["Properties"]["StorageCapacity"] = 2400
        lustre["DeletionPolicy"] = "Delete"
        parameters["hyperpod_cdk"]["fsx_mount_path"] = "/lustre"

    found = {path: (before, after) for path, before, after in _read_back(EXAMPLE, edit)}
    assert found == {
        "node_recovery": ("None", "Automatic"),
        "fsx_mount_path": ("/lustre", "/fsx"),
        "instance_groups[0].instance_type": ("ml.m5.4xlarge", "ml.m5.2xlarge"),
        "instance_groups[1].threads_per_core": (2, 1),
        "instance_groups[1].role": ("compute", "login"),
        "instance_groups[2].count": (3, 4),
        "instance_groups[2].min_count": (1, 2),
        "instance_groups[2].deep_health_checks": (["InstanceStress"], ["InstanceStress", "InstanceConnectivity"]),
        "instance_groups[2].image_id": ("ami-0123456789abcdef0", None),
        "instance_groups[2].ebs_volume_gib": (400, 500),
        "instance_groups[2].partition": ("big", "gpu"),
        "storage.storage_capacity_gib": (2400, 4800),
        "storage.removal_policy": ("destroy", "retain"),
    }


def test_groups_the_template_has_and_the_config_not_and_the_reverse() -> None:
    def edit(template: dict[str, Any], parameters: dict[str, Any]) -> None:
        (cluster,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
        old = {**cluster["InstanceGroups"][2], "InstanceGroupName": "gpu-old"}
        cluster["InstanceGroups"] = [*cluster["InstanceGroups"][:2], old]

    found = _read_back(EXAMPLE, edit)
    assert [(path, before is None, after is None) for path, before, after in found] == [
        ("instance_groups[2]", True, False),  # gpu: new
        ("instance_groups[2]", False, True),  # gpu-old: gone (its index in the deployed config)
    ]


def test_drift_from_the_counts_synth_recorded_in_cdk_context(tmp_path: Path, deployed: dict[str, Any]) -> None:
    """A scaled group: synth writes the count cdk.context.json records, so a scaler's later change is drift."""
    deployed["targets"]["gpu"] = 6  # the scaler grew the group after the counts were recorded
    deployed["start"]()
    scaled = edited(tmp_path, EXAMPLE, ("    min_count: 2\n", "    min_count: 2\n    scaling: {min: 2, max: 8}\n"))
    fresh = Operator()("plan", scaled, "--json", "--context-file", str(tmp_path / "absent.json")).json()
    assert fresh["drift"] == []  # synth takes the live count: nothing moves
    key = "hyperpod-cdk:deployed-counts:region=us-west-2:cluster=continuous-cluster"
    context = tmp_path / "cdk.context.json"
    context.write_text(json.dumps({key: {"controller": 1, "login": 1, "gpu": 4}}))
    report = Operator()("plan", scaled, "--json", "--context-file", str(context)).json()
    (row,) = report["drift"]
    assert (row["group"], row["what"], row["deployed"], row["old"], row["new"]) == ("gpu", "count", 6, 4, 4)
    assert "removes 2 nodes" in row["note"]
    assert any(f"cdk context --reset {key}" in n for n in report["notes"])


def test_plan_says_whether_the_slurm_it_deploys_is_affected(tmp_path: Path) -> None:
    """The security gate in plan: the AMI's default (24.11.0: no fixed 24.11 release) for a config without
    runtime.slurm.version; the 25.11 line in lifecycle-driven mode; a custom AMI's Slurm is not known."""
    previous = str(EXAMPLES / "cpu-cluster.yaml")
    result = Operator()("plan", previous, "--previous", previous, "--json")
    found = result.json()["slurm_security"]
    assert (found["major"], found["release"], found["affected"]) == ("24.11", "24.11.0", True)
    assert found["fixed_by"].startswith("no fixed release exists for the 24.11 line") and len(found["cves"]) == 9
    text = Operator()("plan", previous, "--previous", previous)
    assert text.code == 0 and "Slurm security: 24.11, the AMI's default" in text.out
    lifecycle = ("cluster_name:", "mode: lifecycle-driven\ncluster_name:")
    chosen = edited(tmp_path, "cpu-cluster", lifecycle, ("runtime:\n", "runtime:\n  slurm: {version: '25.11'}\n"))
    found = Operator()("plan", chosen, "--previous", previous, "--json").json()["slurm_security"]
    assert (found["major"], found["from"], found["release"]) == ("25.11", "runtime.slurm.version", None)
    assert found["affected"] is True and found["fixed_by"] == "Slurm 25.11.8 or later"
    custom = edited(tmp_path, "cpu-cluster", ("    count: 1\n", "    count: 1\n    image_id: ami-0123456789abcdef0\n"))
    found = Operator()("plan", custom, "--previous", previous, "--json").json()["slurm_security"]
    assert found["custom_ami_groups"] == ["controller-machine"]
    assert "use a custom AMI: its Slurm is not known here" in Operator()("plan", custom, "--previous", previous).out
