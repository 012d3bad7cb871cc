"""The rules from AWS's provisioning and resiliency pages (rules/aws_provisioning.py, cfnlint_provisioning.py): each
refuses a config or template that breaks AWS's quote and passes one that keeps it, quoting the page; the Slurm config
strategy hyperpod-cdk renders by default is the one AWS's migration guide asks for (Merge)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hyperpod_cdk.aws_data.quotes import (
    CONTROLLER_QUOTE,
    DEEP_HEALTH_DOC,
    KEY_PER_GROUP_QUOTE,
    LOGIN_QUOTE,
    MIGRATION_DOC,
    MULTI_HEAD_QUOTE,
    NO_REVERT_QUOTE,
    PARTITION_QUOTE,
    PRIMARY_QUOTE,
    RECOVERY_QUOTE,
    STRATEGY_QUOTE,
)
from hyperpod_cdk.cfnlint_rules import RULES
from hyperpod_cdk.core.config import ClusterConfig
from hyperpod_cdk.rules import all_rules
from hyperpod_cdk.rules.hardware import CONNECTIVITY_QUOTE
from support import cfn_lint
from training_runtime.problems import Problem

CONTROLLER = {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}
BASE: dict[str, Any] = {
    "cluster_name": "prov",
    "storage": None,
    "instance_groups": [CONTROLLER, {"name": "workers", "instance_type": "ml.p5.48xlarge", "count": 2}],
}
OURS = {"W9260", "E9221", "E9262", "E9263", "E9264", "E9265", "W9266", "W9267", "W9268"}


def _found(rule: str, **changes: Any) -> list[Problem]:
    config = copy.deepcopy(BASE)
    config.update(changes)
    return [p for p in ClusterConfig.model_validate(config).problems() if p.rule == rule]


def _workers(**changes: Any) -> list[dict[str, Any]]:
    return [CONTROLLER, {**BASE["instance_groups"][1], **changes}]


def test_the_default_strategy_is_merge_and_is_not_warned() -> None:
    assert ClusterConfig.model_validate(BASE).slurm_config_strategy == "Merge"
    assert _found("CL-STRATEGY-MERGE") == []
    assert _found("CL-STRATEGY-MERGE", slurm_config_strategy="Merge") == []


@pytest.mark.parametrize("strategy", ["Managed", "Overwrite"])
def test_another_strategy_warns_with_the_migration_guide(strategy: str) -> None:
    (problem,) = _found("CL-STRATEGY-MERGE", slurm_config_strategy=strategy)
    assert (problem.path, problem.level) == ("slurm_config_strategy", "warning")
    assert STRATEGY_QUOTE in str(problem) and MIGRATION_DOC in str(problem)


def test_the_strategy_warning_leaves_other_rules_their_cases() -> None:
    # lifecycle-driven takes no strategy at all (CL-STRATEGY-MODE), continuous none (CL-CONTINUOUS-STRATEGY)
    assert _found("CL-STRATEGY-MERGE", slurm_config_strategy="Managed", mode="lifecycle-driven") == []
    assert _found("CL-STRATEGY-MERGE", slurm_config_strategy="Managed", node_provisioning_mode="continuous") == []


def test_instance_connectivity_needs_gpus() -> None:
    trn = _workers(instance_type="ml.trn1.32xlarge", deep_health_checks=["InstanceStress", "InstanceConnectivity"])
    (problem,) = _found("GRP-DEEP-HEALTH-CONNECTIVITY", instance_groups=trn)
    assert (problem.path, problem.level) == ("instance_groups[1].deep_health_checks", "error")
    assert CONNECTIVITY_QUOTE in str(problem) and "ml.trn1.32xlarge has no GPU" in str(problem)
    gpus = _workers(deep_health_checks=["InstanceConnectivity"])
    assert _found("GRP-DEEP-HEALTH-CONNECTIVITY", instance_groups=gpus) == []
    stress_only = _workers(instance_type="ml.trn1.32xlarge", deep_health_checks=["InstanceStress"])
    assert _found("GRP-DEEP-HEALTH-CONNECTIVITY", instance_groups=stress_only) == []


def test_a_flexible_group_names_its_types_without_gpus() -> None:
    mixed = _workers(instance_type=None, instance_types=["ml.p5.48xlarge", "ml.c5.18xlarge"])
    mixed[1]["deep_health_checks"] = ["InstanceConnectivity"]
    (problem,) = _found("GRP-DEEP-HEALTH-CONNECTIVITY", instance_groups=mixed)
    assert "ml.c5.18xlarge has no GPU" in str(problem) and "ml.p5.48xlarge" not in str(problem)


def test_the_rules_cite_their_pages() -> None:
    sources = {r.id: r.source for r in all_rules()}
    assert sources["CL-STRATEGY-MERGE"].startswith(MIGRATION_DOC)
    assert (
        sources["GRP-DEEP-HEALTH-CONNECTIVITY"].startswith(DEEP_HEALTH_DOC)
        or DEEP_HEALTH_DOC in sources["GRP-DEEP-HEALTH-CONNECTIVITY"]
    )


# --- cfn-lint ----------------------------------------------------------------------------------------------------


def _template(strategy: str | None = "Merge", checks: list[str] | None = None, itype: str = "ml.p5.48xlarge") -> Any:
    slurm = {} if strategy is None else {"SlurmConfigStrategy": strategy}
    worker: dict[str, Any] = {
        "InstanceGroupName": "w",
        "InstanceType": itype,
        "InstanceCount": 2,
        "ExecutionRole": "arn:aws:iam::111122223333:role/hyperpod",
        "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["w"]},
    }
    if checks is not None:
        worker["OnStartDeepHealthChecks"] = checks
    controller = {**worker, "InstanceGroupName": "c", "InstanceType": "ml.m5.xlarge", "InstanceCount": 1}
    controller["SlurmConfig"] = {"NodeType": "Controller"}
    controller.pop("OnStartDeepHealthChecks", None)
    properties = {"ClusterName": "c", "Orchestrator": {"Slurm": slurm}, "InstanceGroups": [controller, worker]}
    return {"Resources": {"Cluster": {"Type": "AWS::SageMaker::Cluster", "Properties": properties}}}


def _ours(template: Any) -> list[str]:
    return [f for f in cfn_lint(template) if f.split()[0] in OURS]


def test_the_cfn_lint_rules_are_loaded_with_the_others() -> None:
    assert {cls.id for cls in RULES.values()} >= OURS
    assert _ours(_template()) == []


def test_cfn_lint_warns_on_a_strategy_other_than_merge() -> None:
    (finding,) = _ours(_template("Managed"))
    assert finding.startswith("W9260 ") and STRATEGY_QUOTE in finding and MIGRATION_DOC in finding
    continuous = _template("Managed")
    continuous["Resources"]["Cluster"]["Properties"]["NodeProvisioningMode"] = "Continuous"
    assert [f for f in _ours(continuous) if f.startswith("W9260")] == []  # E9101 is that case's rule


def test_cfn_lint_refuses_instance_connectivity_without_gpus() -> None:
    (finding,) = _ours(_template(checks=["InstanceConnectivity"], itype="ml.trn1.32xlarge"))
    assert (
        finding.startswith("E9221 ")
        and "multi-node GPU communication capabilities" in finding
        and "OnStartDeepHealthChecks" in finding
    )
    assert _ours(_template(checks=["InstanceConnectivity"])) == []
    assert _ours(_template(checks=["InstanceStress"], itype="ml.trn1.32xlarge")) == []


def test_an_api_driven_cluster_does_not_go_back_to_lifecycle_driven() -> None:
    deployed = ClusterConfig.model_validate(BASE)
    back = ClusterConfig.model_validate({**BASE, "mode": "lifecycle-driven"})
    (problem,) = [p for p in back.problems(previous=deployed) if p.rule == "CL-MODE-NO-REVERT"]
    assert (problem.path, problem.level) == ("mode", "error") and NO_REVERT_QUOTE in str(problem)
    assert not [p for p in deployed.problems(previous=back) if p.rule == "CL-MODE-NO-REVERT"]  # forward is fine
    assert not [p for p in back.problems() if p.rule == "CL-MODE-NO-REVERT"]  # a new cluster is free


def test_node_recovery_none_warns_with_aws_recommendation() -> None:
    (problem,) = _found("CL-NODE-RECOVERY", node_recovery="None")
    assert (problem.path, problem.level) == ("node_recovery", "warning") and RECOVERY_QUOTE in str(problem)
    assert _found("CL-NODE-RECOVERY") == [] and _found("CL-NODE-RECOVERY", node_recovery="Automatic") == []


def _groups(template: Any) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = template["Resources"]["Cluster"]["Properties"]["InstanceGroups"]
    return groups


def _ids(template: Any) -> list[str]:
    return [f.split()[0] for f in _ours(template)]


def test_cfn_lint_counts_controllers_and_logins() -> None:
    none = _template()
    _groups(none)[0]["SlurmConfig"] = {"NodeType": "Login"}
    assert _ids(none) == ["E9262"]
    two = _template()
    _groups(two).append({**_groups(two)[0], "InstanceGroupName": "c2"})
    assert _ids(two) == ["E9262"] and CONTROLLER_QUOTE in _ours(two)[0]
    logins = _template()
    login = {**_groups(logins)[0], "SlurmConfig": {"NodeType": "Login"}}
    _groups(logins).extend([{**login, "InstanceGroupName": "l1"}, {**login, "InstanceGroupName": "l2"}])
    assert _ids(logins) == ["E9263"] and LOGIN_QUOTE in _ours(logins)[0]
    legacy = _template(strategy=None)
    for group in _groups(legacy):
        del group["SlurmConfig"]
    assert _ids(legacy) == []  # provisioning_parameters.json names the roles: nothing to count


def test_cfn_lint_puts_partitions_on_compute_groups_only() -> None:
    on_controller = _template()
    _groups(on_controller)[0]["SlurmConfig"]["PartitionNames"] = ["head"]
    assert _ids(on_controller) == ["E9264"] and PARTITION_QUOTE in _ours(on_controller)[0]
    missing = _template()
    del _groups(missing)[1]["SlurmConfig"]["PartitionNames"]
    assert _ids(missing) == ["E9264"]


def test_cfn_lint_refuses_several_controllers_through_slurm_config() -> None:
    template = _template()
    _groups(template)[0]["InstanceCount"] = 2
    assert _ids(template) == ["E9265"] and MULTI_HEAD_QUOTE in _ours(template)[0]


def test_cfn_lint_warns_on_node_recovery_none() -> None:
    template = _template()
    template["Resources"]["Cluster"]["Properties"]["NodeRecovery"] = "None"
    assert _ids(template) == ["W9266"] and RECOVERY_QUOTE in _ours(template)[0]
    template["Resources"]["Cluster"]["Properties"]["NodeRecovery"] = "Automatic"
    assert _ids(template) == []


# --- the Slurm CLI page's instance groups (sagemaker-hyperpod-operate-slurm-cli-command)


def _judged(rule: str, config: dict[str, Any], previous: dict[str, Any] | None = None) -> list[Problem]:
    new = ClusterConfig.model_validate({**BASE, **config})
    old = ClusterConfig.model_validate({**BASE, **previous}) if previous is not None else None
    return [p for p in new.problems(previous=old) if p.rule == rule]


def _cpu(name: str, count: int = 1) -> dict[str, Any]:
    return {"name": name, "instance_type": "ml.c5.xlarge", "count": count}


def test_more_than_twenty_groups_warn_as_the_cli_page_says_and_the_api_allows_more() -> None:
    twenty = {"instance_groups": [CONTROLLER, *(_cpu(f"w{i}") for i in range(19))]}
    assert _judged("GRP-COUNT-GUIDE", twenty) == []
    (problem,) = _judged("GRP-COUNT-GUIDE", {"instance_groups": [*twenty["instance_groups"], _cpu("w19")]})
    assert (problem.path, problem.level) == ("instance_groups", "warning")
    assert "up to 20 instance groups" in str(problem) and "allows 100" in str(problem)


def test_a_new_group_starts_with_an_instance_but_an_existing_one_may_go_to_zero() -> None:
    deployed = {"instance_groups": [CONTROLLER, _cpu("workers")]}
    added = {"instance_groups": [CONTROLLER, _cpu("workers"), _cpu("extra", 0)]}
    (problem,) = _judged("GRP-NEW-GROUP-COUNT", added, deployed)
    assert (problem.path, problem.level) == ("instance_groups[2].count", "error")
    assert "specify an integer greater or equal to 1" in str(problem)
    assert _judged("GRP-NEW-GROUP-COUNT", added) == []  # at creation 0 is the API's own minimum
    lowered = {"instance_groups": [CONTROLLER, _cpu("workers", 0)]}
    assert _judged("GRP-NEW-GROUP-COUNT", lowered, deployed) == []  # "down to 0"


def test_a_deployed_controller_group_keeps_its_nodes() -> None:
    lifecycle = {"mode": "lifecycle-driven"}
    two = {**lifecycle, "instance_groups": [{**CONTROLLER, "count": 2}, _cpu("workers")]}
    one = {**lifecycle, "instance_groups": [CONTROLLER, _cpu("workers")]}
    (problem,) = _judged("GRP-CONTROLLER-REMOVE", one, two)
    assert (problem.path, problem.level) == ("instance_groups[0].count", "error")
    assert "You cannot remove instances that are configured as Slurm controller nodes" in str(problem)
    assert _judged("GRP-CONTROLLER-REMOVE", two, one) == []  # adding a controller is not removing one
    renamed = {**lifecycle, "instance_groups": [{**CONTROLLER, "name": "head"}, _cpu("workers")]}
    (gone,) = _judged("GRP-CONTROLLER-REMOVE", renamed, one)
    assert gone.path == "instance_groups" and "'controller' is gone" in str(gone)
    fewer_workers = {**lifecycle, "instance_groups": [CONTROLLER, _cpu("workers", 0)]}
    assert _judged("GRP-CONTROLLER-REMOVE", fewer_workers, one) == []


def test_a_training_plan_on_the_controller_warns_in_config_and_template() -> None:
    plan = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/p"
    groups = [{**CONTROLLER, "training_plan_arn": plan}, BASE["instance_groups"][1]]
    (problem,) = _found("GRP-TRAINING-PLAN-CONTROLLER", instance_groups=groups)
    assert (problem.path, problem.level) == ("instance_groups[0].training_plan_arn", "warning")
    assert PRIMARY_QUOTE in str(problem)
    assert _found("GRP-TRAINING-PLAN-CONTROLLER", instance_groups=_workers(training_plan_arn=plan)) == []
    template = _template()
    _groups(template)[0]["TrainingPlanArn"] = plan
    assert _ids(template) == ["W9267"] and PRIMARY_QUOTE in _ours(template)[0]
    _groups(template)[0].pop("TrainingPlanArn")
    _groups(template)[1]["TrainingPlanArn"] = plan
    assert _ids(template) == []


def test_one_volume_key_on_two_groups_warns_in_the_template() -> None:
    key = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    template = _template()
    for group in _groups(template):
        group["InstanceStorageConfigs"] = [{"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": key}}]
    assert _ids(template) == ["W9268"] and KEY_PER_GROUP_QUOTE in _ours(template)[0]
    _groups(template)[1]["InstanceStorageConfigs"] = [
        {"EbsVolumeConfig": {"VolumeSizeInGB": 100, "VolumeKmsKeyId": key.replace("1234abcd", "5678abcd")}},
        {"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": key.replace("1234abcd", "5678abcd")}},
    ]
    assert _ids(template) == []  # one key per group; a group's root and extra volume may share it
