"""cfn-lint rules for ``AWS::SageMaker::Cluster`` on Slurm: the HyperPod API's constraints that the resource schema
cannot express, one rule per row of the support table (``data/api_support.yaml``), whose id, level, text and source
URL they take. They judge any template, ours or not:

    cfn-lint --append-rules hyperpod_cdk.cfnlint_rules -- template.json

(cfn-lint and hyperpod-cdk installed in the same Python environment; docs/cfn-lint-rules.md). A value cfn-lint cannot
know (``Ref``, ``Fn::GetAtt``…) is skipped; ``Fn::If`` is judged on both branches. A cluster with ``Orchestrator.Eks``
is not a Slurm cluster and is left alone. To skip a rule on one cluster, as a config's ``suppress:`` does, the
resource's ``Metadata: {cfn-lint: {config: {ignore_checks: [W9109]}}}``. A rule's letter (E, W, I) is its row's
level (``training_runtime.problems.LEVEL_LETTERS``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch

from hyperpod_cdk.aws_data.api_support import CONFIDENCE_TEXT, support_row
from hyperpod_cdk.cfnlint_rules.provisioning import PROVISIONING_RULES
from hyperpod_cdk.cfnlint_rules.template import CLUSTER, Cluster, Finding, rule_class
from hyperpod_cdk.cfnlint_rules.template import literal as _literal
from training_runtime.hyperpod_facts import ACCOUNTING_DATABASE
from training_runtime.instance_facts import NVIDIA_GPU, InstanceFacts, facts_for


def _continuous_strategy(cluster: Cluster) -> Iterator[Finding]:
    if cluster.continuous and "SlurmConfigStrategy" in cluster.slurm_config:
        yield (
            [*cluster.path, "Orchestrator", "Slurm", "SlurmConfigStrategy"],
            (
                "SlurmConfigStrategy with NodeProvisioningMode Continuous: the API rejects any strategy there; write "
                "Orchestrator: {Slurm: {}} (or only its AccountingDatabase)"
            ),
        )


def _continuous_api_driven(cluster: Cluster) -> Iterator[Finding]:
    if cluster.continuous:
        for group, path in cluster.groups():
            if "SlurmConfig" not in group:
                yield (
                    path,
                    (
                        "instance group without SlurmConfig in a Continuous cluster: continuous provisioning needs the "
                        "API-driven Slurm configuration (provisioning_parameters.json clusters are not compatible)"
                    ),
                )


def _continuous_multi_head(cluster: Cluster) -> Iterator[Finding]:
    if cluster.continuous:
        for group, path in cluster.groups():
            count = _literal(group.get("InstanceCount"))
            if cluster.node_type(group) == "Controller" and isinstance(count, int) and count > 1:
                yield (
                    [*path, "InstanceCount"],
                    (
                        f"{count} controllers in a Continuous cluster: multi-head is not supported with continuous "
                        "provisioning"
                    ),
                )


def _accounting(cluster: Cluster) -> dict[str, Any] | None:
    database = _literal(cluster.slurm_config.get("AccountingDatabase"))
    return database if isinstance(database, dict) else None


def _accounting_continuous(cluster: Cluster) -> Iterator[Finding]:
    if _accounting(cluster) is not None and cluster.not_continuous:
        yield (
            [*cluster.path, "Orchestrator", "Slurm", "AccountingDatabase"],
            ("AccountingDatabase needs NodeProvisioningMode Continuous"),
        )


def _accounting_ami(cluster: Cluster) -> Iterator[Finding]:
    if _accounting(cluster) is None:
        return
    for group, path in cluster.groups():
        image = _literal(group.get("ImageId"))
        if isinstance(image, str) and image.startswith("ami-"):
            yield (
                [*path, "ImageId"],
                (
                    f"custom AMI {image} in a cluster with an external AccountingDatabase, which needs AMIs released "
                    "after 2026-08-30"
                ),
            )


def _accounting_permanent(cluster: Cluster) -> Iterator[Finding]:
    if _accounting(cluster) is not None:
        yield (
            [*cluster.path, "Orchestrator", "Slurm", "AccountingDatabase"],
            (
                "an external AccountingDatabase cannot be removed from the cluster later (no revert to the internal "
                "MariaDB database)"
            ),
        )


def _accounting_name(cluster: Cluster) -> Iterator[Finding]:
    database = _accounting(cluster)
    if database is not None and "Name" not in database:
        yield (
            [*cluster.path, "Orchestrator", "Slurm", "AccountingDatabase"],
            (
                f"AccountingDatabase without Name: CloudFormation documents {ACCOUNTING_DATABASE} as the default and "
                f"the API {ACCOUNTING_DATABASE}_<cluster id>; give Name explicitly"
            ),
        )


def _group_check(test: Callable[[Cluster, dict[str, Any]], str | None], key: str) -> Callable[..., Iterator[Finding]]:
    """A rule that judges each instance group of a Slurm cluster: ``test`` returns the message, or None."""

    def check(cluster: Cluster) -> Iterator[Finding]:
        if not cluster.slurm:
            return
        for group, path in cluster.groups():
            message = test(cluster, group)
            if message:
                yield [*path, key], message

    return check


def _spot(group: dict[str, Any]) -> bool:
    capacity = _literal(group.get("CapacityRequirements"))
    return isinstance(capacity, dict) and "Spot" in capacity


def _auto_patch(cluster: Cluster, group: dict[str, Any]) -> str | None:
    if "AutoPatchConfig" not in group:
        return None
    return "AutoPatchConfig on a Slurm cluster: AWS documents auto-patching for EKS clusters only"


def _update_batches(cluster: Cluster, group: dict[str, Any]) -> str | None:
    scheduled = _literal(group.get("ScheduledUpdateConfig"))
    if not (isinstance(scheduled, dict) and "DeploymentConfig" in scheduled):
        return None
    return (
        "ScheduledUpdateConfig.DeploymentConfig on a Slurm cluster: AWS documents updates in batches for EKS "
        "clusters only; a Slurm group's update re-images all of its nodes"
    )


def _min_count(cluster: Cluster, group: dict[str, Any]) -> str | None:
    low, count = _literal(group.get("MinInstanceCount")), _literal(group.get("InstanceCount"))
    if isinstance(low, int) and isinstance(count, int) and low > count:
        return f"MinInstanceCount {low} is above InstanceCount {count}"
    return None


def _duplicate_types(cluster: Cluster, group: dict[str, Any]) -> str | None:
    requirements = _literal(group.get("InstanceRequirements"))
    listed = _literal(requirements.get("InstanceTypes")) if isinstance(requirements, dict) else None
    types = [t for t in listed if isinstance(t, str)] if isinstance(listed, list) else []
    repeated = sorted({t for t in types if types.count(t) > 1})
    if not repeated:
        return None
    return f"InstanceRequirements.InstanceTypes lists {', '.join(repeated)} more than once"


def _volume_key(cluster: Cluster, group: dict[str, Any]) -> str | None:
    configs = _literal(group.get("InstanceStorageConfigs"))
    for config in configs if isinstance(configs, list) else []:
        volume = _literal(config.get("EbsVolumeConfig")) if isinstance(config, dict) else None
        if isinstance(volume, dict) and "VolumeKmsKeyId" in volume and cluster.not_continuous:
            return "VolumeKmsKeyId without NodeProvisioningMode Continuous: HyperPod takes customer keys only there"
    return None


def _facts(group: dict[str, Any]) -> list[InstanceFacts]:
    """The EC2 facts of the group's literal instance types (InstanceType, or a flexible group's list); a type whose
    facts are unknown, or a token, is not judged."""
    requirements = _literal(group.get("InstanceRequirements"))
    listed = _literal(requirements.get("InstanceTypes")) if isinstance(requirements, dict) else None
    types = listed if isinstance(listed, list) else [_literal(group.get("InstanceType"))]
    found = [facts_for(t) for t in types if isinstance(t, str)]
    return [f for f in found if f is not None and f.known]


def _threads_per_core(cluster: Cluster, group: dict[str, Any]) -> str | None:
    threads = _literal(group.get("ThreadsPerCore"))
    single = [f for f in _facts(group) if isinstance(threads, int) and f.supports_threads_per_core(threads) is False]
    if threads != 2 or not single:
        return None
    return (
        f"ThreadsPerCore 2 on {', '.join(f.instance_type for f in single)}: EC2 describes one thread per core "
        f"({'; '.join(dict.fromkeys(f.cited for f in single))}); specify 1"
    )


def _connectivity(cluster: Cluster, group: dict[str, Any]) -> str | None:
    checks = _literal(group.get("OnStartDeepHealthChecks"))
    if not isinstance(checks, list) or "InstanceConnectivity" not in checks:
        return None
    plain = [f for f in _facts(group) if f.accelerator_kind != NVIDIA_GPU]
    if not plain:
        return None
    return (
        f"InstanceConnectivity on {', '.join(f.instance_type for f in plain)}, which EC2 describes without GPUs "
        f"({'; '.join(dict.fromkeys(f.cited for f in plain))}): it runs NCCL tests across nodes, and AWS supports it "
        "only on instances with multi-node GPU communication capabilities"
    )


def _fsx_vpc(cluster: Cluster) -> Iterator[Finding]:
    if "VpcConfig" in cluster.properties:
        return
    for group, path in cluster.groups():
        configs = _literal(group.get("InstanceStorageConfigs"))
        for index, config in enumerate(configs if isinstance(configs, list) else []):
            if isinstance(config, dict) and {"FsxLustreConfig", "FsxOpenZfsConfig"} & set(config):
                yield (
                    [*path, "InstanceStorageConfigs", index],
                    ("an FSx file system mounted through InstanceStorageConfigs needs the cluster's own VpcConfig"),
                )


CHECKS: dict[str, Callable[[Cluster], Iterator[Finding]]] = {
    "continuous-no-strategy": _continuous_strategy,
    "continuous-api-driven": _continuous_api_driven,
    "continuous-multi-head": _continuous_multi_head,
    "accounting-continuous": _accounting_continuous,
    "accounting-ami": _accounting_ami,
    "accounting-permanent": _accounting_permanent,
    "accounting-name": _accounting_name,
    "flexible-slurm": _group_check(
        lambda c, g: (
            "InstanceRequirements (a flexible instance group) on a Slurm cluster"
            if "InstanceRequirements" in g
            else None
        ),
        "InstanceRequirements",
    ),
    "flexible-continuous": _group_check(
        lambda c, g: (
            "InstanceRequirements (a flexible instance group) without NodeProvisioningMode Continuous"
            if "InstanceRequirements" in g and c.not_continuous
            else None
        ),
        "InstanceRequirements",
    ),
    "flexible-duplicates": _group_check(_duplicate_types, "InstanceRequirements"),
    "spot-slurm": _group_check(
        lambda c, g: "Spot capacity on a Slurm cluster" if _spot(g) else None, "CapacityRequirements"
    ),
    "spot-continuous": _group_check(
        lambda c, g: (
            "Spot capacity without NodeProvisioningMode Continuous: an unfilled group fails the whole operation"
            if _spot(g) and c.not_continuous
            else None
        ),
        "CapacityRequirements",
    ),
    "image-release-version": _group_check(
        lambda c, g: (
            "ImageReleaseVersion is supported only on EKS-orchestrated clusters" if "ImageReleaseVersion" in g else None
        ),
        "ImageReleaseVersion",
    ),
    "auto-patch": _group_check(_auto_patch, "AutoPatchConfig"),
    "scheduled-update-batches": _group_check(_update_batches, "ScheduledUpdateConfig"),
    "min-count": _group_check(_min_count, "MinInstanceCount"),
    "min-count-continuous": _group_check(
        lambda c, g: (
            "MinInstanceCount without NodeProvisioningMode Continuous: MinCount is only available there"
            if "MinInstanceCount" in g and c.not_continuous
            else None
        ),
        "MinInstanceCount",
    ),
    "deep-health-continuous": _group_check(
        lambda c, g: (
            "OnStartDeepHealthChecks on a Slurm cluster without NodeProvisioningMode Continuous"
            if g.get("OnStartDeepHealthChecks") and c.not_continuous
            else None
        ),
        "OnStartDeepHealthChecks",
    ),
    "deep-health-workers": _group_check(
        lambda c, g: (
            f"OnStartDeepHealthChecks on a {c.node_type(g)} group: on Slurm they test worker nodes"
            if g.get("OnStartDeepHealthChecks") and c.node_type(g) in ("Controller", "Login")
            else None
        ),
        "OnStartDeepHealthChecks",
    ),
    "volume-key-continuous": _group_check(_volume_key, "InstanceStorageConfigs"),
    "threads-per-core": _group_check(_threads_per_core, "ThreadsPerCore"),
    "deep-health-connectivity": _group_check(_connectivity, "OnStartDeepHealthChecks"),
    "fsx-custom-vpc": _fsx_vpc,
}
"""The check of each support-table row that has a cfn-lint rule of ours."""


class _SupportRule:
    """What each generated rule shares: its row, and ``match`` over every cluster of the template."""

    row_id = ""

    def match(self, cfn: Any) -> list[RuleMatch]:
        row = support_row(self.row_id)
        note = f" ({row.source}; {CONFIDENCE_TEXT[row.confidence]}, checked {row.checked})"
        if row.unconfirmed:
            note += f". Slurm support is unconfirmed: check {row.check}"
        matches = []
        for name, resource in cfn.get_resources([CLUSTER]).items():
            cluster = Cluster(resource.get("Properties", {}), ["Resources", name, "Properties"])
            for path, message in CHECKS[self.row_id](cluster):
                matches.append(RuleMatch(path, message + note))
        return matches


def _rule_class(row_id: str) -> type[CloudFormationLintRule]:
    row = support_row(row_id)
    name = "".join(part.capitalize() for part in row_id.split("-"))
    rule: type[CloudFormationLintRule] = rule_class(
        _SupportRule, row.cfn_lint, name, row.setting, row.constraint, row.source, row_id=row_id
    )
    return rule


RULES = {row_id: _rule_class(row_id) for row_id in CHECKS}
"""The rule class of each row; cfn-lint finds them among this module's names."""
RULES.update(PROVISIONING_RULES)  # the AWS inventory's rules (cfnlint_provisioning), loaded with these
globals().update({cls.__name__: cls for cls in RULES.values()})

# The SageMaker API model's constraints (E9200), in their own module; named here so that cfn-lint finds the rule.
from hyperpod_cdk.cfnlint_rules.api_model import E9200ApiModel as E9200ApiModel  # noqa: E402
from hyperpod_cdk.cfnlint_rules.inventory import INVENTORY_RULES as INVENTORY_RULES  # noqa: E402  (the AWS inventory's rules, E9240-E9259)

globals().update({cls.__name__: cls for cls in INVENTORY_RULES.values()})

# The inventory's network rules (E9280-E9299), loaded by the same --append-rules module.
from hyperpod_cdk.cfnlint_rules.infra import E9280EfaSecurityGroupSelf as E9280EfaSecurityGroupSelf  # noqa: E402
