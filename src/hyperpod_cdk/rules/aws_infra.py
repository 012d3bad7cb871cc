"""Rules from AWS's pages on a HyperPod cluster's network (the inventory, ``data/aws_inventory``): what the nodes'
security group must let out. The rows that name these rules quote the pages."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

PREREQUISITES_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html"
NO_WAY_OUT_QUOTE = (
    "Without internet access, instance groups cannot store or retrieve lifecycle scripts, training data, or model "
    "artifacts."
)
"""The prerequisites page ("Setting up SageMaker HyperPod with a custom Amazon VPC"), read 2026-11-29."""

rule = REGISTRY.rule


@rule(
    "NET-EGRESS-CLOSED",
    "network",
    "network.allow_internet_egress",
    source=f"{PREREQUISITES_DOC} (custom Amazon VPC: Amazon S3 connectivity)",
)
def egress_closed(view: ClusterView) -> Iterator[Problem]:
    """The stack's node security group keeps a way out: without it the nodes reach neither S3 nor AWS's endpoints."""
    net = view.network
    if net is None or net.security_group_id is not None or net.allow_internet_egress is not False:
        return
    yield Problem(
        view.path("network", "allow_internet_egress"),
        "the stack's node security group would let traffic out only to itself and to the file system, so the nodes "
        "reach neither the VPC's S3 gateway endpoint nor the NAT gateway; AWS: "
        f'"{NO_WAY_OUT_QUOTE}" ({PREREQUISITES_DOC})',
        got=False,
        fix="keep allow_internet_egress: true (the default; the group also keeps the rule to itself that EFA needs), "
        "or bring a security group whose rules you manage (network.security_group_id with network.vpc_id)",
    )
