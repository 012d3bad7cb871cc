"""One value says what a deployment puts on its nodes (hyperpod_cdk.core.deployment): the example snapshots pin it, the
stack uploads it (with only its resources' CloudFormation values filled in), and the local cluster stages it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Stack, Token

from hyperpod_cdk import ClusterConfig, TrainingClusterStack
from hyperpod_cdk.core.config import load_config, parse_model
from hyperpod_cdk.core.deployment import deployment
from hyperpod_local.staging import from_config
from support import fast_app
from training_runtime.params import ProvisioningParameters
from training_runtime.users import dumps

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "snapshots"
EXAMPLES = sorted(ROOT.glob("examples/*.yaml"))
RESOURCE_KEYS = ("fsx_dns_name", "fsx_mountname", "metrics", "fsx", "rest_api", "login_pool")
"""The parameters file's values that only the stack's resources know (CloudFormation values at synth)."""


def _without_resources(content: dict[str, Any]) -> dict[str, Any]:
    """``content`` without the resources' values, and without nulls (the upload leaves them out)."""
    found = {k: v for k, v in content.items() if k not in RESOURCE_KEYS}
    found["hyperpod_cdk"] = {k: v for k, v in content["hyperpod_cdk"].items() if k not in RESOURCE_KEYS}
    return _no_nulls(found)  # type: ignore[no-any-return]


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_example_snapshots_pin_the_deployment(example: Path) -> None:
    (snapshot,) = json.loads((SNAPSHOTS / f"{example.stem}.parameters.json").read_text()).values()
    found = deployment(load_config(example)).parameters
    assert found.file_name == snapshot["file_name"]
    assert _without_resources(found.to_json()) == _without_resources(snapshot["content"])


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_the_stack_uploads_and_the_local_cluster_stages_the_deployment(example: Path) -> None:
    config = load_config(example)
    expected = deployment(config, is_unresolved=Token.is_unresolved)
    stack = TrainingClusterStack(fast_app(), "Stack", config=config)
    held = stack.lifecycle.parameters
    assert isinstance(held, ProvisioningParameters)
    # The REST API's key is a secret of the stack: the deployment says what to write once its ARN is known.
    rest = held.rest_api
    wanted = expected.rest_api_parameters("arn:the-key", "the-region")
    assert (rest is None) == (wanted is None)
    assert rest is None or rest == expected.rest_api_parameters(rest.key_secret_arn, rest.region)
    # So are the login pool's host keys.
    pool = held.login_pool
    assert (pool is None) == (expected.login_pool_parameters("arn:the-keys", "the-region") is None)
    assert pool is None or pool == expected.login_pool_parameters(pool.host_keys_secret_arn, pool.region)
    assert held == expected.with_resources(
        fsx_dns_name=held.fsx_dns_name,
        fsx_mountname=held.fsx_mountname,
        fsx=held.fsx,
        metrics=held.metrics,
        rest_api=rest,
        login_pool=pool,
    )
    assert stack.lifecycle.users == list(expected.users)
    staged = from_config(example)
    # the local cluster fills in its own key's secret as the stack does (staging.py): the rest is the deployment's
    local_rest = staged.deployed.rest_api
    assert (local_rest is None) == (wanted is None)
    assert local_rest is None or local_rest == expected.rest_api_parameters(local_rest.key_secret_arn, "local")
    local_pool = staged.deployed.login_pool  # the local cluster's own keys' secret, when it stages the pool
    assert local_pool is None or local_pool == expected.login_pool_parameters(
        local_pool.host_keys_secret_arn, local_pool.region
    )
    assert dataclasses.replace(staged.deployed, rest_api=None, login_pool=None) == deployment(config).parameters
    assert (staged.groups, dict(staged.counts)) == (expected.groups_as_launched, dict(expected.counts))
    if expected.users:
        assert staged.files["users.json"].decode() == dumps(list(expected.users))


def test_the_organization_prefix_is_applied_once_for_the_stack_and_the_local_cluster(tmp_path: Path) -> None:
    data = {"cluster_name": "research", "organization": {"name_prefix": "acme-"}, "observability": {"enabled": False}}
    config = parse_model(data, "test")
    found = deployment(config)
    assert (found.cluster_name, found.config.cluster_name) == ("acme-research", "acme-research")
    assert deployment(found.config).cluster_name == "acme-research", "a prefixed name keeps one prefix"
    held = TrainingClusterStack(fast_app(), "Stack", config=config).lifecycle.parameters
    assert held is not None and held.cluster_name == "acme-research"
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(data))
    assert from_config(path).cluster_name == "acme-research"


def test_launch_choices_leave_the_type_to_the_node_and_a_group_that_may_be_spot_is_spot() -> None:
    config = load_config(ROOT / "examples" / "platform-template.yaml")
    found = deployment(config)
    (workers,) = [g for g in found.parameters.groups if g.name == "workers"]
    (configured,) = [g for g in config.instance_groups if g.name == "workers"]
    assert (workers.instance_type, workers.capacity) == (None, "spot")
    (launched,) = [g for g in found.groups_as_launched if g.name == "workers"]
    assert (launched.instance_type, launched.capacity) == (configured.instance_type, "spot")
    assert found.counts["workers"] == configured.count
    # Without the choices, the group is written as configured.
    plain = deployment(config.model_copy(update={"parameters": None}))
    (workers,) = [g for g in plain.parameters.groups if g.name == "workers"]
    assert (workers.instance_type, workers.capacity) == (configured.instance_type, "on-demand")


