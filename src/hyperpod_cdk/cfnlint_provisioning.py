"""cfn-lint rules from AWS's provisioning and resiliency pages (the AWS inventory, ``data/aws_inventory``), the
template side of :mod:`hyperpod_cdk.rules.aws_provisioning`: the same check where a template literal shows it, with
the same quote and page. :mod:`hyperpod_cdk.cfnlint_rules` loads them (``--append-rules hyperpod_cdk.cfnlint_rules``
finds them among its names); ids E9260-E9279 / W9260-W9279.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch

from hyperpod_cdk.aws_quotes import CONNECTIVITY_QUOTE, DEEP_HEALTH_DOC, MIGRATION_DOC, STRATEGY_QUOTE
from training_runtime.hardware import INSTANCE_HARDWARE

CLUSTER = "AWS::SageMaker::Cluster"
NOT_MERGE = ("Managed", "Overwrite")
CONNECTIVITY = "InstanceConnectivity"

Path = list[str | int]
Finding = tuple[Path, str]


def _strategy_merge(cluster: Any) -> Iterator[Finding]:
    from hyperpod_cdk.cfnlint_rules import _literal

    strategy = _literal(cluster.slurm_config.get("SlurmConfigStrategy"))
    if cluster.slurm and cluster.not_continuous and strategy in NOT_MERGE:
        yield (
            [*cluster.path, "Orchestrator", "Slurm", "SlurmConfigStrategy"],
            f"SlurmConfigStrategy {strategy}: AWS's migration guide says {STRATEGY_QUOTE} (continuous provisioning "
            "supports only Merge)",
        )


def _types(group: dict[str, Any]) -> list[str]:
    """The group's literal instance types: InstanceType, or a flexible group's InstanceRequirements.InstanceTypes."""
    from hyperpod_cdk.cfnlint_rules import _literal

    single = _literal(group.get("InstanceType"))
    if isinstance(single, str):
        return [single]
    requirements = _literal(group.get("InstanceRequirements"))
    listed = _literal(requirements.get("InstanceTypes")) if isinstance(requirements, dict) else None
    return [t for t in listed if isinstance(t, str)] if isinstance(listed, list) else []


def _connectivity_gpus(cluster: Any) -> Iterator[Finding]:
    from hyperpod_cdk.cfnlint_rules import _literal

    if not cluster.slurm:
        return
    for group, path in cluster.groups():
        checks = _literal(group.get("OnStartDeepHealthChecks"))
        if not (isinstance(checks, list) and CONNECTIVITY in checks):
            continue
        plain = [t for t in _types(group) if t in INSTANCE_HARDWARE and not INSTANCE_HARDWARE[t].gpus]
        if plain:
            yield (
                [*path, "OnStartDeepHealthChecks"],
                f"{CONNECTIVITY} on {', '.join(plain)}, which has no GPU: AWS says {CONNECTIVITY_QUOTE}",
            )


class _ProvisioningRule:
    """What each rule here shares: ``match`` runs its check over every cluster of the template."""

    check: Callable[[Any], Iterator[Finding]]
    source_url = ""

    def match(self, cfn: Any) -> list[RuleMatch]:
        from hyperpod_cdk.cfnlint_rules import Cluster

        matches = []
        for name, resource in cfn.get_resources([CLUSTER]).items():
            cluster = Cluster(resource.get("Properties", {}), ["Resources", name, "Properties"])
            for path, message in type(self).check(cluster):
                matches.append(RuleMatch(path, f"{message} ({self.source_url})"))
        return matches


def _rule(rule_id: str, name: str, shortdesc: str, source: str, check: Callable[..., Iterator[Finding]]) -> type:
    return type(
        rule_id + name,
        (_ProvisioningRule, CloudFormationLintRule),
        {
            "id": rule_id,
            "shortdesc": f"HyperPod on Slurm: {shortdesc}",
            "description": shortdesc,
            "source_url": source,
            "tags": ["resources", "sagemaker", "hyperpod", "slurm"],
            "check": staticmethod(check),
        },
    )


PROVISIONING_RULES: dict[str, type] = {
    "strategy-merge": _rule(
        "W9260",
        "StrategyMerge",
        "Orchestrator.Slurm.SlurmConfigStrategy other than Merge closes the way to continuous provisioning",
        MIGRATION_DOC,
        _strategy_merge,
    ),
    "dhc-connectivity-gpu": _rule(
        "E9261",
        "DeepHealthConnectivityGpu",
        "OnStartDeepHealthChecks InstanceConnectivity only on instance types with GPUs",
        DEEP_HEALTH_DOC,
        _connectivity_gpus,
    ),
}
"""Each rule class by a short name (config rules CL-STRATEGY-MERGE and GRP-DHC-CONNECTIVITY-GPU)."""
