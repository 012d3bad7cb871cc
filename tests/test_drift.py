"""Drift by the field map: a plain group member the cluster reports under its own name (DescribeCluster's
ClusterInstanceGroupDetails) is compared with the template's, whatever field it is."""

from __future__ import annotations

from typing import Any

from hyperpod_cdk.deployed.drift import drift
from hyperpod_cdk.deployed.stack import Deployed


def deployed(live: dict[str, Any]) -> Deployed:
    group = {"InstanceGroupName": "workers", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2, "ThreadsPerCore": 2}
    template = {"Resources": {"C": {"Type": "AWS::SageMaker::Cluster", "Properties": {"InstanceGroups": [group]}}}}
    described = {"InstanceGroups": [{"InstanceGroupName": "workers", "InstanceType": "ml.c5.xlarge", **live}]}
    return Deployed("stack", "cluster", template=template, described=described, nodes={"workers": 2})


def test_a_plain_member_the_cluster_reports_differently_is_drift() -> None:
    (found,) = drift(deployed({"TargetCount": 2, "ThreadsPerCore": 1}), {"workers": 2}, {"workers": "ml.c5.xlarge"})
    assert (found.group, found.what, found.deployed, found.old) == ("workers", "threads_per_core", 1, 2)
    assert "outside CloudFormation" in found.note


def test_the_same_value_or_a_member_the_cluster_does_not_report_is_not() -> None:
    assert drift(deployed({"TargetCount": 2, "ThreadsPerCore": 2}), {"workers": 2}, {"workers": "ml.c5.xlarge"}) == []
    assert drift(deployed({"TargetCount": 2}), {"workers": 2}, {"workers": "ml.c5.xlarge"}) == []
