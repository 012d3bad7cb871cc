"""The cfn-lint rules for rows of the AWS inventory (hyperpod_cdk.cfnlint_rules.inventory, E9240-E9259): each fires on a
small Slurm template that breaks its row, not on one that keeps it, and takes its text and URL from the row."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hyperpod_cdk.aws_data.inventory import row
from hyperpod_cdk.cfnlint_rules.inventory import INVENTORY_CHECKS, INVENTORY_RULES
from support import cfn_lint

ROLE = "arn:aws:iam::111122223333:role/hyperpod"
KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _template() -> dict[str, Any]:
    group = {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "ExecutionRole": ROLE}
    return {
        "Resources": {
            "Cluster": {
                "Type": "AWS::SageMaker::Cluster",
                "Properties": {
                    "ClusterName": "c",
                    "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}},
                    "Tags": [{"Key": "team", "Value": "ml"}],
                    "InstanceGroups": [
                        {**group, "InstanceGroupName": "controller", "SlurmConfig": {"NodeType": "Controller"}},
                        {
                            **group,
                            "InstanceGroupName": "gpu",
                            "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]},
                            "InstanceStorageConfigs": [
                                {"EbsVolumeConfig": {"VolumeSizeInGB": 100, "VolumeKmsKeyId": KEY}},
                                {"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": KEY}},
                            ],
                        },
                    ],
                },
            }
        }
    }


def _props(t: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = t["Resources"]["Cluster"]["Properties"]
    return props


def _root(t: dict[str, Any]) -> dict[str, Any]:
    volume: dict[str, Any] = _props(t)["InstanceGroups"][1]["InstanceStorageConfigs"][1]["EbsVolumeConfig"]
    return volume


BREAKS: dict[str, list[Callable[[dict[str, Any]], object]]] = {
    "E9240": [
        lambda t: _props(t).update(Orchestrator={}),
        lambda t: _props(t)["Orchestrator"].update(Eks={"ClusterArn": "arn:aws:eks:us-east-1:111122223333:cluster/x"}),
    ],
    "E9241": [
        lambda t: _props(t)["InstanceGroups"][1].update(InstanceRequirements={"InstanceTypes": ["ml.g5.xlarge"]}),
        lambda t: _props(t)["InstanceGroups"][1].pop("InstanceType"),
    ],
    "E9242": [lambda t: _root(t).update(VolumeSizeInGB=100), lambda t: _root(t).pop("VolumeKmsKeyId")],
    "E9244": [
        lambda t: _props(t)["InstanceGroups"][1].update(ImageId="ami-12345678xyz"),
        lambda t: _props(t)["InstanceGroups"][1].update(ImageId="latest"),
    ],
    "E9243": [
        lambda t: _props(t)["Tags"][0].update(Key="aws:team"),
        lambda t: _props(t)["Tags"][0].update(Value="AWS:ml"),
    ],
}


def _ours(template: dict[str, Any]) -> list[str]:
    return [f for f in cfn_lint(template) if f.split()[0] in INVENTORY_RULES]


def test_the_good_template_keeps_every_rule() -> None:
    assert _ours(_template()) == []
    for image in ("default", "ami-0123456789abcdef0", "ami-12345678"):
        template = _template()
        _props(template)["InstanceGroups"][1]["ImageId"] = image
        assert _ours(template) == [], image


@pytest.mark.parametrize("cfn_id", sorted(INVENTORY_CHECKS))
def test_each_rule_fires_on_each_break_with_its_rows_words(cfn_id: str) -> None:
    source = row(INVENTORY_CHECKS[cfn_id][0])
    assert source.cfn_lint == cfn_id, f"row {source.id} names {source.cfn_lint}, not {cfn_id}"
    assert cfn_id[0] == {"error": "E", "warning": "W"}[source.level]
    for index, breaks in enumerate(BREAKS[cfn_id]):
        template = _template()
        breaks(template)
        found = _ours(template)
        assert found and all(f.startswith(cfn_id) for f in found), (cfn_id, index, found)
        assert all(source.url in f for f in found)


def test_an_eks_cluster_is_left_alone() -> None:
    template = _template()
    _props(template)["Orchestrator"] = {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:111122223333:cluster/x"}}
    _props(template)["Tags"][0]["Key"] = "aws:team"
    assert _ours(template) == []


def test_ids_are_in_the_inventory_range() -> None:
    assert all(9240 <= int(i[1:]) <= 9259 for i in INVENTORY_CHECKS)
