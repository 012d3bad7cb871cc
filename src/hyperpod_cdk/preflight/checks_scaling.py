"""Online rule on the scaler: a deploy must not lower a scaled group below the count the scaler has given it."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.deployed.scaler_counts import counts_of, template_counts
from hyperpod_cdk.preflight import lookups
from hyperpod_cdk.preflight.online import account_of, cluster_name, guarded, online_rule
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

SCALE_DOWN_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-scale-down.html"


@online_rule(
    "GRP-SCALING-DEPLOYED",
    "instance_groups",
    "instance_groups[*].scaling.max",
    actions=("sagemaker:ListClusters", "sagemaker:DescribeCluster"),
    source=f"{SCALE_DOWN_DOC} (UpdateCluster to a lower InstanceCount: HyperPod randomly chooses the instances it "
    "terminates); docs/scaler-cloudformation.md",
)
def deployed_within_max(view: ClusterView) -> Iterator[Problem]:
    """A scaled group's scaling.max is not below the deployed group's count: the deploy would terminate nodes of
    HyperPod's choosing, busy ones included (synth refuses the same template)."""
    if not any(g.scaling is not None for g in view.groups):
        return
    account = account_of(view)
    name = cluster_name(view)

    def check() -> Iterator[Problem]:
        described = lookups.deployed_cluster(account, name)
        if described is None:
            return
        _, problems = template_counts(view.groups, counts_of(described), view.path("instance_groups"))
        yield from problems

    yield from guarded(view.path("instance_groups"), check, name)
