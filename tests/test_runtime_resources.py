"""HyperPod's resource_config.json in its real shape, the two Slurm node namings, how a node finds itself, and
stale worker copies (fixtures and their AWS sources: tests/fixtures/resource_config/README.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import FakeHost
from training_runtime.__main__ import load_node
from training_runtime.groups import GroupSpec
from training_runtime.node import HYPERPOD_MARKER
from training_runtime.node_names import INSTANCE_NAMES, IP_NAMES, decide_naming
from training_runtime.params import ProvisioningParameters
from training_runtime.paths import CLUSTER_AGENT_CONFIG_PATH
from training_runtime.resources import ResourceConfig, ResourceConfigError
from training_runtime.steps.installed import node_facts
from training_runtime.steps.users import SshBetweenNodes
from training_runtime.users import User

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "resource_config"
PARAMS = ProvisioningParameters(
    cluster_name="my-cluster",
    mode="api-driven",
    groups=(
        GroupSpec("controller", "controller", "ml.t3.medium"),
        GroupSpec("login", "login", "ml.m5.large"),
        GroupSpec("worker-group-1", "compute", "ml.p5.48xlarge", "gpu"),
        GroupSpec("gpu-spare", "compute", "ml.p5.48xlarge", "spare"),
    ),
)


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def test_the_controllers_copy_is_read_in_full() -> None:
    config = ResourceConfig.from_json(fixture("controller.json"))
    assert (config.cluster_name, config.cluster_arn) == (
        "my-cluster",
        "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123def456",
    )
    assert (config.primary_controller_ip, config.secondary_controller_ips) == ("10.1.197.201", ())
    assert list(config.groups) == ["controller", "login", "worker-group-1", "gpu-spare"]
    assert config.instance_types["controller"] == "ml.t3.medium" and config.instances("gpu-spare") == ()
    worker = config.instances("worker-group-1")[1]
    assert (worker.name, worker.address, worker.instance_id, worker.agent_address) == (
        "worker-group-1-2",
        "10.1.64.22",
        "i-0a1b2c3d4e5f60002",
        "172.16.0.21",
    )
    assert dict(worker.labels)["network-node-layer-3"] == "nn-ddddddddddddddddd"
    assert config.instances("controller")[0].labels == ()  # InstanceLabel null


def test_missing_or_null_instances_are_empty_groups() -> None:
    config = ResourceConfig.from_json(fixture("missing-instances.json"))
    assert config.instances("gpu-spare") == () and config.instances("login") == ()
    assert [i.name for i in config.all_instances()] == ["controller-1", "worker-group-1-1", "worker-group-1-2"]


def test_every_problem_is_named_at_once_with_its_path() -> None:
    data = fixture("controller.json")
    data["ClusterType"] = "Kubernetes"
    data["SlurmConfig"]["SecondaryControllerIps"] = "10.1.0.1"
    first, second = data["InstanceGroups"][2]["Instances"]
    first["InstanceLabel"] = ["network-node-layer-1"]
    second["InstanceId"] = 42
    del data["InstanceGroups"][0]["Instances"][0]["CustomerIpAddress"]
    with pytest.raises(ResourceConfigError) as raised:
        ResourceConfig.from_json(data)
    problems = raised.value.problems
    assert [p.split(":")[0] for p in problems] == [
        "ClusterType",
        "SlurmConfig.SecondaryControllerIps",
        "InstanceGroups[0].Instances[0].CustomerIpAddress",
        "InstanceGroups[2].Instances[0].InstanceLabel",
        "InstanceGroups[2].Instances[1].InstanceId",
    ]
    assert "this runtime configures Slurm-orchestrated clusters" in problems[0]


@pytest.mark.parametrize(
    ("addresses", "hostname", "found"),
    [
        (["10.1.64.21"], "localhost", "worker-group-1-1"),  # by address, as AWS's scripts look it up
        ([], "worker-group-1-2", "worker-group-1-2"),  # by InstanceName (instance-name mode's host name)
        (["192.168.0.9"], "ip-10-1-33-12", "login-1"),  # by ip-a-b-c-d host name
        (["10.1.64.21"], "ip-10-1-64-21", "worker-group-1-1"),  # both agree
    ],
)
def test_a_node_finds_itself_by_address_or_by_host_name(addresses: list[str], hostname: str, found: str) -> None:
    config = ResourceConfig.from_json(fixture("controller.json"))
    assert config.find_self(addresses, hostname).name == found


def test_a_node_that_is_not_in_the_file_or_is_two_instances_at_once_fails_clearly() -> None:
    config = ResourceConfig.from_json(fixture("controller.json"))
    with pytest.raises(ResourceConfigError, match=r"no instance has one of this node's addresses \['10.9.9.9'\]"):
        config.find_self(["10.9.9.9"], "elsewhere")
    with pytest.raises(ResourceConfigError, match=r"address is 'worker-group-1-1'.*host name 'login-1' is 'login-1'"):
        config.find_self(["10.1.64.21"], "login-1")


@pytest.mark.parametrize(
    ("agent", "mode"),
    [("cluster_agent-ip-names.json", IP_NAMES), ("cluster_agent-instance-names.json", INSTANCE_NAMES)],
)
def test_the_controllers_cluster_agent_json_decides_the_naming(agent: str, mode: str) -> None:
    # The host name says the opposite: the file wins, and nothing is guessed.
    naming = decide_naming(FIXTURES / agent, "whatever", "controller-1", "10.1.197.201")
    assert (naming.mode, naming.warning) == (mode, None)


@pytest.mark.parametrize(
    ("hostname", "mode", "source"),
    [
        ("worker-group-1-1", INSTANCE_NAMES, "host name"),
        ("ip-10-1-64-21", IP_NAMES, "host name"),
        ("vm", IP_NAMES, "default"),
    ],
)
def test_without_cluster_agent_json_the_naming_is_a_guess_that_says_so(
    tmp_path: Path, hostname: str, mode: str, source: str
) -> None:
    naming = decide_naming(tmp_path / "cluster_agent.json", hostname, "worker-group-1-1", "10.1.64.21")
    assert (naming.mode, naming.source) == (mode, source)
    assert (
        naming.warning is not None and "does not exist" in naming.warning and "AWS's sources disagree" in naming.warning
    )
    (tmp_path / "cluster_agent.json").write_text('{"SlurmConfiguration": {}}')
    keyless = decide_naming(tmp_path / "cluster_agent.json", hostname, "worker-group-1-1", "10.1.64.21")
    assert keyless.mode == mode and "has no boolean SlurmConfiguration.UseInstanceNames" in str(keyless.warning)


def hyperpod_root(tmp_path: Path, agent: str | None, hyperpod: bool = True) -> Path:
    root = tmp_path / "root"
    root.mkdir(parents=True)
    if hyperpod:
        (root / HYPERPOD_MARKER.lstrip("/")).mkdir(parents=True)
    if agent is not None:
        target = root / CLUSTER_AGENT_CONFIG_PATH.lstrip("/")
        target.parent.mkdir(parents=True)
        target.write_text((FIXTURES / agent).read_text())
    return root


def load(  # type: ignore[no-untyped-def]
    tmp_path: Path,
    copy: str,
    ip: str,
    hostname: str,
    params: ProvisioningParameters = PARAMS,
    agent: str | None = None,
    hyperpod: bool = True,
):
    assets = tmp_path / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    (assets / params.file_name).write_text(params.dumps())
    args = argparse.Namespace(
        assets_dir=assets, resource_config=FIXTURES / copy, ip=[ip], root=hyperpod_root(tmp_path, agent, hyperpod)
    )
    return load_node(args, host=FakeHost(hostname))


def test_a_stale_worker_copy_with_a_group_scaled_to_0_configures_the_worker(tmp_path: Path) -> None:
    node = load(tmp_path, "worker-stale.json", "10.1.64.21", "ip-10-1-64-21")
    assert node.instance.name == "worker-group-1-1" and node.warnings == ()
    assert [c.name for c in node.controllers] == ["controller-1"]
    assert node.slurm_name == "ip-10-1-64-21" and node.naming.source == "host name"


def test_a_stale_worker_copy_with_a_deleted_group_is_ignored_with_a_warning_on_hyperpods_workers_only(
    tmp_path: Path,
) -> None:
    without_spare = ProvisioningParameters(cluster_name="my-cluster", mode="api-driven", groups=PARAMS.groups[:3])
    node = load(tmp_path / "w", "worker-stale.json", "10.1.64.21", "worker-group-1-1", without_spare)
    assert "gpu-spare" not in node.resources.groups
    assert any("ignored groups ['gpu-spare']" in w and "scaled to 0" in w for w in node.notes)
    # A controller's copy is current, and the generic platform has no stale copies: there the files disagree.
    with pytest.raises(ResourceConfigError, match=r"\['gpu-spare'\] not in the parameters file"):
        load(tmp_path / "c", "worker-stale.json", "10.1.197.201", "ip-10-1-197-201", without_spare)
    with pytest.raises(ResourceConfigError, match=r"\['gpu-spare'\] not in the parameters file"):
        load(tmp_path / "g", "worker-stale.json", "10.1.64.21", "worker-group-1-1", without_spare, hyperpod=False)


@pytest.mark.parametrize(
    ("agent", "hostname", "expected"),
    [
        ("cluster_agent-instance-names.json", "ip-10-1-197-201", "controller-1"),
        ("cluster_agent-ip-names.json", "controller-1", "ip-10-1-197-201"),
    ],
)
def test_the_controllers_slurm_name_follows_cluster_agent_json_into_the_facts(
    tmp_path: Path, agent: str, hostname: str, expected: str
) -> None:
    node = load(tmp_path, "controller.json", "10.1.197.201", hostname, agent=agent)
    assert node.slurm_name == expected and node.notes == ()
    assert node_facts(node).slurm_name == expected


def test_ssh_between_nodes_knows_every_slurm_name(tmp_path: Path) -> None:
    node = load(tmp_path, "controller.json", "10.1.197.201", "x", agent="cluster_agent-ip-names.json")
    user = User(name="researcher", uid=2001, gid=2001, ssh_public_keys=())
    hosts = SshBetweenNodes([user])._client_config(node).split("\n")[1].split()[1:]
    assert {"ip-10-1-64-21", "worker-group-1-1", "10.1.64.21", "ip-10-1-197-201"} <= set(hosts)


def test_slurmconfig_names_the_primary_controller(tmp_path: Path) -> None:
    data = fixture("controller.json")
    controller = data["InstanceGroups"][0]
    backup = dict(controller["Instances"][0], InstanceName="controller-2", CustomerIpAddress="10.1.197.202")
    controller["Instances"].insert(0, backup)  # the file lists the backup first
    data["SlurmConfig"]["SecondaryControllerIps"] = ["10.1.197.202"]
    (tmp_path / "two-heads.json").write_text(json.dumps(data))
    node = load(tmp_path, str(tmp_path / "two-heads.json"), "10.1.64.21", "x")
    assert [c.name for c in node.controllers] == ["controller-1", "controller-2"]
