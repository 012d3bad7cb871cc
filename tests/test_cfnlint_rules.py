"""The cfn-lint rules shipped in hyperpod_cdk.cfnlint_rules: each one fires on a small template that breaks it and
not on one that keeps it; every example's template (as deployed, as published, as a Service Catalog product)
passes them; the documented command line loads them."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from example_builds import LintOnce
from hyperpod_cdk.aws_data.api_support import support_row, support_table
from hyperpod_cdk.cfnlint_rules import CHECKS, RULES
from support import HYPERPOD_CFN_LINT_RULES, ROOT, cfn_lint

OURS = {cls.id for cls in RULES.values()}
ROLE = "arn:aws:iam::111122223333:role/hyperpod"
KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
DATABASE = {
    "Endpoint": "acct.abc123.us-east-1.rds.amazonaws.com",
    "SecretArn": "arn:aws:secretsmanager:us-east-1:111122223333:secret:acct-AbCdEf",
    "Name": "slurm_acct_db",
}


def _template() -> dict[str, Any]:
    """A continuous Slurm cluster that keeps every rule."""
    return {
        "Resources": {
            "Cluster": {
                "Type": "AWS::SageMaker::Cluster",
                "Properties": {
                    "ClusterName": "c",
                    "NodeProvisioningMode": "Continuous",
                    "Orchestrator": {"Slurm": {}},
                    "InstanceGroups": [
                        {
                            "InstanceGroupName": "controller",
                            "InstanceType": "ml.m5.xlarge",
                            "InstanceCount": 1,
                            "ExecutionRole": ROLE,
                            "SlurmConfig": {"NodeType": "Controller"},
                        },
                        {
                            "InstanceGroupName": "gpu",
                            "InstanceType": "ml.g5.xlarge",
                            "InstanceCount": 2,
                            "ExecutionRole": ROLE,
                            "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
                        },
                    ],
                },
            }
        }
    }


def _props(t: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = t["Resources"]["Cluster"]["Properties"]
    return props


def _group(t: dict[str, Any], index: int) -> dict[str, Any]:
    group: dict[str, Any] = _props(t)["InstanceGroups"][index]
    return group


def _not_continuous(t: dict[str, Any]) -> object:
    return _props(t).pop("NodeProvisioningMode")


def _flexible(t: dict[str, Any]) -> None:
    del _group(t, 1)["InstanceType"]
    _group(t, 1)["InstanceRequirements"] = {"InstanceTypes": ["ml.g5.xlarge", "ml.g5.2xlarge"]}


BREAKS: dict[str, Callable[[dict[str, Any]], object]] = {
    "continuous-no-strategy": lambda t: _props(t)["Orchestrator"]["Slurm"].update(SlurmConfigStrategy="Managed"),
    "continuous-api-driven": lambda t: _group(t, 1).pop("SlurmConfig"),
    "continuous-multi-head": lambda t: _group(t, 0).update(InstanceCount=2),
    "accounting-continuous": lambda t: (
        _not_continuous(t),
        _props(t)["Orchestrator"]["Slurm"].update(AccountingDatabase=dict(DATABASE)),
    ),
    "accounting-ami": lambda t: (
        _props(t)["Orchestrator"]["Slurm"].update(AccountingDatabase=dict(DATABASE)),
        _group(t, 1).update(ImageId="ami-0123456789abcdef0"),
    ),
    "accounting-permanent": lambda t: _props(t)["Orchestrator"]["Slurm"].update(AccountingDatabase=dict(DATABASE)),
    "accounting-name": lambda t: _props(t)["Orchestrator"]["Slurm"].update(
        AccountingDatabase={k: v for k, v in DATABASE.items() if k != "Name"}
    ),
    "flexible-slurm": _flexible,
    "flexible-continuous": lambda t: (_not_continuous(t), _flexible(t)),
    "flexible-duplicates": lambda t: (
        _flexible(t),
        _group(t, 1).update(InstanceRequirements={"InstanceTypes": ["ml.g5.xlarge", "ml.g5.xlarge"]}),
    ),
    "spot-slurm": lambda t: _group(t, 1).update(CapacityRequirements={"Spot": {}}),
    "spot-continuous": lambda t: (_not_continuous(t), _group(t, 1).update(CapacityRequirements={"Spot": {}})),
    "image-release-version": lambda t: _group(t, 1).update(ImageReleaseVersion="1.2.3"),
    "auto-patch": lambda t: _group(t, 1).update(
        AutoPatchConfig={"PatchingStrategy": "WhenIdle", "IdleWaitWindowInSeconds": 60}
    ),
    "scheduled-update-batches": lambda t: _group(t, 1).update(
        ScheduledUpdateConfig={"ScheduleExpression": "cron(0 3 ? * SUN *)", "DeploymentConfig": {}}
    ),
    "min-count": lambda t: _group(t, 1).update(MinInstanceCount=3),
    "min-count-continuous": lambda t: (_not_continuous(t), _group(t, 1).update(MinInstanceCount=1)),
    "deep-health-continuous": lambda t: (
        _not_continuous(t),
        _group(t, 1).update(OnStartDeepHealthChecks=["InstanceStress"]),
    ),
    "deep-health-workers": lambda t: _group(t, 0).update(OnStartDeepHealthChecks=["InstanceStress"]),
    "threads-per-core": lambda t: _group(t, 1).update(InstanceType="ml.c7g.xlarge", ThreadsPerCore=2),
    "deep-health-connectivity": lambda t: _group(t, 1).update(
        InstanceType="ml.c5.xlarge", OnStartDeepHealthChecks=["InstanceStress", "InstanceConnectivity"]
    ),
    "volume-key-continuous": lambda t: (
        _not_continuous(t),
        _group(t, 1).update(InstanceStorageConfigs=[{"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": KEY}}]),
    ),
    "fsx-custom-vpc": lambda t: _group(t, 1).update(
        InstanceStorageConfigs=[
            {
                "FsxLustreConfig": {
                    "DnsName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
                    "MountName": "abcdefgh",
                }
            }
        ]
    ),
}
"""One small break per rule."""


def _ours(template: dict[str, Any]) -> list[str]:
    """Our rules' findings, informational ones included: ``<id> <message> (<path>)``."""
    return [f for f in cfn_lint(template, include=["I"]) if f.split()[0] in OURS]


