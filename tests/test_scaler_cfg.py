"""A scaled group on the CDK side (issue #24): the parameters file's ``scaling``, the scaler's IAM policy, and the
template's count of a scaled group (the deployed count, so a stack update undoes nothing the scaler did)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk.assertions import Template

from hyperpod_cdk import ConfigurationError, TrainingClusterStack
from hyperpod_cdk.core.config import parse_config
from hyperpod_cdk.core.deployment import deployment
from hyperpod_cdk.deployed.scaler_counts import counts_for_synth, deployed_counts
from ops_support import ROLE, aws_env, moto_url  # noqa: F401
from support import fast_app, synth_bundled_app
from training_runtime.params import ProvisioningParameters
from training_runtime.scaling import ScalingSpec

CONTROLLER = {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}
GPU = {"name": "gpu", "instance_type": "ml.g5.xlarge", "count": 2, "scaling": {"min": 0, "max": 8, "idle_minutes": 15}}
CPU = {"name": "cpu", "instance_type": "ml.c5.xlarge", "count": 3}
BASE: dict[str, Any] = {
    "cluster_name": "elastic",
    "node_provisioning_mode": "continuous",
    "instance_groups": [CONTROLLER, GPU, CPU],
    "observability": {"enabled": False},
}


def data(**changes: Any) -> dict[str, Any]:
    found = copy.deepcopy(BASE)
    found.update(changes)
    return found


def template(config: dict[str, Any], deployed: dict[str, int] | None = None) -> dict[str, Any]:
    stack = TrainingClusterStack(fast_app(), "s", config=parse_config(config), deployed_counts=deployed)
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def of_type(found: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in found["Resources"].items() if v["Type"] == kind}


def cluster(found: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ((logical_id, resource),) = of_type(found, "AWS::SageMaker::Cluster").items()
    return logical_id, resource


def counts(found: dict[str, Any]) -> dict[str, int]:
    groups = cluster(found)[1]["Properties"]["InstanceGroups"]
    return {g["InstanceGroupName"]: g["InstanceCount"] for g in groups}


# --- the parameters file ------------------------------------------------------------------------------------------
def test_the_parameters_file_carries_a_scaled_groups_scaling_and_the_node_reads_it_back() -> None:
    params = deployment(parse_config(data())).parameters
    scaling = {g.name: g.scaling for g in params.groups}
    assert scaling == {"controller": None, "gpu": ScalingSpec(0, 8, 15), "cpu": None}
    written = params.to_json()
    groups = {g["name"]: g for g in written["hyperpod_cdk"]["groups"]}
    assert groups["gpu"]["scaling"] == {"min": 0, "max": 8, "idle_minutes": 15}
    assert "scaling" not in groups["cpu"]
    assert ProvisioningParameters.from_json(written).groups[1].scaling == ScalingSpec(0, 8, 15)


def test_idle_minutes_defaults_to_the_runtimes_default() -> None:
    config = data(instance_groups=[CONTROLLER, {**GPU, "scaling": {"min": 0, "max": 8}}])
    assert deployment(parse_config(config)).parameters.groups[1].scaling == ScalingSpec(0, 8)


# --- the scaler's IAM policy ---------------------------------------------------------------------------------------
def test_the_scaler_policy_allows_only_its_calls_on_its_own_cluster_after_the_cluster() -> None:
    found = template(data())
    cluster_id, resource = cluster(found)
    policies = [p for p in of_type(found, "AWS::IAM::Policy").values() if "ScaleOwnCluster" in str(p)]
    assert len(policies) == 1
    policy = policies[0]["Properties"]
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    assert set(statements) == {"ScaleOwnCluster", "ScalerHeartbeatTag"}
    own_arn = {"Fn::GetAtt": [cluster_id, "ClusterArn"]}
    assert statements["ScaleOwnCluster"]["Action"] == [
        "sagemaker:BatchAddClusterNodes",
        "sagemaker:BatchDeleteClusterNodes",
        "sagemaker:DescribeCluster",
        "sagemaker:ListClusterNodes",
    ]
    assert statements["ScaleOwnCluster"]["Resource"] == own_arn
    tag = statements["ScalerHeartbeatTag"]
    assert tag["Action"] == "sagemaker:AddTags" and tag["Resource"] == own_arn
    assert tag["Condition"] == {"ForAllValues:StringEquals": {"aws:TagKeys": ["hyperpod-cdk:scaler"]}}
    # Attached to the controller group's execution role (group 0), which the cluster needs before it exists: the
    # policy is not among the cluster's dependencies (it depends on the cluster through the ARN), so no cycle.
    role_id = resource["Properties"]["InstanceGroups"][0]["ExecutionRole"]["Fn::GetAtt"][0]
    assert policy["Roles"] == [{"Ref": role_id}]
    policy_id = next(k for k, v in found["Resources"].items() if v is policies[0])
    assert policy_id not in resource.get("DependsOn", [])
    # The role's own policy is waited for; the role itself is ordered by the GetAtt (no W3005).
    role_path = role_id[:-8]  # a logical ID is the construct path and an 8-character hash
    default_policy = next(k for k in found["Resources"] if k.startswith(role_path + "DefaultPolicy"))
    assert default_policy in resource["DependsOn"] and role_id not in resource["DependsOn"]


def test_no_scaler_policy_without_a_scaled_group() -> None:
    found = template(data(instance_groups=[CONTROLLER, CPU]))
    assert "ScaleOwnCluster" not in str(of_type(found, "AWS::IAM::Policy"))
    assert "BatchAddClusterNodes" not in str(found)


# --- CloudFormation and the scaler agree ---------------------------------------------------------------------------
def test_without_a_deployed_cluster_a_scaled_group_starts_at_its_count() -> None:
    assert counts(template(data())) == {"controller": 1, "gpu": 2, "cpu": 3}


def test_an_unrelated_change_keeps_the_deployed_count_of_the_scaled_group() -> None:
    """The synth diff: the scaler has grown gpu to 6; a deploy that changes another group and the tags sends gpu's
    6 again (UpdateCluster changes no count of it), while the other group's change does go out."""
    deployed = {"controller": 1, "gpu": 6, "cpu": 3}
    before = template(data(), deployed)
    after = template(data(instance_groups=[CONTROLLER, GPU, {**CPU, "count": 5}], tags={"team": "nlp"}), deployed)
    assert counts(before) == {"controller": 1, "gpu": 6, "cpu": 3}
    assert counts(after) == {"controller": 1, "gpu": 6, "cpu": 5}
    gpu = [g for g in cluster(after)[1]["Properties"]["InstanceGroups"] if g["InstanceGroupName"] == "gpu"]
    before_gpu = [g for g in cluster(before)[1]["Properties"]["InstanceGroups"] if g["InstanceGroupName"] == "gpu"]
    assert gpu == before_gpu  # the scaled group's whole definition is unchanged, not just its count


