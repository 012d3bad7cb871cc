"""Where a cluster may run, as AWS's pages say: the Regions of HyperPod's landing page (GRP-REGION, and
GRP-REGION-UNLISTED where AWS's price list names more), zone names and Local Zones (NET-AZ, NET-LOCAL-ZONE), and
UltraServers in the Dallas Local Zone only (GRP-ULTRASERVER-ZONE)."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_cdk.core.config import parse_model
from training_runtime.hyperpod_facts import HYPERPOD_REGIONS, ULTRASERVER_ZONE

CONTROLLER = {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}
ULTRA = {"name": "gb200", "instance_type": "ml.p6e-gb200.36xlarge", "count": 18}
CPU = {"name": "cpu", "instance_type": "ml.c5.xlarge", "count": 2}


def found(rule: str, network: dict[str, Any] | None = None, *groups: dict[str, Any], region: str | None = None) -> Any:
    config = parse_model({"network": network or {}, "storage": None, "instance_groups": [CONTROLLER, *groups]})
    return [p for p in config.problems(region=region) if p.rule == rule]


@pytest.mark.parametrize("zone", ["us-east-1a", "us-east-1-dfw-2a", "us-west-2-lax-1a"])
def test_a_zone_or_local_zone_name_is_taken(zone: str) -> None:
    assert found("NET-AZ", {"availability_zone": zone}) == []


@pytest.mark.parametrize(
    ("zone", "words"),
    [
        ("use1-az1", "this is an AZ ID"),
        ("us-east-1-wl1-bos-wlz-1", "expected an AZ name"),
        ("dfw-2a", "expected an AZ name"),
    ],
)
def test_what_is_no_zone_name_is_refused(zone: str, words: str) -> None:
    (problem,) = found("NET-AZ", {"availability_zone": zone})
    assert problem.level == "error" and words in str(problem)


def test_a_local_zone_is_in_its_parent_region() -> None:
    """NET-AZ takes the name; PRINCIPLE-REGION (every az field) holds it to the stack's Region."""
    assert found("PRINCIPLE-REGION", {"availability_zone": "us-east-1-dfw-2a"}, region="us-east-1") == []
    (problem,) = found("PRINCIPLE-REGION", {"availability_zone": "us-east-1-dfw-2a"}, region="us-west-2")
    assert "an Availability Zone in us-east-1, but the cluster is in us-west-2" in str(problem)
    assert found("NET-AZ", {"availability_zone": "us-east-1-dfw-2a"}, region="us-west-2") == []


def test_ultraservers_run_in_the_dallas_local_zone_only() -> None:
    assert found("GRP-ULTRASERVER-ZONE", {"availability_zone": ULTRASERVER_ZONE}, ULTRA, region="us-east-1") == []
    (elsewhere,) = found("GRP-ULTRASERVER-ZONE", {"availability_zone": "us-east-1b"}, ULTRA)
    assert elsewhere.path == "network.availability_zone" and "only in the Dallas Local Zone" in str(elsewhere)
    (unset,) = found("GRP-ULTRASERVER-ZONE", {}, ULTRA, region="us-east-1")
    assert f"set network.availability_zone: {ULTRASERVER_ZONE}" in (unset.fix or "")
    (region,) = found("GRP-ULTRASERVER-ZONE", {}, ULTRA, region="us-west-2")
    assert region.path == "instance_groups[1].instance_type" and "UltraServers in us-west-2" in str(region)
    assert found("GRP-ULTRASERVER-ZONE", {"availability_zone": "us-east-1b"}, CPU) == []


def test_a_local_zone_warns_where_aws_does_not_document_it() -> None:
    (other,) = found("NET-LOCAL-ZONE", {"availability_zone": "us-west-2-lax-1a"}, CPU)
    assert other.level == "warning" and "one Local Zone only" in str(other)
    (types,) = found("NET-LOCAL-ZONE", {"availability_zone": ULTRASERVER_ZONE}, ULTRA)
    assert "ml.m5.xlarge" in str(types) and "ml.p6e-gb200.36xlarge launch" not in str(types)
    assert found("NET-LOCAL-ZONE", {"availability_zone": "us-east-1a"}, CPU) == []


@pytest.mark.parametrize("region", HYPERPOD_REGIONS)
def test_every_region_of_the_landing_page_is_taken(region: str) -> None:
    assert found("GRP-REGION", None, CPU, region=region) == []
    assert found("GRP-REGION-UNLISTED", None, CPU, region=region) == []


def test_a_region_only_the_price_list_names_warns_and_one_neither_names_is_refused() -> None:
    (unlisted,) = found("GRP-REGION-UNLISTED", None, CPU, region="ca-central-1")
    assert unlisted.level == "warning" and found("GRP-REGION", None, CPU, region="ca-central-1") == []
    (refused,) = found("GRP-REGION", None, CPU, region="eu-west-3")
    assert refused.level == "error" and "SageMaker HyperPod is available in the following AWS Regions." in str(refused)


def test_without_a_region_the_zone_names_it() -> None:
    (refused,) = found("GRP-REGION", {"availability_zone": "af-south-1a"}, CPU)
    assert refused.got == "af-south-1"
    assert found("GRP-REGION", {"availability_zone": "eu-west-1a"}, CPU) == []
    assert found("GRP-REGION", {}, CPU) == []  # nothing names the Region: nothing to judge


def test_min_count_is_taken_on_controller_and_login_groups_with_continuous_provisioning() -> None:
    """AWS: "Default MinInstanceCount for Controller and Login InstanceGroup is set to 1 during cluster creation"."""
    groups = [
        {**CONTROLLER, "min_count": 1},
        {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 1, "min_count": 1},
        {**CPU, "min_count": 2},
    ]
    config = parse_model({"node_provisioning_mode": "continuous", "storage": None, "instance_groups": groups})
    assert [p for p in config.problems() if p.rule and p.rule.startswith("GRP-MIN-COUNT")] == []
    without = parse_model({"storage": None, "instance_groups": groups})
    assert {p.path for p in without.problems() if p.rule == "GRP-MIN-COUNT-CONTINUOUS"} == {
        "instance_groups[0].min_count",
        "instance_groups[1].min_count",
        "instance_groups[2].min_count",
    }