def test_a_token_type_is_left_to_the_node() -> None:
    config = ClusterConfig()
    token = Token.as_string({"Ref": "ChosenType"})
    groups = [dataclasses.replace(g, instance_type=token) if g.role == "compute" else g for g in config.instance_groups]
    found = deployment(config.model_copy(update={"instance_groups": groups}), is_unresolved=Token.is_unresolved)
    assert [g.instance_type for g in found.parameters.groups if g.role == "compute"] == [None]


def test_the_construct_refuses_the_deployment_of_another_config() -> None:
    from hyperpod_cdk import ClusterNetwork, ConfigurationError, HyperPodCluster, LifecycleScripts

    config = ClusterConfig()
    other = deployment(config.model_copy(update={"cluster_name": "another"}))
    app_stack = Stack(fast_app(), "T")
    with pytest.raises(ConfigurationError, match="deployment: is cluster 'another'"):
        HyperPodCluster(
            app_stack,
            "Cluster",
            cluster_name=config.cluster_name,
            network=ClusterNetwork(app_stack, "Network"),
            lifecycle=LifecycleScripts(app_stack, "Scripts"),
            instance_groups=config.instance_groups,
            deployment=other,
        )


def test_the_deployment_carries_its_stack_name_cluster_name_and_modes() -> None:
    data = {"cluster_name": "research", "organization": {"name_prefix": "acme-"}, "observability": {"enabled": False}}
    found = deployment(parse_model(data, "test"))
    # The stack keeps the config's name: an organization's prefix must not rename a deployed stack.
    assert (found.stack_name, found.cluster_name) == ("hyperpod-research", "acme-research")
    assert (found.mode, found.node_provisioning_mode, found.continuous) == ("api-driven", None, False)
    continuous = deployment(load_config(ROOT / "examples" / "continuous-cluster.yaml"))
    assert (continuous.node_provisioning_mode, continuous.continuous) == ("continuous", True)


def test_preflight_and_the_synth_look_up_the_deployed_name() -> None:
    """The organization's prefix is applied in one place (deployed_name), read by preflight's look-ups and the
    synth's DescribeCluster."""
    from hyperpod_cdk.deployed.scaler_counts import counts_for_synth
    from hyperpod_cdk.preflight.online import cluster_name
    from hyperpod_cdk.rules.view import ClusterView

    data = {
        "cluster_name": "research",
        "organization": {"name_prefix": "acme-"},
        "observability": {"enabled": False},
        "instance_groups": [
            {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
            {
                "name": "cpu",
                "role": "compute",
                "instance_type": "ml.c5.xlarge",
                "count": 0,
                "scaling": {"min": 0, "max": 2},
            },
        ],
        "node_provisioning_mode": "continuous",
    }
    config = parse_model(data, "test")
    assert cluster_name(ClusterView.of_config(config)) == deployment(config).cluster_name == "acme-research"
    asked: list[str] = []

    class SageMaker:
        def describe_cluster(self, ClusterName: str) -> dict[str, Any]:  # boto3's spelling
            asked.append(ClusterName)
            return {"InstanceGroups": [{"InstanceGroupName": "cpu", "TargetCount": 1}]}

    assert counts_for_synth(deployment(config), None, SageMaker) == {"cpu": 1}
    assert asked == ["acme-research"]


def test_the_construct_builds_the_same_file_from_props_as_from_the_deployment(tmp_path: Path) -> None:
    """One builder: a HyperPodCluster embedded with props uploads what the deployment of the same config says;
    a type that is a template parameter is left to each node, as a type chosen at launch is."""
    from aws_cdk import CfnParameter

    from hyperpod_cdk import ClusterNetwork, HyperPodCluster, LifecycleScripts

    config = ClusterConfig()
    stack = Stack(fast_app(), "T")
    chosen = CfnParameter(stack, "ComputeType", default="ml.c5.xlarge").value_as_string
    groups = [
        dataclasses.replace(g, instance_type=chosen) if g.role == "compute" else g for g in config.instance_groups
    ]
    scripts = LifecycleScripts(stack, "Scripts")
    HyperPodCluster(
        stack,
        "Cluster",
        cluster_name=config.cluster_name,
        network=ClusterNetwork(stack, "Network"),
        lifecycle=scripts,
        instance_groups=groups,
        mode=config.mode,
        runtime_options=config.runtime,
    )
    held = scripts.parameters
    assert held is not None
    expected = deployment(config.model_copy(update={"instance_groups": groups}), is_unresolved=Token.is_unresolved)
    assert held == expected.with_resources(fsx_dns_name=None, fsx_mountname=None, fsx=None, metrics=None)
    assert [g.instance_type for g in held.groups if g.role == "compute"] == [None]


def test_the_construct_refuses_a_deployment_of_another_provisioning_mode() -> None:
    from hyperpod_cdk import ClusterNetwork, ConfigurationError, HyperPodCluster, LifecycleScripts
    from hyperpod_cdk.model import NodeProvisioningMode

    config = ClusterConfig()
    app_stack = Stack(fast_app(), "T")
    with pytest.raises(ConfigurationError, match=r"\(node provisioning: None\); these props .*continuous"):
        HyperPodCluster(
            app_stack,
            "Cluster",
            cluster_name=config.cluster_name,
            node_provisioning_mode=NodeProvisioningMode.CONTINUOUS,
            network=ClusterNetwork(app_stack, "Network"),
            lifecycle=LifecycleScripts(app_stack, "Scripts"),
            instance_groups=config.instance_groups,
            deployment=deployment(config),
        )
