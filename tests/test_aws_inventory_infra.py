"""The inventory rows of the network, encryption and accounting pages (data/aws_inventory, issue #30) and the rules
they name: each row names an enforcement that exists, with the level its word asks; NET-EGRESS-CLOSED and E9280
each refuse the break their row quotes and pass the config or template that keeps it."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_cdk.aws_data.api_support import support_table
from hyperpod_cdk.cfnlint_rules.infra import RULES as INFRA_CFN_RULES
from hyperpod_cdk.cfnlint_rules.infra import self_rules
from hyperpod_cdk.cfnlint_rules.provisioning import PROVISIONING_RULES
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.preflight import load as load_online_rules
from hyperpod_cdk.rules import all_rules
from support import ROOT, build_example, cfn_lint, fast_app, template_of

load_online_rules()  # rows name online (preflight) rules

INVENTORY = ROOT / "src" / "hyperpod_cdk" / "data" / "aws_inventory"
FILES = (
    "sagemaker-hyperpod-prerequisites.yaml",
    "smcluster-cmk.yaml",
    "sagemaker-hyperpod-external-accounting-db-slurm.yaml",
    "sagemaker-hyperpod-cluster-observability-slurm-prerequisites.yaml",
    "sagemaker-hyperpod-lifecycle-best-practices-slurm-what-hyperpod-overrides-in-slurm-conf.yaml",
)
ERROR_WORDS = {"must", "only", "cannot", "not-supported", "required"}
WARNING_WORDS = {"avoid", "recommend"}
PERMISSION_WORDS = {"can"}
ENFORCEMENTS = {"rule", "cfn-lint", "construction", "preflight", "update-policy", "out-of-scope"}
POLICIES = {"immutable", "new-nodes-only", "replaces-root-volume", "irreversible", "replaces-cluster"}


def rows() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name in FILES:
        page = yaml.safe_load((INVENTORY / name).read_text())
        assert {"page", "title", "read", "rows"} <= set(page) <= {"page", "title", "read", "partial", "rows"}, name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", page["read"]), name
        assert page["page"] == f"https://docs.aws.amazon.com/sagemaker/latest/dg/{name[:-5]}.html", name
        found += [(name, row) for row in page["rows"]]
    return found


RULES = {r.id: r for r in all_rules()}
CFN_LINT_IDS = (
    {row.cfn_lint for row in support_table() if row.cfn_lint}
    | {cls.id for cls in INFRA_CFN_RULES}
    | {cls.id for cls in PROVISIONING_RULES.values()}
)


def test_every_row_names_an_enforcement_that_exists() -> None:
    seen: dict[str, dict[str, Any]] = {}
    for name, row in rows():
        where = f"{name}: {row.get('id')}"
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", row["id"]) and row["id"] not in seen, where
        seen[row["id"]] = row
        assert row["quote"].strip() and row["applies"] in {"slurm", "eks", "both"}, where
        assert row["word"] in ERROR_WORDS | WARNING_WORDS | PERMISSION_WORDS, where
        assert row["enforced_by"] in ENFORCEMENTS, where
        assert row["word"] not in PERMISSION_WORDS or row["enforced_by"] == "construction", where
        kind = row["enforced_by"]
        if kind == "rule":
            rule = RULES[row["rule"]]
            assert rule.level == ("error" if row["word"] in ERROR_WORDS else "warning"), where
            assert row["cfn_lint"] in CFN_LINT_IDS or (row["cfn_lint"] == "-" and row["why_no_cfn_lint"]), where
        elif kind == "cfn-lint":
            assert row["cfn_lint"] in CFN_LINT_IDS, where
        elif kind == "preflight":
            assert "aws" in RULES[row["preflight"]].needs, where
        elif kind == "update-policy":
            assert row["field"] and row["api_member"] and row["policy"] in POLICIES, where
            assert row["rule_previous"] in RULES or row["rule_previous"].startswith("UPD-"), where
        else:
            assert row["how"].strip(), where
        if "cfn_lint" in row and row["cfn_lint"] != "-":
            assert row["cfn_lint"] in CFN_LINT_IDS, where
    for row in seen.values():
        for other in row.get("conflicts_with", []):
            assert row["id"] in seen[other].get("conflicts_with", []), f"{row['id']} and {other} name each other"


def test_the_egress_row_quotes_both_aws_sources_and_says_why() -> None:
    by_id = {row["id"]: row for _, row in rows()}
    avoid = by_id["prereq-efa-egress-avoid"]
    assert "avoid using `0.0.0.0/0` for outbound rules" in avoid["quote"]
    assert "slurm-security-group-template.yaml" in avoid["how"] and "CidrIp: 0.0.0.0/0" in avoid["how"]
    assert "NET-EGRESS-CLOSED" in avoid["how"] and "E9280" in avoid["how"]
    # scoped, and saying so: the stack's own group keeps 0.0.0.0/0 and nothing reports it, --strict included
    assert "The stack's own node group is not held to the sentence, and no rule reports" in " ".join(
        avoid["how"].split()
    )
    assert by_id["prereq-efa-sg-self"]["cfn_lint"] == "E9280"


# --- NET-EGRESS-CLOSED --------------------------------------------------------------------------------------------
def problems(network: dict[str, Any]) -> list[tuple[str | None, str, str]]:
    config = parse_model(
        {
            "storage": None,
            "network": network,
            "instance_groups": [
                {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
                {"name": "w", "instance_type": "ml.p5.48xlarge", "count": 2},
            ],
        }
    )
    return [(p.rule, p.path, p.expected) for p in config.problems() if p.rule and p.rule.startswith("NET-")]


def test_closing_the_stack_groups_way_out_is_refused_with_the_quote() -> None:
    ((rule, path, expected),) = problems({"allow_internet_egress": False})
    assert (rule, path) == ("NET-EGRESS-CLOSED", "network.allow_internet_egress")
    assert "instance groups cannot store or retrieve lifecycle scripts" in expected
    assert "sagemaker-hyperpod-prerequisites.html" in expected


def test_the_default_and_an_adopted_group_keep_their_way_out() -> None:
    assert problems({}) == []
    assert problems({"allow_internet_egress": True}) == []
    adopted = {"vpc_id": "vpc-0123456789abcdef0", "subnet_id": "subnet-0123456789abcdef0"}
    adopted |= {"availability_zone": "us-east-1a", "security_group_id": "sg-0123456789abcdef0"}
    assert problems(adopted) == []


# --- E9280 --------------------------------------------------------------------------------------------------------
def _sg_ref() -> dict[str, Any]:
    return {"Fn::GetAtt": ["Nodes", "GroupId"]}


def _template(instance_type: str = "ml.p5.48xlarge") -> dict[str, Any]:
    """An EFA cluster whose security group is shaped as the stack renders it: inline 0.0.0.0/0, self rules apart."""
    rule = {"IpProtocol": "-1", "GroupId": _sg_ref()}
    return {
        "Resources": {
            "Nodes": {
                "Type": "AWS::EC2::SecurityGroup",
                "Properties": {
                    "GroupDescription": "nodes",
                    "VpcId": "vpc-0123456789abcdef0",
                    "SecurityGroupEgress": [{"CidrIp": "0.0.0.0/0", "IpProtocol": "-1"}],
                },
            },
            "SelfIn": {
                "Type": "AWS::EC2::SecurityGroupIngress",
                "Properties": {**rule, "SourceSecurityGroupId": _sg_ref()},
            },
            "SelfOut": {
                "Type": "AWS::EC2::SecurityGroupEgress",
                "Properties": {**rule, "DestinationSecurityGroupId": _sg_ref()},
            },
            "Cluster": {
                "Type": "AWS::SageMaker::Cluster",
                "Properties": {
                    "ClusterName": "c",
                    "VpcConfig": {"SecurityGroupIds": [_sg_ref()], "Subnets": ["subnet-0123456789abcdef0"]},
                    "InstanceGroups": [
                        {
                            "InstanceGroupName": "w",
                            "InstanceType": instance_type,
                            "InstanceCount": 2,
                            "ExecutionRole": "arn:aws:iam::111122223333:role/hyperpod",
                            "LifeCycleConfig": {"SourceS3Uri": "s3://b/lc", "OnCreate": "on_create.sh"},
                        }
                    ],
                },
            },
        }
    }


def e9280(template: dict[str, Any]) -> list[str]:
    return [f for f in cfn_lint(template) if f.startswith("E9280 ")]


def test_e9280_passes_a_group_with_both_self_rules() -> None:
    assert e9280(_template()) == []


def test_e9280_refuses_an_open_rule_in_place_of_the_self_rule() -> None:
    template = _template()
    del template["Resources"]["SelfOut"]  # the outbound 0.0.0.0/0 rule is all that is left
    (found,) = e9280(template)
    assert "no outbound rule for all traffic with itself" in found and "(Resources/Nodes)" in found
    assert "configure the security group to allow all inbound and outbound traffic" in found


def test_e9280_reads_inline_self_rules_and_leaves_clusters_without_efa_alone() -> None:
    template = _template()
    del template["Resources"]["SelfIn"]
    inline = {"IpProtocol": "-1", "SourceSecurityGroupId": {"Ref": "Nodes"}}
    template["Resources"]["Nodes"]["Properties"]["SecurityGroupIngress"] = [inline]
    assert e9280(template) == []
    broken = copy.deepcopy(template)
    broken["Resources"]["Nodes"]["Properties"]["SecurityGroupIngress"] = []
    assert len(e9280(broken)) == 1
    no_efa = _template("ml.m5.xlarge")
    del no_efa["Resources"]["SelfOut"]
    assert e9280(no_efa) == []


@pytest.mark.parametrize("example", ["gpu-cluster.yaml", "trn1-cluster.yaml"])
def test_the_stacks_own_efa_group_passes_e9280(example: str) -> None:
    (stack,) = build_example(Path(ROOT / "examples" / example), fast_app())
    template = template_of(stack)
    resources = template["Resources"]
    (cluster,) = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::Cluster"]
    ((_, (name, _)),) = [next(iter(ref.items())) for ref in cluster["Properties"]["VpcConfig"]["SecurityGroupIds"]]
    assert resources[name]["Type"] == "AWS::EC2::SecurityGroup" and self_rules(resources, name) == (True, True)
    assert e9280(template) == []
