"""Update policies (hyperpod_cdk.update_policy, rules UPD-*): the fields AWS says cannot change once deployed, read
from the AWS inventory's update-policy rows; ``validate --previous`` reports a change with the old and new value,
AWS's words and what to do. The rows' own breaks/passes run in tests/test_aws_inventory.py; here made-up rows
show each policy kind's rule on the real config model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk import update_policy as up
from hyperpod_cdk.aws_inventory import POLICY_LEVELS, Row
from hyperpod_cdk.config import load_file, parse_model
from hyperpod_cdk.inventory_checks import apply_patch
from hyperpod_cdk.rules import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
URL = "https://docs.aws.amazon.com/sagemaker/latest/dg/demo.html"


def _row(policy: str, field: str, **more: Any) -> Row:
    return Row(
        id=f"demo-{policy}",
        page="demo",
        url=URL,
        quote="You can't change it once the instance group exists.",
        applies="slurm",
        word="cannot",
        enforced_by="update-policy",
        field=field,
        api_member="ClusterInstanceGroupSpecification.InstanceType",
        policy=policy,
        **{"rule_previous": up.POLICY_RULES.get(policy), **more},
    )


def _configs(previous: dict[str, Any], new: dict[str, Any]) -> Any:
    data = load_file(ROOT / "examples" / "gpu-cluster.yaml")
    old = parse_model(apply_patch(data, previous), "old")
    return parse_model(apply_patch(data, new), "new"), old


@pytest.fixture
def policies(monkeypatch: pytest.MonkeyPatch) -> list[Row]:
    rows: list[Row] = []
    monkeypatch.setattr("hyperpod_cdk.rules.updates.update_policies", lambda: tuple(rows))
    return rows


def _found(config: Any, previous: Any, rule: str) -> list[Any]:
    return [p for p in config.problems(previous=previous) if p.rule == rule]


def test_an_immutable_group_field_is_refused_with_old_new_quote_and_fix(policies: list[Row]) -> None:
    policies.append(_row("immutable", "instance_groups[*].instance_type"))
    config, previous = _configs({}, {"instance_groups.2.instance_type": "ml.p5e.48xlarge"})
    (problem,) = _found(config, previous, "UPD-IMMUTABLE")
    assert problem.level == "error" and problem.path == "instance_groups[2].instance_type"
    text = str(problem)
    assert "changed from 'ml.p5.48xlarge'" in text and "ml.p5e.48xlarge" in text
    assert "You can't change it once the instance group exists." in text and URL in text
    assert "add a new instance group" in (problem.fix or "")


def test_groups_pair_by_name_and_a_new_group_is_no_change(policies: list[Row]) -> None:
    policies.append(_row("immutable", "instance_groups[*].instance_type"))
    moved = {
        "instance_groups.0": None,
        "instance_groups.2": {"name": "p5b", "role": "compute", "instance_type": "ml.p5e.48xlarge", "count": 1},
    }
    config, previous = _configs({}, moved)  # the controller gone, p5 now at index 1, a new group p5b
    assert _found(config, previous, "UPD-IMMUTABLE") == []
    same, deployed = _configs({}, {})
    assert _found(same, deployed, "UPD-IMMUTABLE") == []
    config, _ = _configs({}, {"instance_groups.2.instance_type": "ml.p5e.48xlarge"})
    assert _found(config, None, "UPD-IMMUTABLE") == []  # no --previous: nothing to compare


def test_a_cluster_field_names_a_new_cluster(policies: list[Row]) -> None:
    policies.append(_row("immutable", "network.{cidr,vpc_id}"))
    config, previous = _configs({}, {"network.cidr": "10.9.0.0/16"})
    (problem,) = _found(config, previous, "UPD-IMMUTABLE")
    assert problem.path == "network.cidr" and "create a new cluster" in (problem.fix or "")


def test_an_irreversible_field_may_be_set_but_not_left(policies: list[Row]) -> None:
    policies.append(_row("irreversible", "instance_groups[*].training_plan_arn"))
    plan = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/p"
    config, previous = _configs({}, {"instance_groups.2.training_plan_arn": plan})
    assert _found(config, previous, "UPD-IRREVERSIBLE") == []  # setting it is fine
    config, previous = _configs({"instance_groups.2.training_plan_arn": plan}, {})
    (problem,) = _found(config, previous, "UPD-IRREVERSIBLE")
    assert problem.level == "error" and "changed from" in str(problem)


@pytest.mark.parametrize("policy", ["new-nodes-only", "replaces-root-volume"])
def test_the_warning_policies(policies: list[Row], policy: str) -> None:
    policies.append(_row(policy, "instance_groups[*].ebs_volume_gib"))
    config, previous = _configs({}, {"instance_groups.2.ebs_volume_gib": 2000})
    (problem,) = _found(config, previous, up.POLICY_RULES[policy])
    assert problem.level == "warning"


def test_a_row_naming_its_own_rule_is_left_to_that_rule(policies: list[Row]) -> None:
    policies.append(_row("immutable", "instance_groups[*].instance_type", rule_previous="GRP-ROLE-REPLACES"))
    config, previous = _configs({}, {"instance_groups.2.instance_type": "ml.p5e.48xlarge"})
    assert _found(config, previous, "UPD-IMMUTABLE") == []


def test_update_policy_reads_the_one_table() -> None:
    row = up.update_policy("cluster_name")
    assert row is not None and row.policy == "replaces-cluster" and row.rule_previous == "CL-NAME-REPLACES"
    assert up.update_policy("network.subnet_id") is not None
    assert up.update_policy("instance_groups[3].count") is None
    assert up.expand("network.{a, b}") == ["network.a", "network.b"]


def test_each_policy_kind_has_its_rule_at_its_level() -> None:
    levels = {r.id: r.level for r in REGISTRY.rules}
    for policy, rule in up.POLICY_RULES.items():
        assert levels[rule] == POLICY_LEVELS[policy]