def test_the_config_count_of_a_scaled_group_does_not_reach_a_deployed_cluster() -> None:
    """Editing ``count`` of a scaled group changes nothing once the cluster exists: the scaler owns it."""
    deployed = {"controller": 1, "gpu": 0, "cpu": 3}
    assert counts(template(data(instance_groups=[CONTROLLER, {**GPU, "count": 7}, CPU]), deployed))["gpu"] == 0


def test_a_raised_min_launches_up_to_it_and_a_lowered_max_below_the_deployed_count_is_refused() -> None:
    raised = data(instance_groups=[CONTROLLER, {**GPU, "count": 4, "scaling": {"min": 4, "max": 8}}, CPU])
    assert counts(template(raised, {"gpu": 1}))["gpu"] == 4
    lowered = data(instance_groups=[CONTROLLER, {**GPU, "scaling": {"min": 0, "max": 4}}, CPU])
    with pytest.raises(ConfigurationError) as error:
        template(lowered, {"gpu": 6})
    (problem,) = error.value.problems
    assert problem.rule == "GRP-SCALING-DEPLOYED"  # type: ignore[attr-defined]
    assert problem.path == "instance_groups[1].scaling.max"  # type: ignore[attr-defined]
    assert "below the deployed group's 6 instances" in problem


# --- reading the deployed counts at synth ---------------------------------------------------------------------------
def test_counts_for_synth_asks_aws_only_for_a_scaled_config_and_not_with_the_config_context() -> None:
    def no_call() -> Any:
        raise AssertionError("no AWS call expected")

    assert counts_for_synth(deployment(parse_config(data(instance_groups=[CONTROLLER, CPU]))), None, no_call) is None
    assert counts_for_synth(deployment(parse_config(data())), "config", no_call) is None


