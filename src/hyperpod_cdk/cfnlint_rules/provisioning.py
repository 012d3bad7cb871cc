"""cfn-lint rules from AWS's provisioning and resiliency pages (the AWS inventory, ``data/aws_inventory``), the
template side of the config rules those rows name (rules.aws_provisioning, GRP-CONTROLLER, GRP-LOGIN,
GRP-PARTITION-ROLE, MH-MODE): the same check where a template literal shows it, with the same quote and page.
:mod:`hyperpod_cdk.cfnlint_rules` loads them (``--append-rules hyperpod_cdk.cfnlint_rules`` finds them among its
names); ids E9260-E9279 / W9260-W9279.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cfnlint.rules import RuleMatch

from hyperpod_cdk.aws_data.quotes import (
    AUTO_RESUME_DOC,
    CMK_DOC,
    CONTROLLER_QUOTE,
    KEY_PER_GROUP_QUOTE,
    LOGIN_QUOTE,
    MIGRATION_DOC,
    MULTI_HEAD_QUOTE,
    PARTITION_QUOTE,
    PLANS_DOC,
    PRIMARY_QUOTE,
    RECOVERY_QUOTE,
    REF_DOC,
    STRATEGY_QUOTE,
)
from hyperpod_cdk.cfnlint_rules.template import CLUSTER, Cluster, Finding, Path, rule_class
from hyperpod_cdk.cfnlint_rules.template import literal as _literal

NOT_MERGE = ("Managed", "Overwrite")
CONNECTIVITY = "InstanceConnectivity"


def _strategy_merge(cluster: Any) -> Iterator[Finding]:
    strategy = _literal(cluster.slurm_config.get("SlurmConfigStrategy"))
    if cluster.slurm and cluster.not_continuous and strategy in NOT_MERGE:
        yield (
            [*cluster.path, "Orchestrator", "Slurm", "SlurmConfigStrategy"],
            f"SlurmConfigStrategy {strategy}: AWS's migration guide says {STRATEGY_QUOTE} (continuous provisioning "
            "supports only Merge)",
        )


def _types(group: dict[str, Any]) -> list[str]:
    """The group's literal instance types: InstanceType, or a flexible group's InstanceRequirements.InstanceTypes."""
    single = _literal(group.get("InstanceType"))
    if isinstance(single, str):
        return [single]
    requirements = _literal(group.get("InstanceRequirements"))
    listed = _literal(requirements.get("InstanceTypes")) if isinstance(requirements, dict) else None
    return [t for t in listed if isinstance(t, str)] if isinstance(listed, list) else []


def _node_types(cluster: Any) -> list[tuple[str, Path]] | None:
    """Each group's literal NodeType with its group's path, when every group has one (an API-driven Slurm cluster
    whose topology a template shows); None otherwise (a legacy cluster, or a value known only at deploy)."""
    found = []
    for group, path in cluster.groups():
        node_type = cluster.node_type(group)
        if node_type is None:
            return None
        found.append((node_type, path))
    return found or None


def _one_controller(cluster: Any) -> Iterator[Finding]:
    types = _node_types(cluster) if cluster.slurm else None
    if types is not None:
        controllers = [path for node_type, path in types if node_type == "Controller"]
        if len(controllers) != 1:
            yield (
                [*cluster.path, "InstanceGroups"],
                f"{len(controllers)} groups with NodeType Controller: AWS says {CONTROLLER_QUOTE}",
            )


def _one_login(cluster: Any) -> Iterator[Finding]:
    types = _node_types(cluster) if cluster.slurm else None
    logins = [path for node_type, path in types or [] if node_type == "Login"]
    for path in logins[1:]:
        yield [*path, "SlurmConfig", "NodeType"], f"a second group with NodeType Login: AWS says {LOGIN_QUOTE}"


def _partition_names(cluster: Any) -> Iterator[Finding]:
    if not cluster.slurm:
        return
    for group, path in cluster.groups():
        config = _literal(group.get("SlurmConfig"))
        node_type = cluster.node_type(group)
        if not isinstance(config, dict) or node_type is None:
            continue
        names = _literal(config.get("PartitionNames"))
        given = names is not None and names != []
        if given != (node_type == "Compute"):
            yield (
                [*path, "SlurmConfig"],
                f"PartitionNames {'on' if given else 'missing from'} a {node_type} group: AWS says {PARTITION_QUOTE}",
            )


def _multi_head_api(cluster: Any) -> Iterator[Finding]:
    if not cluster.slurm or cluster.continuous:  # continuous: E9103 says it
        return
    for group, path in cluster.groups():
        count = _literal(group.get("InstanceCount"))
        if cluster.node_type(group) == "Controller" and isinstance(count, int) and count > 1:
            yield (
                [*path, "InstanceCount"],
                f"{count} controllers through the API-driven SlurmConfig: AWS says {MULTI_HEAD_QUOTE} "
                "(multi-head needs provisioning_parameters.json)",
            )


def _node_recovery(cluster: Any) -> Iterator[Finding]:
    if cluster.slurm and _literal(cluster.properties.get("NodeRecovery")) == "None":
        yield [*cluster.path, "NodeRecovery"], f"NodeRecovery None: AWS says {RECOVERY_QUOTE}"


def _plan_on_controller(cluster: Any) -> Iterator[Finding]:
    if not cluster.slurm:
        return
    for group, path in cluster.groups():
        if cluster.node_type(group) == "Controller" and "TrainingPlanArn" in group:
            yield [*path, "TrainingPlanArn"], f"TrainingPlanArn on the Controller group: AWS says {PRIMARY_QUOTE}"


def _group_keys(group: dict[str, Any]) -> set[str]:
    configs = _literal(group.get("InstanceStorageConfigs"))
    keys = set()
    for config in configs if isinstance(configs, list) else []:
        volume = _literal(config.get("EbsVolumeConfig")) if isinstance(config, dict) else None
        key = _literal(volume.get("VolumeKmsKeyId")) if isinstance(volume, dict) else None
        if isinstance(key, str):
            keys.add(key)
    return keys


def _shared_volume_key(cluster: Any) -> Iterator[Finding]:
    if not cluster.slurm:
        return
    seen: set[str] = set()
    for group, path in cluster.groups():
        keys = _group_keys(group)
        if keys & seen:
            yield (
                [*path, "InstanceStorageConfigs"],
                f"VolumeKmsKeyId {', '.join(sorted(keys & seen))} also encrypts another group's volumes: AWS says "
                f"{KEY_PER_GROUP_QUOTE}",
            )
        seen |= keys


class _ProvisioningRule:
    """What each rule here shares: ``match`` runs its check over every cluster of the template."""

    check: Callable[[Any], Iterator[Finding]]
    source_url = ""

    def match(self, cfn: Any) -> list[RuleMatch]:

        matches = []
        for name, resource in cfn.get_resources([CLUSTER]).items():
            cluster = Cluster(resource.get("Properties", {}), ["Resources", name, "Properties"])
            for path, message in type(self).check(cluster):
                matches.append(RuleMatch(path, f"{message} ({self.source_url})"))
        return matches


def _rule(rule_id: str, name: str, shortdesc: str, source: str, check: Callable[..., Iterator[Finding]]) -> type:
    return rule_class(_ProvisioningRule, rule_id, name, shortdesc, shortdesc, source, check=staticmethod(check))


PROVISIONING_RULES: dict[str, type] = {
    "strategy-merge": _rule(
        "W9260",
        "StrategyMerge",
        "Orchestrator.Slurm.SlurmConfigStrategy other than Merge closes the way to continuous provisioning",
        MIGRATION_DOC,
        _strategy_merge,
    ),
    "one-controller": _rule(
        "E9262",
        "OneController",
        "exactly one instance group has SlurmConfig.NodeType Controller (config rule GRP-CONTROLLER)",
        REF_DOC,
        _one_controller,
    ),
    "one-login": _rule(
        "E9263",
        "OneLogin",
        "at most one instance group has SlurmConfig.NodeType Login (config rule GRP-LOGIN)",
        REF_DOC,
        _one_login,
    ),
    "partition-names": _rule(
        "E9264",
        "PartitionNames",
        "SlurmConfig.PartitionNames on Compute groups, and only there (config rule GRP-PARTITION-ROLE)",
        REF_DOC,
        _partition_names,
    ),
    "multi-head-api": _rule(
        "E9265",
        "MultiHeadApi",
        "a Controller group of more than one instance through SlurmConfig (config rule MH-MODE)",
        MIGRATION_DOC,
        _multi_head_api,
    ),
    "node-recovery": _rule(
        "W9266",
        "NodeRecovery",
        "NodeRecovery None, which AWS does not recommend (config rule CL-NODE-RECOVERY)",
        AUTO_RESUME_DOC,
        _node_recovery,
    ),
    "plan-on-controller": _rule(
        "W9267",
        "PlanOnController",
        "a training plan on the Controller group, which AWS does not recommend (config rule "
        "GRP-TRAINING-PLAN-CONTROLLER)",
        PLANS_DOC,
        _plan_on_controller,
    ),
    "shared-volume-key": _rule(
        "W9268",
        "SharedVolumeKey",
        "one customer managed key on several instance groups' volumes, against AWS's recommendation (config rule "
        "GRP-VOLUME-KEY-SHARED)",
        CMK_DOC,
        _shared_volume_key,
    ),
}
"""Each rule class by a short name; the config rule each mirrors is named in its description."""
