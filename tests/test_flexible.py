"""Flexible instance groups (``instance_types``): the template's InstanceRequirements, the parameters contract, and
on the nodes each node's own type — slurm.conf and gres.conf lines, node facts (the launcher's family environment
and the health checks' expectations), and the local cluster's layout."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from builders import CONTROLLER, cluster_stack, only
from hyperpod_cdk.core.config import parse_config
from hyperpod_cdk.core.parameters import parameters_file
from hyperpod_cdk.model import InstanceGroup
from hyperpod_local.layout import plan_layout, resource_config
from hyperpod_local.overlay import host_hardware, local_parameters
from runtime_fakes import FakeHost, fake_node
from training_runtime.errors import StepFailed
from training_runtime.groups import GroupSpec
from training_runtime.launch import family_of
from training_runtime.params import ProvisioningParameters
from training_runtime.resources import ResourceConfig, ResourceConfigError, resolve_instance_types
from training_runtime.steps.installed import node_facts
from training_runtime.steps.slurm import rendered_files

GPU_TYPES = ("ml.g5.12xlarge", "ml.g5.xlarge")
FLEX_GPUS = InstanceGroup(name="gpus", instance_types=GPU_TYPES, count=2)
GROUPS = (
    GroupSpec("controller", "controller", "ml.m5.xlarge"),
    GroupSpec("gpus", "compute", None, "gpu", instance_types=GPU_TYPES),
)
INSTANCES: dict[str, Any] = {
    "controller": [("controller-1", "10.1.0.10")],
    "gpus": [("gpus-1", "10.1.0.11", "ml.g5.12xlarge"), ("gpus-2", "10.1.0.12", "ml.g5.xlarge")],
}


# --- the template and the parameters file ---------------------------------------------------------------
@pytest.fixture(scope="module")
def template() -> Template:
    stack, _ = cluster_stack(storage=False, groups=(CONTROLLER, FLEX_GPUS))
    return Template.from_stack(stack)


def test_a_flexible_group_is_instance_requirements_in_priority_order(template: Template) -> None:
    groups = {
        g["InstanceGroupName"]: g for g in only(template, "AWS::SageMaker::Cluster")[1]["Properties"]["InstanceGroups"]
    }
    assert groups["gpus"]["InstanceRequirements"] == {"InstanceTypes": list(GPU_TYPES)}
    assert "InstanceType" not in groups["gpus"]
    assert groups["controller"]["InstanceType"] == "ml.m5.xlarge"
    assert "InstanceRequirements" not in groups["controller"]


def test_the_parameters_file_leaves_a_flexible_groups_type_to_each_node() -> None:
    params = parameters_file(
        cluster_name="c",
        mode="lifecycle-driven",
        node_provisioning_mode=None,
        groups=(CONTROLLER.spec(), FLEX_GPUS.spec()),
        fsx_mount_path="/fsx",
        openzfs_mount_path=None,
        runtime_options=None,
    )
    written = params.to_json()["hyperpod_cdk"]["groups"]
    assert written[1]["instance_type"] is None and written[1]["instance_types"] == list(GPU_TYPES)
    assert "instance_types" not in written[0], "fixed-type groups are written as before"
    assert ProvisioningParameters.loads(params.dumps()) == params


def test_the_node_refuses_a_group_with_both_a_type_and_candidates() -> None:
    data = ProvisioningParameters("c", "lifecycle-driven", GROUPS).to_json()
    data["hyperpod_cdk"]["groups"][1]["instance_type"] = "ml.g5.xlarge"
    with pytest.raises(ValueError, match=r"groups\[1\]: gives both instance_type"):
        ProvisioningParameters.from_json(data)


# --- the nodes --------------------------------------------------------------------------------------------
def node(tmp_path: Path, name: str, instances: Any = INSTANCES, host: FakeHost | None = None) -> Any:
    return fake_node(tmp_path / name, instance=name, groups=GROUPS, instances=instances, fsx=False, host=host)


def test_slurm_conf_and_gres_conf_size_each_node_by_its_own_type(tmp_path: Path) -> None:
    files = {path.rsplit("/", 1)[1]: text for path, text, _, _ in rendered_files(node(tmp_path, "controller-1"))}
    lines = {line.split()[0]: line for line in files["slurm.conf"].splitlines() if line.startswith("NodeName=")}
    assert "CPUs=24 " in lines["NodeName=gpus-1"] and "Gres=gpu:a10g:4" in lines["NodeName=gpus-1"]
    assert "CPUs=2 " in lines["NodeName=gpus-2"] and "Gres=gpu:a10g:1" in lines["NodeName=gpus-2"]
    assert "NodeName=gpus-1 Name=gpu Type=a10g File=/dev/nvidia[0-3]" in files["gres.conf"]
    assert "NodeName=gpus-2 Name=gpu Type=a10g File=/dev/nvidia0" in files["gres.conf"]
    assert "PartitionName=gpu Nodes=gpus-[1-2]" in files["slurm.conf"]


def test_node_facts_are_the_nodes_own_type(tmp_path: Path) -> None:
    """What the launcher (family, processes per node) and the health checks (GPUs, EFA expected) read."""
    big, small = node_facts(node(tmp_path, "gpus-1")), node_facts(node(tmp_path, "gpus-2"))
    assert (big.instance_type, big.gpus, big.efa_interfaces, big.cpus) == ("ml.g5.12xlarge", 4, 1, 24)
    assert (small.instance_type, small.gpus, small.efa_interfaces, small.cpus) == ("ml.g5.xlarge", 1, 0, 2)


def test_the_launcher_family_follows_each_nodes_type(tmp_path: Path) -> None:
    types = ("ml.p5.48xlarge", "ml.p4d.24xlarge")
    groups = (GROUPS[0], GroupSpec("gpus", "compute", None, "gpu", instance_types=types))
    instances = {**INSTANCES, "gpus": [("gpus-1", "10.1.0.11", types[0]), ("gpus-2", "10.1.0.12", types[1])]}
    facts = [
        node_facts(fake_node(tmp_path / n, instance=n, groups=groups, instances=instances, fsx=False))
        for n in ("gpus-1", "gpus-2")
    ]
    assert [family_of(f.instance_type).name for f in facts] == ["p5", "p4d"]


def test_without_a_per_instance_type_the_node_asks_ec2_metadata(tmp_path: Path) -> None:
    bare = {**INSTANCES, "gpus": [("gpus-1", "10.1.0.11"), ("gpus-2", "10.1.0.12")]}
    asked = node(tmp_path, "gpus-2", bare, FakeHost("gpus-2", ec2_type="ml.g5.xlarge"))
    assert node_facts(asked).gpus == 1
    wrong = node(tmp_path, "gpus-1", bare, FakeHost("gpus-1", ec2_type="ml.p5.48xlarge"))
    with pytest.raises(
        ResourceConfigError, match=r"EC2 instance metadata says 'ml\.p5\.48xlarge'.*allowed: ml\.g5\.12xlarge"
    ):
        wrong.instance_type  # noqa: B018
    with pytest.raises(ResourceConfigError, match="no InstanceType in the resource config and no answer"):
        node(tmp_path, "gpus-2", bare).instance_type  # noqa: B018
    # The generic platform renders every node's line: a neighbour of unknown type cannot be sized.
    with pytest.raises(StepFailed, match="no InstanceType for gpus-1"):
        rendered_files(asked)


def test_an_instance_type_outside_the_groups_candidates_is_refused() -> None:
    from runtime_fakes import resource_config as fake_resources

    params = ProvisioningParameters("c", "lifecycle-driven", GROUPS)
    foreign = {**INSTANCES, "gpus": [("gpus-1", "10.1.0.11", "ml.p5.48xlarge")]}
    with pytest.raises(
        ResourceConfigError, match=re.escape("'gpus-1' of flexible group 'gpus' has InstanceType 'ml.p5.48xlarge'")
    ):
        resolve_instance_types(params, ResourceConfig.from_json(fake_resources(foreign)))


# --- the local cluster ------------------------------------------------------------------------------------
FLEX_CPU = {
    "cluster_name": "flex",
    "instance_groups": [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.large", "count": 1},
        {"name": "mixed", "instance_types": ["ml.c5.large", "ml.c5.xlarge"], "count": 2, "partition": "cpu"},
    ],
}


def test_the_local_cluster_gives_a_flexible_groups_nodes_its_types_in_turn() -> None:
    config = parse_config(FLEX_CPU)
    layout = plan_layout(config)
    assert [(n.name, n.instance_type) for n in layout.workers] == [
        ("mixed-1", "ml.c5.large"),
        ("mixed-2", "ml.c5.xlarge"),
    ]
    resources = ResourceConfig.from_json(resource_config(layout))
    assert [i.instance_type for i in resources.instances("mixed")] == ["ml.c5.large", "ml.c5.xlarge"]
    hardware = local_parameters(config, cpus=2).options["node_hardware"]
    # Each type at its own CPU count (1 and 2) where the machine has that many; fixed types as the machine.
    assert hardware["ml.c5.large"] == host_hardware(1) and hardware["ml.c5.xlarge"] == host_hardware(2)
    assert hardware["ml.m5.large"] == host_hardware(2)
    assert local_parameters(config, cpus=1).options["node_hardware"]["ml.c5.xlarge"] == host_hardware(1)