def test_every_rule_has_a_breaking_template() -> None:
    assert set(BREAKS) == set(CHECKS)
    assert {row.id for row in support_table() if row.own_cfn_lint_rule} == set(CHECKS)


BUILT_IN: dict[str, tuple[str, Callable[[dict[str, Any]], object]]] = {
    "image-id": ("E3031", lambda t: _group(t, 1).update(ImageId="ami-xyz")),
    "training-plan": ("E3031", lambda t: _group(t, 1).update(TrainingPlanArn="my-plan")),
    "instance-count": ("E3034", lambda t: _group(t, 1).update(InstanceCount=7000)),
}
"""Rows that name one of cfn-lint's own schema rules, with a break it catches."""


def test_rows_naming_a_built_in_rule_are_caught_by_it() -> None:
    named = {row.id: row.cfn_lint for row in support_table() if not row.own_cfn_lint_rule and row.cfn_lint != "-"}
    assert named == {row_id: rule for row_id, (rule, _) in BUILT_IN.items()}
    for row_id, (rule, breaks) in BUILT_IN.items():
        template = _template()
        breaks(template)
        assert any(f.startswith(rule + " ") for f in cfn_lint(template)), row_id


def test_the_good_template_keeps_every_rule() -> None:
    assert _ours(_template()) == []


@pytest.mark.parametrize("row_id", sorted(BREAKS))
def test_each_rule_fires_on_the_template_that_breaks_it(row_id: str) -> None:
    template = _template()
    BREAKS[row_id](template)
    row = support_row(row_id)
    found = [f for f in _ours(template) if f.startswith(row.cfn_lint + " ")]
    assert len(found) == 1, _ours(template)
    assert row.source in found[0] and row.checked in found[0]
    if row.unconfirmed:
        assert "Slurm support is unconfirmed: check " + row.check in found[0]


def test_the_rules_take_their_level_from_the_row() -> None:
    for row in support_table():
        if row.own_cfn_lint_rule and row.id in RULES:
            assert RULES[row.id].id == row.cfn_lint
            assert RULES[row.id].source_url == row.source


