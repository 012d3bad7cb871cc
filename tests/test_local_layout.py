"""The local cluster's layout: which nodes, their names and addresses, and what HyperPod would give them."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.core.config import ClusterConfig, load_config, parse_config
from hyperpod_local.layout import (
    LayoutError,
    LocalLayout,
    cluster_arn,
    hosts_file,
    network_layers,
    plan_layout,
    resource_config,
)
from hyperpod_local.overlay import (
    EMULATION_SLURM_OPTIONS,
    emulated,
    host_hardware,
    local_options,
    local_parameters,
)
from support import build_example, fast_app, uploaded_files
from training_runtime.emulation import Emulation
from training_runtime.node_names import INSTANCE_NAMES, IP_NAMES
from training_runtime.options import parse_options
from training_runtime.params import ProvisioningParameters
from training_runtime.resources import ResourceConfig

ROOT = Path(__file__).resolve().parent.parent


def config(*groups: dict[str, Any], **top: Any) -> ClusterConfig:
    data: dict[str, Any] = {
        "cluster_name": "lab",
        "storage": None,
        "instance_groups": [{"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}],
    }
    data["instance_groups"] += list(groups)
    data.update(top)
    return parse_config(data)


def compute(name: str, count: int, instance_type: str = "ml.c5.4xlarge", **extra: Any) -> dict[str, Any]:
    return {"name": name, "role": "compute", "instance_type": instance_type, "count": count, **extra}


LOGIN = {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 3}


def test_controller_login_and_capped_workers_in_config_order() -> None:
    layout = plan_layout(config(LOGIN, compute("gpu", 8, "ml.p5.48xlarge"), compute("cpu", 1)))
    assert [(n.name, n.role, n.ip) for n in layout.nodes] == [
        ("controller-1", "controller", "10.250.0.10"),
        ("login-1", "login", "10.250.0.11"),
        ("gpu-1", "compute", "10.250.0.12"),
        ("gpu-2", "compute", "10.250.0.13"),
        ("cpu-1", "compute", "10.250.0.14"),
    ]
    assert layout.controller.name == "controller-1"
    assert layout.login is not None and layout.login.name == "login-1"
    assert [n.name for n in layout.workers] == ["gpu-1", "gpu-2", "cpu-1"]
    assert layout.node("gpu-2").instance_type == "ml.p5.48xlarge"
    assert layout.capped() == {"login": (3, 1), "gpu": (8, 2)}


def test_workers_are_capped_in_total_later_groups_get_fewer() -> None:
    groups = [compute(f"g{i}", 5) for i in range(1, 5)]
    layout = plan_layout(config(*groups))
    assert [n.name for n in layout.workers] == ["g1-1", "g1-2", "g2-1", "g2-2"]
    assert layout.capped() == {"g1": (5, 2), "g2": (5, 2), "g3": (5, 0), "g4": (5, 0)}
    wide = plan_layout(config(*groups), max_per_group=3, max_workers=7)
    assert [n.name for n in wide.workers] == ["g1-1", "g1-2", "g1-3", "g2-1", "g2-2", "g2-3", "g3-1"]


def test_no_login_group_means_no_login_node_and_empty_groups_have_no_nodes() -> None:
    layout = plan_layout(config(compute("spare", 0), compute("cpu", 1)))
    assert layout.login is None
    assert [n.name for n in layout.nodes] == ["controller-1", "cpu-1"]
    assert layout.capped() == {}


def test_subnet_is_configurable_and_checked() -> None:
    layout = plan_layout(config(compute("cpu", 2)), subnet="192.168.7.0/24")
    assert [n.ip for n in layout.nodes] == ["192.168.7.10", "192.168.7.11", "192.168.7.12"]
    assert layout.prefixlen == 24
    with pytest.raises(LayoutError, match=re.escape("subnet: 10.0.0.0/29 has 6 host addresses")):
        plan_layout(config(compute("cpu", 2)), subnet="10.0.0.0/29")
    with pytest.raises(LayoutError, match="expected an IPv4 network"):
        plan_layout(config(compute("cpu", 2)), subnet="10.0.0.1/24")
    with pytest.raises(LayoutError, match="private range"):
        plan_layout(config(compute("cpu", 2)), subnet="8.8.8.0/24")


def test_caps_must_be_positive_and_every_problem_is_listed() -> None:
    with pytest.raises(LayoutError) as error:
        plan_layout(config(compute("cpu", 2)), max_per_group=0, max_workers=0)
    assert len(error.value.problems) == 2


def test_node_names_must_be_valid_hostnames() -> None:
    long = "g" * 62
    with pytest.raises(LayoutError, match="not a valid hostname"):
        plan_layout(config(compute(long, 1)))
    assert plan_layout(config(compute("g" * 61, 1))).workers[0].name == "g" * 61 + "-1"


def test_unknown_node_is_named_with_the_known_ones() -> None:
    with pytest.raises(LayoutError, match="no such node; this cluster has controller-1, cpu-1"):
        plan_layout(config(compute("cpu", 1))).node("cpu-9")


def test_layout_round_trips_through_json() -> None:
    layout = plan_layout(config(LOGIN, compute("cpu", 2, partition="batch")))
    assert LocalLayout.from_json(json.loads(json.dumps(layout.to_json()))) == layout


def test_resource_config_has_hyperpods_shape_and_keeps_empty_and_capped_groups() -> None:
    layout = plan_layout(config(compute("gpu", 3, "ml.p5.48xlarge"), compute("spare", 0)), max_workers=1)
    data = resource_config(layout)
    assert data["ClusterConfig"] == {"ClusterArn": cluster_arn("lab"), "ClusterName": "lab"}
    assert data["ClusterConfig"]["ClusterArn"].startswith("arn:aws:sagemaker:local:000000000000:cluster/")
    assert data["ClusterType"] == "Slurm"
    assert data["SlurmConfig"] == {"PrimaryControllerIp": layout.controller.ip, "SecondaryControllerIps": []}
    groups = {g["Name"]: g for g in data["InstanceGroups"]}
    assert list(groups) == ["controller", "gpu", "spare"]
    assert groups["gpu"]["InstanceType"] == "ml.p5.48xlarge"
    (instance,) = groups["gpu"]["Instances"]
    assert instance["InstanceName"] == "gpu-1"
    assert instance["CustomerIpAddress"] == instance["AgentIpAddress"] == "10.250.0.11"
    assert instance["InstanceId"].startswith("i-") and len(instance["InstanceId"]) == 19
    # a Slurm node's network layers, as topology.conf's tree; null on the controller (not a Slurm node)
    assert instance["InstanceLabel"] == dict(
        zip(
            ("network-node-layer-1", "network-node-layer-2", "network-node-layer-3"),
            network_layers(layout)["gpu-1"],
            strict=True,
        )
    )
    assert groups["controller"]["Instances"][0]["InstanceLabel"] is None
    assert groups["spare"]["Instances"] == []
    # The runtime reads it as it reads HyperPod's file.
    parsed = ResourceConfig.from_json(data)
    assert parsed.cluster_name == "lab"
    assert [i.name for i in parsed.all_instances()] == ["controller-1", "gpu-1"]
    assert parsed.find(["10.250.0.11"]) is not None
    assert (parsed.cluster_arn, parsed.primary_controller_ip) == (cluster_arn("lab"), layout.controller.ip)


def _without_nulls(data: Any) -> Any:
    """As CDK writes JSON into an upload: keys whose value is null are left out."""
    if isinstance(data, dict):
        return {k: _without_nulls(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_without_nulls(v) for v in data]
    return data


@pytest.mark.parametrize("example", ["cpu-cluster.yaml", "existing-vpc-fsx.yaml"])
def test_local_parameters_are_the_uploaded_ones_with_only_the_emulation_overlays(example: str, tmp_path: Path) -> None:
    path = ROOT / "examples" / example
    app = fast_app(outdir=str(tmp_path))
    (stack,) = build_example(path, app)
    (upload,) = uploaded_files(tmp_path, app.synth().get_stack_by_name(stack.stack_name).template).values()
    local = local_parameters(load_config(path), cpus=3)
    assert local.file_name == upload["file_name"]
    assert ProvisioningParameters.loads(local.dumps()) == local
    # The overlays, stated here independently of overlay.emulated(): no Lustre, fast Slurm failure
    # detection, every instance type sized as this machine, no accelerator software, no remote write.
    expected = copy.deepcopy(upload["parameters"])
    assert "fsx_dns_name" in expected, "both examples have a file system"
    del expected["fsx_dns_name"], expected["fsx_mountname"]
    ours = expected["hyperpod_cdk"]
    assert "metrics" in ours, "observability is on in both examples"
    del ours["metrics"]
    options = ours["options"]
    options["slurm"] = {**options.get("slurm", {}), **EMULATION_SLURM_OPTIONS}
    machine = {"cpus": 3, "sockets": 1, "cores_per_socket": 3, "threads_per_core": 1, "memory_mib": 2000}
    options["node_hardware"] = {
        **options.get("node_hardware", {}),
        **{g["instance_type"]: machine for g in ours["groups"]},
    }
    options["install_accelerator_software"] = False
    # A key only the local cluster writes: declared hardware, and exporters its Prometheus scrapes over the bridge.
    ours["emulation"] = {"hardware": True, "exporters_on_network": True}
    assert _without_nulls(local.to_json()) == expected
    # And the local cluster's file is the emulation applied to exactly what the stack uploads.
    assert emulated(ProvisioningParameters.from_json(upload["parameters"]), cpus=3) == local


def test_runtime_options_merge_emulation_values_over_the_config() -> None:
    runtime = {
        "slurm": {"slurmd_timeout": 300, "requeue": False},
        "node_hardware": {"ml.other.xlarge": {"cpus": 96, "memory_mib": 8192}, "ml.c5.4xlarge": {"cpus": 16}},
        "accounting": {"enabled": True},
        "install_accelerator_software": True,
    }
    cfg = config(compute("cpu", 2), compute("gpu", 1, "ml.p5.48xlarge"), runtime=runtime)
    options = local_parameters(cfg, cpus=3).options
    assert options["slurm"] == {"requeue": False, **EMULATION_SLURM_OPTIONS}
    assert options["slurm"]["cred_expire"] >= 70
    machine = {"cpus": 3, "sockets": 1, "cores_per_socket": 3, "threads_per_core": 1, "memory_mib": 2000}
    assert options["node_hardware"] == {
        "ml.other.xlarge": {"cpus": 96, "memory_mib": 8192},
        "ml.c5.4xlarge": machine,
        "ml.m5.xlarge": machine,
        "ml.p5.48xlarge": machine,
    }
    assert options["accounting"] == {"enabled": True}
    assert options["install_accelerator_software"] is False
    assert "emulated_hardware" not in options, "the emulation is no runtime option (hyperpod_cdk.emulation)"
    assert cfg.runtime["slurm"]["slurmd_timeout"] == 300, "the config itself is not changed"
    parsed = parse_options(options)
    assert parsed.slurm.slurmd_timeout == 10 and parsed.slurm.requeue is False


def test_an_external_accounting_database_becomes_the_controllers_own() -> None:
    external = {
        "enabled": True,
        "database": "external",
        "host": "db.example.com",
        "port": 3307,
        "user": "acct",
        "password_secret_arn": "arn:aws:secretsmanager:us-west-2:111122223333:secret:db-AbCdEf",
    }
    options = local_options({"accounting": external}, ["ml.m5.xlarge"], cpus=2)
    assert options["accounting"] == {"enabled": True, "user": "acct", "database": "local"}
    local = {"enabled": True, "database": "local"}
    assert local_options({"accounting": local}, ["ml.m5.xlarge"], cpus=2)["accounting"] == local


def test_local_options_install_no_container_software() -> None:
    wanted = {"install_missing": True, "enroot_sha256": "a" * 64, "enroot_caps_sha256": "b" * 64}
    options = local_options({"containers": wanted}, ["ml.m5.xlarge"], cpus=2)
    assert options["containers"] == {**wanted, "install_missing": False}
    assert "containers" not in local_options({}, ["ml.m5.xlarge"], cpus=2)


def test_local_options_without_a_runtime_section() -> None:
    options = local_options({}, ["ml.m5.xlarge"], cpus=2)
    assert options == {
        "slurm": EMULATION_SLURM_OPTIONS,
        "node_hardware": {"ml.m5.xlarge": host_hardware(2)},
        "install_accelerator_software": False,
    }
    assert host_hardware()["cpus"] >= 1


def test_invalid_runtime_options_are_reported() -> None:
    data = config(compute("cpu", 1)).model_dump()
    data["runtime"] = {"slurm": {"bogus": 1}}
    cfg = ClusterConfig.model_validate(data)  # the config's own check would refuse it first
    with pytest.raises(LayoutError, match=re.escape("runtime.slurm.bogus: unknown option")):
        local_parameters(cfg)


def test_hosts_file_names_each_node_once_by_its_name_and_vpc_dns_name() -> None:
    text = hosts_file(plan_layout(config(LOGIN, compute("cpu", 2))))
    assert text.startswith("127.0.0.1\tlocalhost\n")
    assert "10.250.0.12\tcpu-1 ip-10-250-0-12\n" in text
    nodes = [line for line in text.splitlines() if line.startswith("10.")]
    assert len(nodes) == 4
    names = [name for line in nodes for name in line.split()[1:]]
    assert len(names) == len(set(names)), "a name listed twice resolves twice (hostname --ip-address)"


@pytest.mark.parametrize("example", sorted(ROOT.glob("examples/*.yaml")), ids=lambda p: p.name)
def test_every_example_has_a_local_layout(example: Path) -> None:
    cfg = load_config(example)
    layout = plan_layout(cfg)
    assert 2 <= len(layout.nodes) <= 6
    assert len(layout.workers) <= 4
    assert local_parameters(cfg).options["install_accelerator_software"] is False


def test_up_needs_root_and_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hyperpod_local import LocalCluster, NamespaceError

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(NamespaceError, match="needs root"):
        LocalCluster.up(ROOT / "examples" / "cpu-cluster.yaml", tmp_path / "work")
    assert not (tmp_path / "work").exists()


def test_the_local_cluster_renders_its_fast_failure_detection_through_the_real_step(tmp_path: Path) -> None:
    """What the emulation's nodes get in slurm.conf: the overlay's timings, rendered by steps.slurm itself."""
    from runtime_fakes import FakeHost
    from training_runtime.node import Node
    from training_runtime.steps.slurm import rendered_files

    config = load_config(Path(__file__).resolve().parent.parent / "examples" / "cpu-cluster.yaml")
    layout = plan_layout(config)
    resources = ResourceConfig.from_json(resource_config(layout))
    params = local_parameters(config, cpus=2)
    controller = resources.instances(params.controller_group)[0]
    group = params.group(params.controller_group)
    assert group is not None
    node = Node(params, resources, group, controller, tmp_path / "assets", root=tmp_path, host=FakeHost("c"))
    [slurm_conf] = [text for path, text, _, _ in rendered_files(node) if path.endswith("/slurm.conf")]
    lines = set(slurm_conf.splitlines())
    options = EMULATION_SLURM_OPTIONS
    assert f"SlurmdTimeout={options['slurmd_timeout']}" in lines
    assert f"MessageTimeout={options['message_timeout']}" in lines
    assert f"AuthInfo=cred_expire={options['cred_expire']}" in lines
    assert any(line.startswith(f"SchedulerParameters=sched_interval={options['sched_interval']},") for line in lines)


def test_emulated_gpus_are_not_declared_to_slurm(tmp_path: Path) -> None:
    """Declared GPUs have no device files: slurmd would drain the node ("gres/gpu count reported lower than
    configured"), so on emulated hardware slurm.conf and gres.conf give no GPUs; deployed, they do."""
    import dataclasses

    from runtime_fakes import FakeHost
    from training_runtime.node import Node
    from training_runtime.steps.slurm import rendered_files

    config = load_config(ROOT / "examples" / "gpu-cluster.yaml")
    resources = ResourceConfig.from_json(resource_config(plan_layout(config)))

    def files(params: ProvisioningParameters) -> dict[str, str]:
        controller = resources.instances(params.controller_group)[0]
        group = params.group(params.controller_group)
        assert group is not None
        node = Node(params, resources, group, controller, tmp_path / "a", root=tmp_path, host=FakeHost("c"))
        return {Path(path).name: text for path, text, _, _ in rendered_files(node)}

    local = local_parameters(config, cpus=2)
    emulated_files = files(local)
    assert "Gres=" not in emulated_files["slurm.conf"]
    assert "Name=gpu" not in emulated_files["gres.conf"]
    declared = dataclasses.replace(local, emulation=Emulation(hardware=False))
    assert "Gres=gpu:h100:8" in files(declared)["slurm.conf"]


def test_the_hyperpod_host_name_has_one_rule_and_its_inverse_matches_it() -> None:
    from hyperpod_cdk.ops import lookup
    from hyperpod_local.hyperpod_files import node_hostname
    from training_runtime.node_names import address_of, ip_name, slurm_name

    assert ip_name("10.250.0.12") == "ip-10-250-0-12" == slurm_name(IP_NAMES, "cpu-1", "10.250.0.12")
    assert address_of("ip-10-250-0-12") == "10.250.0.12"
    assert address_of("ip-10-250-0-12.us-west-2.compute.internal") == "10.250.0.12"
    assert address_of("ip-10-250-0-300") is None and address_of("cpu-1") is None
    assert slurm_name(INSTANCE_NAMES, "cpu-1", "10.250.0.12") == "cpu-1"
    node = plan_layout(config(compute("cpu", 1))).workers[0]
    assert node_hostname(IP_NAMES, node) == ip_name(node.ip) and node_hostname(INSTANCE_NAMES, node) == "cpu-1"
    # The operator CLI resolves an address through the same inverse.
    found = lookup.resolve_nodes(
        [lookup.Node("i-1", "cpu", "ml.c5.large", "Running", "", "ip-10-1-0-4", None)], ["10.1.0.4"], "c"
    )
    assert [n.instance_id for n in found] == ["i-1"]


def test_the_work_directory_is_hyperpod_locals_and_the_old_names_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hyperpod_local import state

    monkeypatch.delenv(state.WORKDIR_ENV, raising=False)
    monkeypatch.delenv(state.OLD_WORKDIR_ENV, raising=False)
    monkeypatch.setattr(state, "OLD_DEFAULT_WORKDIR", str(tmp_path / "old"))
    assert state.default_workdir() == Path("/var/tmp/hyperpod-local")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "state.json").write_text("{}")
    assert state.default_workdir() == tmp_path / "old", "a cluster created before the rename is still found"
    monkeypatch.setenv(state.OLD_WORKDIR_ENV, str(tmp_path / "env-old"))
    assert state.default_workdir() == tmp_path / "env-old"
    monkeypatch.setenv(state.WORKDIR_ENV, str(tmp_path / "env"))
    assert state.default_workdir() == tmp_path / "env"


