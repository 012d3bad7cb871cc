"""Each preflight rule against a moto account: a real-looking account that breaks it, and a good one that passes.

Capacity and network rules here; the rules on adopted resources in test_preflight_resources.py. The account is
built in moto (tests/preflight_support.py); Service Quotas and training plans come from named fakes.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.rules import all_rules
from ops_support import ACCOUNT, REGION, aws_env, moto_url  # noqa: F401
from preflight_support import (  # noqa: F401
    AZ,
    NOW,
    OTHER_AZ,
    P5,
    AccountFakes,
    MotoAccount,
    acct_fixture,
    check,
    config,
    deployed_stack,
    fakes_fixture,
    moto_extras,
    only,
    plan,
)

pytestmark = pytest.mark.usefixtures("aws_env")


def test_every_online_rule_is_tested_here() -> None:
    here = Path(__file__).parent
    source = (here / "test_preflight_rules.py").read_text() + (here / "test_preflight_resources.py").read_text()
    online = [r.id for r in all_rules() if "aws" in r.needs]
    assert len(online) >= 14
    assert [i for i in online if source.count(f'"{i}"') < 2] == [], "test each rule: a broken and a good account"


# --- AWS-QUOTA ----------------------------------------------------------------------------------------------------
def test_quota_counts_other_clusters(acct: MotoAccount, fakes: AccountFakes) -> None:
    acct.cluster("other", P5, 6)  # 6 of the 8 p5 are taken by a running cluster
    problem = only(check("AWS-QUOTA", config(acct), fakes)[0])
    assert problem.path == "instance_groups[1].count"
    assert problem.got == 4
    assert "quota 'ml.p5.48xlarge for cluster usage' is 8 and other clusters use 6, leaving 2" in problem.expected
    assert "at least 10" in problem.fix
    assert problem.rule == "AWS-QUOTA" and problem.level == "error"


def test_quota_passes_with_room_and_ignores_the_cluster_itself(acct: MotoAccount, fakes: AccountFakes) -> None:
    acct.cluster("c1", P5, 6)  # the cluster being updated: its own nodes do not count twice
    assert check("AWS-QUOTA", config(acct), fakes)[0] == []


def test_quota_of_a_flexible_group_is_what_its_types_leave(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = config(acct)
    # The p5 quota (8) leaves 4 after the fixed group of 4; the c5 quota leaves 2: 6 for the flexible group.
    data["instance_groups"].append({"name": "flex", "instance_types": [P5, "ml.c5.xlarge"], "count": 5})
    assert check("AWS-QUOTA", data, fakes)[0] == []  # p5 leaves 4, c5 2: 6 >= 5
    data["instance_groups"][2]["count"] = 7
    problem = only(check("AWS-QUOTA", data, fakes)[0])
    assert problem.path == "instance_groups[2].count" and "leave 6 instances in all" in problem.expected


def test_quota_missing_for_type(acct: MotoAccount, fakes: AccountFakes) -> None:
    del fakes.quotas[f"{P5} for cluster usage"]
    problem = only(check("AWS-QUOTA", config(acct), fakes)[0])
    assert problem.path == "instance_groups[1].instance_type"
    assert "no quota 'ml.p5.48xlarge for cluster usage'" in problem.expected


def test_quota_access_denied_is_a_warning_naming_the_permission(acct: MotoAccount, fakes: AccountFakes) -> None:
    fakes.fail[("service-quotas", "ListServiceQuotas")] = ("AccessDeniedException", "not authorized")
    problem = only(check("AWS-QUOTA", config(acct), fakes)[0])
    assert problem.level == "warning"
    assert "servicequotas:ListServiceQuotas access denied" in problem.expected
    assert "--policy" in problem.fix


# --- AWS-TRAINING-PLAN --------------------------------------------------------------------------------------------
def with_plan(acct: MotoAccount, name: str = "p5-plan") -> dict[str, Any]:
    data = config(acct)
    data["instance_groups"][1]["training_plan_arn"] = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/{name}"
    return data


def test_training_plan_good(acct: MotoAccount, fakes: AccountFakes) -> None:
    fakes.plans["p5-plan"] = plan("p5-plan")
    assert check("AWS-TRAINING-PLAN", with_plan(acct), fakes)[0] == []


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        ({"az": OTHER_AZ}, "training_plan_arn", f"capacity is in {OTHER_AZ}; the nodes' subnet is in {AZ}"),
        ({"count": 2}, "count", "the training plan reserves 2 ml.p5.48xlarge instances"),
        ({"instance_type": "ml.p4d.24xlarge"}, "training_plan_arn", "reserves ml.p4d.24xlarge, not the group's"),
        ({"Status": "Expired"}, "training_plan_arn", "the plan is Expired"),
        ({"EndTime": NOW - timedelta(hours=1)}, "training_plan_arn", "the plan ended at"),
        ({"TargetResources": ["training-job"]}, "training_plan_arn", "not hyperpod-cluster"),
    ],
)
def test_training_plan_broken(
    acct: MotoAccount, fakes: AccountFakes, changes: dict[str, Any], path: str, words: str
) -> None:
    fakes.plans["p5-plan"] = plan("p5-plan", **changes)
    problem = only(check("AWS-TRAINING-PLAN", with_plan(acct), fakes)[0])
    assert problem.path == f"instance_groups[1].{path}"
    assert words in problem.expected and problem.level == "error"


def test_training_plan_not_started_is_a_warning(acct: MotoAccount, fakes: AccountFakes) -> None:
    fakes.plans["p5-plan"] = plan("p5-plan", Status="Scheduled", StartTime=NOW + timedelta(days=2))
    problem = only(check("AWS-TRAINING-PLAN", with_plan(acct), fakes)[0])
    assert problem.level == "warning" and "the plan starts at 2026-11-22" in problem.expected


def test_training_plan_in_use_elsewhere_is_a_warning(acct: MotoAccount, fakes: AccountFakes) -> None:
    fakes.plans["p5-plan"] = plan("p5-plan", AvailableInstanceCount=1, InUseInstanceCount=3)
    problem = only(check("AWS-TRAINING-PLAN", with_plan(acct), fakes)[0])
    assert problem.path == "instance_groups[1].count" and problem.level == "warning"
    assert "1 instances available (3 in use)" in problem.expected


def test_groups_sharing_a_training_plan_fit_it_together(acct: MotoAccount, fakes: AccountFakes) -> None:
    """AWS's update example puts two groups on one plan: their counts add up against the plan's reservation."""
    fakes.plans["p5-plan"] = plan("p5-plan", count=4)
    data = with_plan(acct)
    data["instance_groups"][1]["count"] = 2
    second = {**data["instance_groups"][1], "name": "more", "count": 1, "partition": "more"}
    data["instance_groups"].append(second)
    assert check("AWS-TRAINING-PLAN", data, fakes)[0] == []  # 2 + 1 of 4
    second["count"] = 3
    problem = only(check("AWS-TRAINING-PLAN", data, fakes)[0])
    assert problem.path == "instance_groups[2].count" and problem.level == "error"
    assert "ask for 5 instances; it reserves 4" in problem.expected


def test_a_training_plan_of_another_account_is_refused(acct: MotoAccount, fakes: AccountFakes) -> None:
    fakes.plans["p5-plan"] = plan("p5-plan")
    data = with_plan(acct)
    data["instance_groups"][1]["training_plan_arn"] = f"arn:aws:sagemaker:{REGION}:999988887777:training-plan/p5-plan"
    problem = only(check("AWS-TRAINING-PLAN", data, fakes)[0])
    assert problem.path == "instance_groups[1].training_plan_arn" and "cannot be shared across AWS accounts" in str(
        problem
    )


def test_training_plan_missing(acct: MotoAccount, fakes: AccountFakes) -> None:
    problem = only(check("AWS-TRAINING-PLAN", with_plan(acct, "nope"), fakes)[0])
    assert problem.path == "instance_groups[1].training_plan_arn" and "no such training plan" in problem.expected


# --- AWS-VPC, AWS-SUBNET, AWS-SECURITY-GROUP ----------------------------------------------------------------------
def test_vpc_missing(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = config(acct)
    data["network"]["vpc_id"] = "vpc-0123456789abcdef0"
    problem = only(check("AWS-VPC", data, fakes)[0])
    assert problem.path == "network.vpc_id" and "no such VPC in us-west-2" in problem.expected
    assert check("AWS-VPC", config(acct), fakes)[0] == []


def test_subnet_too_small_for_efa(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = config(acct)
    data["network"]["subnet_id"] = acct.make_subnet("10.0.32.0/26", AZ)  # 59 free; 4 p5 take 4 x 33, + 1
    problem = only(check("AWS-SUBNET", data, fakes)[0])
    assert problem.path == "network.subnet_id"
    assert "59 free addresses" in problem.expected and "the nodes take 133" in problem.expected
    assert "workers: 4 x 33" in problem.expected


def test_subnet_counts_what_the_running_cluster_holds(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = config(acct)
    data["network"]["subnet_id"] = acct.make_subnet("10.0.32.0/26", AZ)  # 59 free
    acct.cluster("c1", P5, 4, group="workers")  # this cluster, deployed: its 4 p5 hold 132 addresses already
    assert check("AWS-SUBNET", data, fakes)[0] == []
    data["instance_groups"][1]["count"] = 6  # 2 more p5 take 66 > 59
    problem = only(check("AWS-SUBNET", data, fakes)[0])
    assert (
        "59 free addresses in" in problem.expected
        and "(plus 132 this cluster's running nodes hold)" in problem.expected
    )


def test_subnet_efa_only_interfaces_take_no_address(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = config(acct)
    data["network"]["subnet_id"] = acct.make_subnet("10.0.32.0/26", AZ)
    data["instance_groups"][1]["network_interface"] = "efa-only"
    assert check("AWS-SUBNET", data, fakes)[0] == []


def test_subnet_in_another_az_or_vpc_or_missing(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = config(acct)
    data["network"]["subnet_id"] = acct.other_subnet
    problem = only(check("AWS-SUBNET", data, fakes)[0])
    assert problem.path == "network.availability_zone" and problem.got == AZ
    assert f"set availability_zone: {OTHER_AZ}" in problem.fix
    other_vpc = acct.ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    data["network"]["subnet_id"] = acct.make_subnet("10.9.0.0/20", AZ, vpc=other_vpc)
    assert f"not in network.vpc_id {acct.vpc}" in only(check("AWS-SUBNET", data, fakes)[0]).expected
    data["network"]["subnet_id"] = "subnet-0123456789abcdef0"
    assert "no such subnet" in only(check("AWS-SUBNET", data, fakes)[0]).expected
    assert check("AWS-SUBNET", config(acct), fakes)[0] == []


def test_subnet_of_a_group_override(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = config(acct)
    small = acct.make_subnet("10.0.40.0/28", AZ)  # 11 free
    data["instance_groups"][1]["override_vpc"] = {"subnet_ids": [small], "security_group_ids": [acct.sg]}
    problem = only(check("AWS-SUBNET", data, fakes)[0])
    assert problem.path == "instance_groups[1].override_vpc.subnet_ids" and "11 free addresses" in problem.expected


def test_security_group_without_self_rule(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = config(acct)
    data["network"]["security_group_id"] = acct.security_group("open", self_referencing=False)
    problem = only(check("AWS-SECURITY-GROUP", data, fakes)[0])
    assert problem.path == "network.security_group_id"
    # moto's default outbound 0.0.0.0/0 rule is no self rule for the EFA workers (see the test below)
    assert "no inbound or outbound rule allows all traffic with the group itself" in problem.expected
    assert check("AWS-SECURITY-GROUP", config(acct), fakes)[0] == []


def test_security_group_open_egress_is_no_efa_self_rule(acct: MotoAccount, fakes: AccountFakes) -> None:
    """With EFA types, an outbound 0.0.0.0/0 rule does not stand in for the one to the group itself (prerequisites
    page: "avoid using `0.0.0.0/0` for outbound rules, as this may cause EFA health check failures")."""
    data = config(acct)
    group = acct.security_group("efa", self_referencing=False)  # moto's default egress: 0.0.0.0/0 only
    acct.ec2.authorize_security_group_ingress(
        GroupId=group, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}]
    )
    data["network"]["security_group_id"] = group
    problem = only(check("AWS-SECURITY-GROUP", data, fakes)[0])
    assert problem.path == "network.security_group_id" and problem.level == "error"
    assert "no outbound rule allows all traffic with the group itself" in problem.expected
    assert "avoid using `0.0.0.0/0` for outbound rules" in problem.expected
    data["instance_groups"][1]["instance_type"] = "ml.m5.xlarge"  # no EFA: the open rule carries Slurm's traffic
    assert check("AWS-SECURITY-GROUP", data, fakes)[0] == []


def test_efa_groups_of_one_partition_stay_in_one_az(acct: MotoAccount, fakes: AccountFakes) -> None:
    """Prerequisites page, multiple AZs: "Elastic Fabric Adapter (EFA) traffic cannot cross AZs or VPCs." """
    data = config(acct)
    far = {"name": "far", "instance_type": P5, "count": 2, "partition": "workers"}
    far["override_vpc"] = {"subnet_ids": [acct.other_subnet], "security_group_ids": [acct.sg]}
    data["instance_groups"].append(far)
    problem = only(check("AWS-EFA-AZ", data, fakes)[0])
    assert problem.path == "instance_groups[2].override_vpc.subnet_ids" and problem.level == "error"
    assert f"partition workers have subnets in several AZs (workers: {AZ}; far: {OTHER_AZ})" in problem.expected
    assert "(EFA) traffic cannot cross AZs or VPCs" in problem.expected
    far["partition"] = "far"  # a partition of its own: its jobs stay in one AZ
    assert check("AWS-EFA-AZ", data, fakes)[0] == []
    assert check("AWS-EFA-AZ", config(acct), fakes)[0] == []


# --- GRP-SCALING-DEPLOYED -----------------------------------------------------------------------------------------
def scaled_config(acct: MotoAccount, high: int) -> dict[str, Any]:
    data = config(acct, node_provisioning_mode="continuous")
    data["instance_groups"][1]["scaling"] = {"min": 0, "max": high}
    return data


def test_scaling_max_below_the_deployed_count(acct: MotoAccount, fakes: AccountFakes) -> None:
    acct.cluster("c1", P5, 6)  # the scaler has grown this cluster's workers to 6
    problem = only(check("GRP-SCALING-DEPLOYED", scaled_config(acct, 4), fakes)[0])
    assert problem.path == "instance_groups[1].scaling.max" and problem.got == 4
    assert "below the deployed group's 6 instances" in problem.expected and "keep max at 6" in problem.fix
    assert problem.rule == "GRP-SCALING-DEPLOYED" and problem.level == "error"


def test_scaling_max_at_the_deployed_count_or_no_cluster(acct: MotoAccount, fakes: AccountFakes) -> None:
    assert check("GRP-SCALING-DEPLOYED", scaled_config(acct, 4), fakes)[0] == []  # no cluster yet
    acct.cluster("c1", P5, 4)
    problems, account = check("GRP-SCALING-DEPLOYED", scaled_config(acct, 4), fakes)
    assert problems == []
    assert {a for _, a in account.calls} <= {"sagemaker:ListClusters", "sagemaker:DescribeCluster"}


def test_quota_covers_a_scaled_groups_max(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = scaled_config(acct, 10)  # 4 p5 at creation, up to 10 once the scaler grows the group; the quota is 8
    problem = only(check("AWS-QUOTA", data, fakes)[0])
    assert problem.got == 10 and "at least 10" in problem.fix and "scaling.max" in problem.fix
    assert check("AWS-QUOTA", scaled_config(acct, 8), fakes)[0] == []


# --- UPD-DEPLOYED -------------------------------------------------------------------------------------------------
def test_deployed_change_the_api_refuses_is_an_error(acct: MotoAccount, fakes: AccountFakes) -> None:
    acct.cluster("c1", P5, 4)
    deployed_stack(acct, "Login")  # deployed as a login group; the config makes it compute
    problem = only(check("UPD-DEPLOYED", config(acct), fakes)[0])
    assert problem.path == "instance_groups[1].role" and problem.got == "compute"
    assert problem.rule == "UPD-DEPLOYED" and problem.level == "error"
    assert "deployed: 'login'" in problem.expected and "NodeType is immutable" in problem.expected
    assert "add a new instance group" in problem.fix


def test_deployed_changes_none_without_a_cluster_or_a_change(acct: MotoAccount, fakes: AccountFakes) -> None:
    assert check("UPD-DEPLOYED", config(acct), fakes)[0] == []  # no cluster yet
    acct.cluster("c1", P5, 4)
    deployed_stack(acct, "Compute")
    problems, account = check("UPD-DEPLOYED", config(acct), fakes)
    assert problems == []
    assert {a for _, a in account.calls} == {
        "sagemaker:ListClusters",
        "sagemaker:DescribeCluster",
        "cloudformation:DescribeStacks",
        "cloudformation:GetTemplate",
    }