def test_an_eks_cluster_is_left_alone() -> None:
    template = _template()
    _props(template)["Orchestrator"] = {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:111122223333:cluster/k"}}
    _flexible(template)
    _group(template, 1)["CapacityRequirements"] = {"Spot": {}}
    assert not [f for f in _ours(template) if f.split()[0] in {"W9108", "W9109"}]


def test_both_branches_of_a_condition_are_judged_and_a_token_is_skipped() -> None:
    template = _template()
    template["Parameters"] = {"Capacity": {"Type": "String", "AllowedValues": ["spot", "on-demand"]}}
    template["Conditions"] = {"Spot": {"Fn::Equals": [{"Ref": "Capacity"}, "spot"]}}
    groups = _props(template)["InstanceGroups"]
    groups[1] = {"Fn::If": ["Spot", {**groups[1], "CapacityRequirements": {"Spot": {}}}, groups[1]]}
    _props(template)["NodeProvisioningMode"] = {"Ref": "AWS::NoValue"}
    found = _ours(template)
    assert [f.split()[0] for f in found] == ["W9109"], found
    assert "InstanceGroups/1/Fn::If/1/CapacityRequirements" in found[0]


def test_the_cluster_metadata_skips_an_accepted_rule() -> None:
    template = _template()
    _group(template, 1)["CapacityRequirements"] = {"Spot": {}}
    template["Resources"]["Cluster"]["Metadata"] = {"cfn-lint": {"config": {"ignore_checks": ["W9109"]}}}
    assert _ours(template) == []


def test_the_documented_command_line_loads_the_rules(tmp_path: Path) -> None:
    template = _template()
    BREAKS["continuous-no-strategy"](template)
    path = tmp_path / "template.json"
    path.write_text(json.dumps(template))
    cfn_lint_script = Path(sys.executable).parent / "cfn-lint"  # the console script beside this Python
    command = [str(cfn_lint_script), "--append-rules", HYPERPOD_CFN_LINT_RULES, "--", str(path)]
    assert f"--append-rules {HYPERPOD_CFN_LINT_RULES}" in (ROOT / "docs" / "cfn-lint-rules.md").read_text()
    run = subprocess.run(command, capture_output=True, text=True, env=os.environ, check=False)
    assert run.returncode != 0 and "E9101 " in run.stdout, run.stdout + run.stderr


@pytest.mark.slow  # handed out first (tests/conftest.py)
def test_every_example_template_passes_the_rules(scanned_templates: Path, example_lint: LintOnce) -> None:
    """As deployed, as published and as a Service Catalog product (the scanners' set of templates); cfn-lint runs
    once per template of the session (tests/test_examples.py reads the same run)."""
    templates = scanned_templates
    names = [p.name for p in templates.iterdir()]
    assert any(n.endswith(".product.template.json") for n in names) and any("-published." in n for n in names)
    for path in sorted(templates.iterdir()):
        ours = [f for f in example_lint.all(json.loads(path.read_text())) if f.split()[0] in OURS]
        assert ours == [] or _only_informational(ours), path.name


def _only_informational(ours: list[str]) -> bool:
    """A cluster with an external accounting database carries I9106 (one-way), and nothing else of ours."""
    return {f.split()[0] for f in ours} == {"I9106"}


def test_a_template_is_not_changed_by_the_rules() -> None:
    template = _template()
    before = copy.deepcopy(template)
    _ours(template)
    assert template == before


def test_the_hardware_rules_decide_from_ec2_facts_not_names() -> None:
    """E9220 / E9221 judge the literal types by EC2's description: ThreadsPerCore 2 and InstanceConnectivity pass on
    a type that has SMT and GPUs, a flexible group's list is judged, an unknown type (no source) is not, and the
    1-2 range stays cfn-lint's schema rule E3034."""
    kept = _template()
    _group(kept, 1).update(
        InstanceType="ml.p5.48xlarge", ThreadsPerCore=2, OnStartDeepHealthChecks=["InstanceConnectivity"]
    )
    assert _ours(kept) == []
    flexible = _template()
    _flexible(flexible)
    _group(flexible, 1)["InstanceRequirements"]["InstanceTypes"] = ["ml.m5.xlarge", "ml.m8g.xlarge"]
    _group(flexible, 1)["ThreadsPerCore"] = 2
    found = [f for f in _ours(flexible) if f.startswith("E9220 ")]
    assert len(found) == 1 and "ml.m8g.xlarge" in found[0] and "ml.m5.xlarge" not in found[0], found
    unknown = _template()
    _group(unknown, 1).update(
        InstanceType="ml.p6e-gb200.36xlarge", ThreadsPerCore=2, OnStartDeepHealthChecks=["InstanceConnectivity"]
    )
    assert [f for f in _ours(unknown) if f.split()[0] in {"E9220", "E9221"}] == []
    out_of_range = _template()
    _group(out_of_range, 1)["ThreadsPerCore"] = 3
    assert any(f.startswith("E3034 ") for f in cfn_lint(out_of_range))
