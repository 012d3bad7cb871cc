"""Drift: what the running cluster has that neither the deployed template nor the new config says.

The scaler, an operator's ``hyperpod-cdk scale`` or a console edit changes a group's count with HyperPod's API
(UpdateCluster, BatchAddClusterNodes, BatchDeleteClusterNodes) while CloudFormation keeps the template's
``InstanceCount``. DescribeCluster's ``TargetCount`` is "the number of instances you specified to add to the
instance group" (API reference, ClusterInstanceGroupDetails:
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterInstanceGroupDetails.html): a count that
differs from both the template's and the new config's is drift, and the next deploy moves the group to the new
one — HyperPod removes nodes it "randomly chooses" when the count goes down
(https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-scale-down.html). A group the cluster has and the
template does not (or the reverse) is drift too.

No ``aws_cdk`` import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hyperpod_cdk.aws_data.fields import plain_group_members
from hyperpod_cdk.deployed.stack import Deployed

SCALE_DOWN_URL = "https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-scale-down.html"


@dataclass(frozen=True)
class Drift:
    """One deployed value that differs from the deployed template's (``old``) and the new config's (``new``)."""

    group: str
    what: str
    """``count``, ``instance_type``, ``group`` (the group's presence), or another plain group field the cluster
    reports by its member's name (``threads_per_core``, ``training_plan_arn``: the field map's)."""
    deployed: Any
    old: Any
    new: Any
    note: str
    """What the next deploy does about it."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _count(group: Mapping[str, Any]) -> int | None:
    count = group.get("TargetCount", group.get("CurrentCount"))
    return None if count is None else int(count)


def _type(group: Mapping[str, Any]) -> Any:
    types = (group.get("InstanceRequirements") or {}).get("InstanceTypes")
    return group.get("InstanceType") or (",".join(types) if types else None)


def _plain(name: str, live: Mapping[str, Any], template: Mapping[str, Any], deployed: Deployed) -> list[Drift]:
    """The field map's plain group members (data/fields.yaml, ``render: plain``) that DescribeCluster reports under
    the same name, where the cluster's value is not the template's: the count has its own comparison above."""
    found = []
    for member, field in plain_group_members():
        if member == "InstanceCount" or member not in live:
            continue
        old, value = deployed.value(template.get(member)), live.get(member)
        if old is not None and value != old:
            note = "changed outside CloudFormation (template and cluster disagree): a deploy sends the config's"
            found.append(Drift(name, field, value, old, None, note))
    return found


def drift(deployed: Deployed, new_counts: Mapping[str, int], new_types: Mapping[str, Any]) -> list[Drift]:
    """The drift between the running cluster (DescribeCluster, ListClusterNodes), the deployed template and the
    new config (its groups' template counts, :func:`hyperpod_cdk.deployed.scaler_counts.template_counts` for scaled
    ones,
    and instance types). None without both a template and a cluster: there is nothing to tell apart."""
    if deployed.described is None or deployed.template is None:
        return []
    found: list[Drift] = []
    template = deployed.template_groups()
    for name, live in deployed.live_groups().items():
        nodes = deployed.nodes.get(name, 0)
        if name not in template:
            found.append(
                Drift(
                    name,
                    "group",
                    f"present ({nodes} nodes)",
                    "absent",
                    "present" if name in new_counts else "absent",
                    "added outside CloudFormation: the next deploy's UpdateCluster does not list it"
                    + ("" if name in new_counts else "; add it to the config or remove it (`hyperpod-cdk delete`)"),
                )
            )
            continue
        old_count = deployed.value(template[name].get("InstanceCount"))
        count, new = _count(live), new_counts.get(name)
        if count is not None and old_count is not None and count not in (old_count, new):
            if new is None:
                effect = "the group goes with the deploy"
            elif new < count:
                effect = f"HyperPod removes {count - new} nodes it chooses, busy or not ({SCALE_DOWN_URL})"
            else:
                effect = f"HyperPod adds {new - count} nodes"
            found.append(
                Drift(name, "count", count, old_count, new, f"changed outside CloudFormation; the deploy: {effect}")
            )
        old_type, live_type = deployed.value(template[name].get("InstanceType")), _type(live)
        if live_type and old_type and live_type not in (old_type, new_types.get(name)):
            found.append(
                Drift(
                    name,
                    "instance_type",
                    live_type,
                    old_type,
                    new_types.get(name),
                    "changed outside CloudFormation: the template and the cluster disagree on the group's type",
                )
            )
        found += _plain(name, live, template[name], deployed)
    for name in template:
        if name not in deployed.live_groups():
            found.append(
                Drift(
                    name,
                    "group",
                    "absent",
                    "present",
                    "present" if name in new_counts else "absent",
                    "removed outside CloudFormation: the next deploy's UpdateCluster creates it again"
                    if name in new_counts
                    else "removed outside CloudFormation; the new config has no such group either",
                )
            )
    return found