def test_the_emulated_agents_topology_is_a_tree_over_every_slurm_node_and_can_be_off() -> None:
    """HyperPod's automatic topology: TopologyPlugin=topology/tree with topology.conf over every Slurm node (login
    included), from the instances' network layers (one leaf per group); off, neither the plugin nor the file."""
    from hyperpod_local.hyperpod_files import slurm_conf, topology_conf
    from hyperpod_local.hyperpod_platform import agent_script
    from hyperpod_local.layout import network_layers
    from training_runtime.render.hostlist import expand

    layout = plan_layout(load_config(ROOT / "examples" / "cpu-cluster.yaml"))
    assert "TopologyPlugin=topology/tree" in slurm_conf(layout, IP_NAMES, cpus=2).splitlines()
    assert "TopologyPlugin" not in slurm_conf(layout, IP_NAMES, cpus=2, topology=False)
    layers = network_layers(layout)
    assert set(layers) == {n.name for n in layout.nodes if n.role != "controller"}
    assert network_layers(layout) == layers and len({path[2] for path in layers.values()}) == len(
        {layout.node(n).group for n in layers}
    ), "deterministic, one leaf switch per group"
    text = topology_conf(layout, IP_NAMES)
    assert text is not None
    leaves = [line for line in text.splitlines() if " Nodes=" in line]
    in_tree = [name for line in leaves for name in expand(line.split("Nodes=")[1])]
    assert sorted(in_tree) == sorted(f"ip-{layout.node(n).ip.replace('.', '-')}" for n in layers)
    # by instance name in that naming, as slurm.conf's NodeName lines
    named = [
        line.split("Nodes=")[1]
        for line in (topology_conf(layout, INSTANCE_NAMES) or "").splitlines()
        if " Nodes=" in line
    ]
    assert sorted(name for nodes in named for name in expand(nodes)) == sorted(layers)
    (spine,) = [line for line in text.splitlines() if line.startswith(f"SwitchName={next(iter(layers.values()))[0]} ")]
    assert "Switches=" in spine
    assert "$s/topology.conf /opt/slurm/etc/topology.conf" in agent_script("controller", "api-driven", "10.0.0.1")
    assert "rm -f /opt/slurm/etc/topology.conf" in agent_script("controller", "api-driven", "10.0.0.1", topology=False)


