"""What every hyperpod-cdk cfn-lint rule reads from a template: an ``AWS::SageMaker::Cluster``'s properties, its
literal values (an intrinsic function's value is unknown before deployment) and both branches of an ``Fn::If``.
One definition for the rule modules (the package's ``__init__``, ``inventory``, ``provisioning``, ``infra``,
``api_model``), and the one way they make a rule class (:func:`rule_class`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

CLUSTER = "AWS::SageMaker::Cluster"
TAGS = ["resources", "sagemaker", "hyperpod", "slurm"]
"""The cfn-lint tags of every hyperpod-cdk rule."""
CONTINUOUS = "Continuous"

Path = list[str | int]
Finding = tuple[Path, str]


def alternatives(value: Any, path: Path) -> Iterator[tuple[Any, Path]]:
    """The literal values ``value`` may take, with their paths: both branches of an ``Fn::If``; nothing for another
    intrinsic function (its value is not known before deployment)."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if key == "Fn::If" and isinstance(inner, list) and len(inner) == 3:
            for branch in (1, 2):
                yield from alternatives(inner[branch], [*path, "Fn::If", branch])
            return
        if key.startswith("Fn::") or key == "Ref":
            return
    yield value, path


def literal(value: Any) -> Any:
    """``value`` when cfn-lint can know it (no intrinsic function), else None."""
    if (
        isinstance(value, dict)
        and len(value) == 1
        and (next(iter(value)) == "Ref" or next(iter(value)).startswith("Fn::"))
    ):
        return None
    return value


class Cluster:
    """One ``AWS::SageMaker::Cluster``'s properties as the rules read them."""

    def __init__(self, properties: dict[str, Any], path: Path) -> None:
        self.properties = properties if isinstance(properties, dict) else {}
        self.path = path

    @property
    def slurm(self) -> bool:
        orchestrator = literal(self.properties.get("Orchestrator"))
        return not (isinstance(orchestrator, dict) and "Eks" in orchestrator)  # no Orchestrator: a legacy Slurm cluster

    @property
    def continuous(self) -> bool:
        return bool(literal(self.properties.get("NodeProvisioningMode")) == CONTINUOUS)

    @property
    def not_continuous(self) -> bool:
        """Known not to be Continuous: no NodeProvisioningMode, or a literal other value (a token is unknown)."""
        if "NodeProvisioningMode" not in self.properties:
            return True
        value = literal(self.properties["NodeProvisioningMode"])
        return value is not None and value != CONTINUOUS

    @property
    def slurm_config(self) -> dict[str, Any]:
        orchestrator = literal(self.properties.get("Orchestrator"))
        slurm = orchestrator.get("Slurm") if isinstance(orchestrator, dict) else None
        return slurm if isinstance(slurm, dict) else {}

    def groups(self) -> Iterator[tuple[dict[str, Any], Path]]:
        groups = literal(self.properties.get("InstanceGroups"))
        for index, group in enumerate(groups if isinstance(groups, list) else []):
            for value, path in alternatives(group, [*self.path, "InstanceGroups", index]):
                if isinstance(value, dict):
                    yield value, path

    def node_type(self, group: dict[str, Any]) -> str | None:
        config = literal(group.get("SlurmConfig"))
        node_type = literal(config.get("NodeType")) if isinstance(config, dict) else None
        return node_type if isinstance(node_type, str) else None


def rule_class(
    base: type, rule_id: str, name: str, shortdesc: str, description: str, source_url: str, **attrs: Any
) -> type:
    """A cfn-lint rule class ``<rule_id><name>`` on ``base`` (which holds ``match``), with the id, texts and source
    cfn-lint shows, hyperpod-cdk's tags, and ``attrs`` (what ``base`` reads: a row id, a check)."""
    from cfnlint.rules import CloudFormationLintRule

    return type(
        rule_id + name,
        (base, CloudFormationLintRule),
        {
            "id": rule_id,
            "shortdesc": f"HyperPod on Slurm: {shortdesc}",
            "description": description,
            "source_url": source_url,
            "tags": TAGS,
            **attrs,
        },
    )
