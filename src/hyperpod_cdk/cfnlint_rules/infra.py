"""cfn-lint rules from AWS's pages on a HyperPod cluster's network (the inventory, ``data/aws_inventory``), ids
E9280-E9299 / W9280-W9299. ``hyperpod_cdk.cfnlint_rules`` imports them, so ``cfn-lint --append-rules
hyperpod_cdk.cfnlint_rules`` loads them with the support table's rules.

E9280: a security group of the template that an ``AWS::SageMaker::Cluster`` with EFA instance types names (``VpcConfig``
or a group's ``OverrideVpcConfig``, by ``Ref`` or ``Fn::GetAtt [.., GroupId]``) allows all traffic from and to itself:
inline rules or ``AWS::EC2::SecurityGroupIngress``/``Egress`` resources. An outbound ``0.0.0.0/0`` rule is not one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch

from hyperpod_cdk.cfnlint_rules.template import CLUSTER
from training_runtime.hardware import hardware_for

SECURITY_GROUP = "AWS::EC2::SecurityGroup"
PREREQUISITES_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html"
EFA_SELF_QUOTE = (
    "For HyperPod clusters using Elastic Fabric Adapter (EFA)-enabled instances, configure the security group to "
    "allow all inbound and outbound traffic to and from the security group itself."
)


def _group_named(value: Any) -> str | None:
    """The logical id ``value`` points at: ``{"Ref": X}`` or ``{"Fn::GetAtt": [X, "GroupId"]}`` (or "X.GroupId")."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((key, inner),) = value.items()
    if key == "Ref" and isinstance(inner, str):
        return inner
    if key == "Fn::GetAtt":
        parts = inner.split(".", 1) if isinstance(inner, str) else inner
        if isinstance(parts, list) and len(parts) == 2 and parts[1] == "GroupId" and isinstance(parts[0], str):
            return parts[0]
    return None


def _all_traffic(rule: dict[str, Any]) -> bool:
    return str(rule.get("IpProtocol")) == "-1"


def _efa_types(properties: dict[str, Any]) -> list[str]:
    """The cluster's literal instance types that have EFA interfaces (the instance catalogue's figures)."""
    found = []
    groups = properties.get("InstanceGroups")
    for group in groups if isinstance(groups, list) else []:
        kind = group.get("InstanceType") if isinstance(group, dict) else None
        if not isinstance(kind, str):
            continue
        try:
            hardware = hardware_for(kind, {}, 1)
        except ValueError:
            continue
        if hardware is not None and hardware.efa_interfaces > 0:
            found.append(kind)
    return found


def _named_groups(properties: dict[str, Any]) -> list[str]:
    """Logical ids of the security groups the cluster's VpcConfig and its groups' OverrideVpcConfig name."""
    configs = [properties.get("VpcConfig")]
    groups = properties.get("InstanceGroups")
    configs += [g.get("OverrideVpcConfig") for g in (groups if isinstance(groups, list) else []) if isinstance(g, dict)]
    named: list[str] = []
    for config in configs:
        ids = config.get("SecurityGroupIds") if isinstance(config, dict) else None
        for value in ids if isinstance(ids, list) else []:
            name = _group_named(value)
            if name is not None and name not in named:
                named.append(name)
    return named


def self_rules(resources: dict[str, Any], name: str) -> tuple[bool, bool]:
    """Whether security group ``name`` has an all-traffic rule from itself (inbound) and to itself (outbound)."""
    properties = resources[name].get("Properties") or {}
    inbound = [r for r in properties.get("SecurityGroupIngress") or [] if isinstance(r, dict)]
    outbound = [r for r in properties.get("SecurityGroupEgress") or [] if isinstance(r, dict)]
    for resource in resources.values():
        if not isinstance(resource, dict):
            continue
        rule = resource.get("Properties") or {}
        if resource.get("Type") == "AWS::EC2::SecurityGroupIngress" and _group_named(rule.get("GroupId")) == name:
            inbound.append(rule)
        if resource.get("Type") == "AWS::EC2::SecurityGroupEgress" and _group_named(rule.get("GroupId")) == name:
            outbound.append(rule)
    has_in = any(_all_traffic(r) and _group_named(r.get("SourceSecurityGroupId")) == name for r in inbound)
    has_out = any(_all_traffic(r) and _group_named(r.get("DestinationSecurityGroupId")) == name for r in outbound)
    return has_in, has_out


def efa_self_findings(template: dict[str, Any]) -> Iterator[tuple[list[str | int], str]]:
    """(path, message) for each security group an EFA cluster names that lacks a rule with itself."""
    resources = template.get("Resources") or {}
    for cluster_name, cluster in resources.items():
        if not isinstance(cluster, dict) or cluster.get("Type") != CLUSTER:
            continue
        properties = cluster.get("Properties") or {}
        efa = _efa_types(properties)
        if not efa:
            continue
        for name in _named_groups(properties):
            if not isinstance(resources.get(name), dict) or resources[name].get("Type") != SECURITY_GROUP:
                continue
            has_in, has_out = self_rules(resources, name)
            missing = [d for d, ok in (("inbound", has_in), ("outbound", has_out)) if not ok]
            if missing:
                yield (
                    ["Resources", name],
                    f"security group {name} of cluster {cluster_name} (EFA types: {', '.join(sorted(set(efa)))}) has "
                    f"no {' or '.join(missing)} rule for all traffic with itself (an outbound 0.0.0.0/0 rule is not "
                    f'one); AWS: "{EFA_SELF_QUOTE}" ({PREREQUISITES_DOC})',
                )


class E9280EfaSecurityGroupSelf(CloudFormationLintRule):  # type: ignore[misc]
    """An EFA cluster's security group allows all traffic to and from itself."""

    id = "E9280"
    shortdesc = "HyperPod on Slurm: an EFA cluster's security group allows all traffic with itself"
    description = EFA_SELF_QUOTE
    source_url = PREREQUISITES_DOC
    tags = ["resources", "sagemaker", "hyperpod", "slurm", "ec2"]

    def match(self, cfn: Any) -> list[RuleMatch]:
        return [RuleMatch(path, message) for path, message in efa_self_findings(cfn.template)]


RULES = (E9280EfaSecurityGroupSelf,)
"""The rules this module ships (cfnlint_rules re-exports them)."""
