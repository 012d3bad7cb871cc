"""The rules of the HyperPod API support table (data/api_support.yaml): each passes a good config and fails a bad one
at its field path, with the level and source of its row; accept_unconfirmed silences only unconfirmed warnings; a
continuous cluster's template carries no SlurmConfigStrategy."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aws_cdk.assertions import Template

from hyperpod_cdk import TrainingClusterStack, parse_config
from hyperpod_cdk.aws_data.api_support import row_of_rule, support_row, support_table, unconfirmed_rules
from hyperpod_cdk.core.config import ClusterConfig
from hyperpod_cdk.rules import all_rules
from support import fast_app
from training_runtime.problems import Problem

SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-db-AbCdEf"
EXTERNAL = {"enabled": True, "database": "external", "host": "acct.abc.us-west-2.rds.amazonaws.com"}
GOOD: dict[str, Any] = {
    "cluster_name": "api",
    "node_provisioning_mode": "continuous",
    "instance_groups": [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
        {"name": "workers", "instance_type": "ml.g5.12xlarge", "count": 2},
    ],
    "runtime": {"accounting": {**EXTERNAL, "password_secret_arn": SECRET}},
}


def _found(config: dict[str, Any], previous: dict[str, Any] | None = None) -> list[Problem]:
    """The errors and warnings (infos: tests/test_levels.py)."""
    before = ClusterConfig.model_validate(previous) if previous is not None else None
    return [p for p in ClusterConfig.model_validate(config).problems(previous=before) if p.level != "info"]


def _config(**changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(GOOD)
    config.update(changes)
    return config


def _with_group(index: int, **changes: Any) -> dict[str, Any]:
    config = _config()
    config["instance_groups"][index].update(changes)
    return config


MULTI_HEAD = [{"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 2}]
BAD: dict[str, tuple[dict[str, Any], str]] = {
    "CL-CONTINUOUS-STRATEGY": (_config(slurm_config_strategy="Managed"), "slurm_config_strategy"),
    "CL-CONTINUOUS-MODE": (_config(mode="lifecycle-driven"), "node_provisioning_mode"),
    "CL-ACCOUNTING-AMI": (_with_group(1, image_id="ami-0123456789abcdef0"), "instance_groups[1].image_id"),
    "GRP-FLEX-SLURM": (
        _with_group(1, instance_type=None, instance_types=["ml.g5.12xlarge", "ml.g5.24xlarge"]),
        "instance_groups[1].instance_types",
    ),
    "GRP-SPOT-SLURM": (_with_group(1, capacity="spot"), "instance_groups[1].capacity"),
    "GRP-DHC-CONTINUOUS": (
        {**_with_group(1, deep_health_checks=["InstanceStress"]), "node_provisioning_mode": None},
        "instance_groups[1].deep_health_checks",
    ),
    "GRP-DHC-COMPUTE": (_with_group(0, deep_health_checks=["InstanceStress"]), "instance_groups[0].deep_health_checks"),
    "GRP-IMAGE-ID": (_with_group(1, image_id="ami-xyz"), "instance_groups[1].image_id"),
    "CL-ACCEPT-UNCONFIRMED": (_config(accept_unconfirmed=["CL-CONTINUOUS-STRATEGY"]), "accept_unconfirmed[0]"),
}


def test_the_good_config_passes_every_rule() -> None:
    assert _found(GOOD) == []


@pytest.mark.parametrize("rule", sorted(BAD))
def test_each_rule_fails_the_bad_config_at_its_field(rule: str) -> None:
    config, path = BAD[rule]
    found = [p for p in _found(config) if p.rule == rule]
    assert [p.path for p in found] == [path], _found(config)
    row = row_of_rule(rule)
    if row is not None:
        assert found[0].level == row.level
        if row.unconfirmed:
            assert row.source in found[0] and row.check in found[0]


def test_multi_head_with_continuous_provisioning_is_refused_in_either_mode() -> None:
    for mode in ("api-driven", "lifecycle-driven"):
        config = _config(mode=mode, instance_groups=MULTI_HEAD + GOOD["instance_groups"][1:])
        assert {"MH-MODE", "CL-CONTINUOUS-MODE"} & {p.rule for p in _found(config) if p.level == "error"}, mode


def test_default_is_an_image_id() -> None:
    assert [
        p for p in _found(_with_group(1, image_id="default")) if p.rule in ("GRP-IMAGE-ID", "CL-ACCOUNTING-AMI")
    ] == []


def test_attaching_the_database_warns_and_detaching_it_is_refused() -> None:
    internal = _config(runtime={"accounting": {"enabled": True}})
    attached = [p for p in _found(GOOD, previous=internal) if p.rule == "CL-ACCOUNTING-ONE-WAY"]
    assert [(p.path, p.level) for p in attached] == [("runtime.accounting.database", "warning")]
    detached = [p for p in _found(internal, previous=GOOD) if p.rule == "CL-ACCOUNTING-NO-REVERT"]
    assert [(p.path, p.level) for p in detached] == [("runtime.accounting", "error")]
    assert not [p for p in _found(GOOD, previous=GOOD) if p.rule.startswith("CL-ACCOUNTING-")]


def test_accepting_an_unconfirmed_rule_silences_only_it() -> None:
    config = _with_group(1, capacity="spot", deep_health_checks=["InstanceStress"])
    config["instance_groups"][0]["deep_health_checks"] = ["InstanceStress"]
    config["accept_unconfirmed"] = ["GRP-SPOT-SLURM"]
    # InstanceStress on the CPU controller: GRP-DHC-COMPUTE only (InstanceStress tests CPU, memory and disk too).
    assert {p.rule for p in _found(config)} == {"GRP-DHC-COMPUTE"}


def test_a_documented_constraint_cannot_be_accepted() -> None:
    config = _config(slurm_config_strategy="Merge", accept_unconfirmed=["CL-CONTINUOUS-STRATEGY"])
    assert {p.rule for p in _found(config)} == {"CL-CONTINUOUS-STRATEGY", "CL-ACCEPT-UNCONFIRMED"}


def test_every_rule_of_a_row_is_registered_with_the_rows_level_and_source() -> None:
    registered = {r.id: r for r in all_rules()}
    for row in support_table():
        if row.rule is not None:
            assert registered[row.rule].level == row.level, row.id
            assert registered[row.rule].source == row.cited, row.id
    assert unconfirmed_rules() == {
        "GRP-FLEX-SLURM",
        "GRP-FLEX-CONTINUOUS",
        "GRP-FLEX-DUPLICATE",
        "GRP-SPOT-SLURM",
        "GRP-DHC-CONTINUOUS",
    }


def test_an_unconfirmed_row_must_warn() -> None:
    from dataclasses import replace

    from hyperpod_cdk.aws_data.api_support import row_problems

    row = support_row("spot-slurm")
    assert list(row_problems(row)) == []
    assert list(row_problems(replace(row, level="error")))


def _cluster(config: dict[str, Any]) -> dict[str, Any]:
    stack = TrainingClusterStack(fast_app(), "s", config=parse_config(config))
    clusters = Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster")
    (resource,) = clusters.values()
    return resource


def test_a_continuous_cluster_emits_no_strategy_and_names_its_database() -> None:
    resource = _cluster(GOOD)
    orchestrator = resource["Properties"]["Orchestrator"]
    assert set(orchestrator["Slurm"]) == {"AccountingDatabase"}
    assert orchestrator["Slurm"]["AccountingDatabase"]["Name"] == "slurm_acct_db"
    plain = _cluster(_config(runtime={}))
    assert plain["Properties"]["Orchestrator"] == {"Slurm": {}}
    other = _cluster(_config(node_provisioning_mode=None, runtime={}))
    assert other["Properties"]["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Merge"}}


def test_accepted_rules_reach_cfn_lint_through_the_cluster_metadata() -> None:
    resource = _cluster(_config(accept_unconfirmed=["GRP-SPOT-SLURM"]))
    assert resource["Metadata"]["cfn-lint"] == {"config": {"ignore_checks": ["W9109"]}}
    assert "Metadata" not in _cluster(GOOD) or "cfn-lint" not in _cluster(GOOD)["Metadata"]