ZERO = {
    "cluster_name": "zero",
    "node_provisioning_mode": "continuous",
    "instance_groups": [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
        {
            "name": "gpu",
            "role": "compute",
            "instance_type": "ml.g5.xlarge",
            "count": 0,
            "partition": "gpu",
            "scaling": {"min": 0, "max": 4},
        },
    ],
    "storage": None,
}
"""A new user's first scaled cluster: a controller and one compute group at 0 (docs/scaler.md)."""


def test_a_cluster_with_every_compute_group_at_0_has_no_topology_until_a_node_joins() -> None:
    """No Slurm node, no switch tree: HyperPod's slurm.conf names no TopologyPlugin and there is no topology.conf
    (topology/tree cannot run over no switches); the first node brings both. `up` of this config once ended in
    the renderer's "settings.topology: no switches"."""
    from hyperpod_local.hyperpod_files import slurm_conf, topology_conf

    layout = plan_layout(parse_config(ZERO))
    assert [n.role for n in layout.nodes] == ["controller"]
    conf = slurm_conf(layout, IP_NAMES, cpus=2)
    assert "TopologyPlugin" not in conf and "PartitionName=gpu Default=NO" in conf
    assert topology_conf(layout, IP_NAMES) is None
    joined = plan_layout(
        parse_config(
            {**ZERO, "instance_groups": [ZERO["instance_groups"][0], {**ZERO["instance_groups"][1], "count": 1}]}
        )
    )
    assert "TopologyPlugin=topology/tree" in slurm_conf(joined, IP_NAMES, cpus=2).splitlines()
    assert (topology_conf(joined, IP_NAMES) or "").count("SwitchName=") == 3