def test_counts_for_synth_refuses_to_guess_when_aws_cannot_answer() -> None:
    def failing() -> Any:
        raise RuntimeError("Unable to locate credentials")

    with pytest.raises(ConfigurationError) as error:
        counts_for_synth(deployment(parse_config(data())), None, failing)
    (problem,) = error.value.problems
    assert problem.rule == "GRP-SCALING-DEPLOYED"  # type: ignore[attr-defined]
    assert "Unable to locate credentials" in problem and "-c scaler_counts=config" in problem


@pytest.mark.usefixtures("aws_env")
def test_deployed_counts_read_the_target_counts_of_the_named_cluster() -> None:
    from hyperpod_cdk.aws.session import make_session
    from ops_support import MotoCluster

    client = make_session(None, None).client("sagemaker")
    assert deployed_counts(client, "elastic") is None
    moto = MotoCluster(
        "elastic", {"controller": ("ml.m5.xlarge", 1, "Controller"), "gpu": ("ml.g5.xlarge", 2, "Compute")}
    )
    moto.create()
    moto.group("gpu")["TargetCount"] = 5  # the scaler's BatchAddClusterNodes raised the target
    assert deployed_counts(client, "elastic") == {"controller": 1, "gpu": 5}
    assert counts_for_synth(deployment(parse_config(data())), None, lambda: client) == {"controller": 1, "gpu": 5}


# --- sizing: a scaled group counts at its max ------------------------------------------------------------------------
def test_the_new_subnet_must_hold_a_scaled_group_at_its_max() -> None:
    small = {"private_subnet_cidr_mask": 24}  # 251 usable addresses; ml.c5.xlarge takes one each
    grown = data(network=small, instance_groups=[CONTROLLER, {**CPU, "scaling": {"min": 0, "max": 300}}])
    found = [p for p in parse_config(data(network=small)).problems() if p.rule == "NET-SUBNET-CAPACITY"]
    assert found == []
    from hyperpod_cdk.core.config import parse_model

    (problem,) = [p for p in parse_model(grown).problems() if p.rule == "NET-SUBNET-CAPACITY"]
    assert "cpu: 300 x 1" in problem


# --- the bundled app ------------------------------------------------------------------------------------------------
@pytest.mark.slow  # handed out first (tests/conftest.py)
@pytest.mark.usefixtures("aws_env")
def test_the_app_synthesizes_a_scaled_group_at_the_deployed_count(tmp_path: Path) -> None:
    """``cdk deploy`` runs app.py: it reads the deployed TargetCount (here moto's) into the template."""
    from ops_support import MotoCluster

    moto = MotoCluster(
        "elastic", {"controller": ("ml.m5.xlarge", 1, "Controller"), "gpu": ("ml.g5.xlarge", 2, "Compute")}
    )
    moto.create()
    moto.group("gpu")["TargetCount"] = 5
    path = tmp_path / "elastic.yaml"
    path.write_text(yaml.safe_dump(data(instance_groups=[CONTROLLER, GPU])))

    def synth(**context: str) -> dict[str, int]:
        out = tmp_path / f"out{len(context)}"
        return counts(synth_bundled_app(path, "hyperpod-elastic", out, **context))

    assert synth() == {"controller": 1, "gpu": 5}
    recorded = json.loads((tmp_path / "cdk.context.json").read_text())
    assert recorded == {
        "hyperpod-cdk:deployed-counts:region=us-west-2:cluster=elastic": {"controller": 1, "gpu": 5},
        # and the groups' execution roles, which a deploy keeps (tests/test_deployed_roles.py)
        "hyperpod-cdk:deployed-roles:region=us-west-2:cluster=elastic": {"controller": ROLE, "gpu": ROLE},
    }
    assert synth(scaler_counts="config") == {"controller": 1, "gpu": 2}
