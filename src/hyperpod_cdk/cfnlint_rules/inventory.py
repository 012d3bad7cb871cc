"""cfn-lint rules for rows of the AWS inventory (``data/aws_inventory``) that a template shows: each rule takes its
text and source URL from its row, and its level from the row's word (E for must/only/cannot/not-supported/required,
W for avoid/recommend). ``hyperpod_cdk.cfnlint_rules`` exposes them, so the documented command line loads them:

    cfn-lint --append-rules hyperpod_cdk.cfnlint_rules -- template.json

Ids E9240-E9259 / W9240-W9259 (docs/cfn-lint-rules.md). Values cfn-lint cannot know (``Ref``, ``Fn::*``) are
skipped, as in :mod:`hyperpod_cdk.cfnlint_rules`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch

from hyperpod_cdk.aws_data.inventory import row
from hyperpod_cdk.cfnlint_rules.template import CLUSTER, Cluster, Finding, rule_class
from hyperpod_cdk.cfnlint_rules.template import literal as _literal

IMAGE_ID = re.compile(r"ami-[0-9a-fA-F]{8,17}|default")
"""The API's ImageId pattern, whole (CloudFormation's ``^ami-[0-9a-fA-F]{8,17}|default$`` anchors each side only
at one end, so ``ami-12345678xyz`` passes its schema and fails the API)."""


def _orchestrator(cluster: Cluster) -> Iterator[Finding]:
    if "Orchestrator" not in cluster.properties:
        return
    value = _literal(cluster.properties["Orchestrator"])
    if not isinstance(value, dict):
        return
    kinds = sorted(k for k in ("Eks", "Slurm") if k in value)
    if len(kinds) != 1:
        yield (
            [*cluster.path, "Orchestrator"],
            f"Orchestrator has {' and '.join(kinds) or 'no configuration'}: exactly one of Eks or Slurm",
        )


def _instance_type(cluster: Cluster) -> Iterator[Finding]:
    for group, path in cluster.groups():
        given = [k for k in ("InstanceType", "InstanceRequirements") if k in group]
        if len(given) != 1:
            yield path, f"{' and '.join(given) or 'neither InstanceType nor InstanceRequirements'}: exactly one of them"


def _root_volume(cluster: Cluster) -> Iterator[Finding]:
    for group, path in cluster.groups():
        configs = _literal(group.get("InstanceStorageConfigs"))
        for index, config in enumerate(configs if isinstance(configs, list) else []):
            volume = _literal(config.get("EbsVolumeConfig")) if isinstance(config, dict) else None
            if not isinstance(volume, dict) or _literal(volume.get("RootVolume")) is not True:
                continue
            where = [*path, "InstanceStorageConfigs", index, "EbsVolumeConfig"]
            if "VolumeSizeInGB" in volume:
                yield where, "RootVolume true with VolumeSizeInGB: the root volume's size is HyperPod's"
            if not volume.get("VolumeKmsKeyId"):
                yield where, "RootVolume true without VolumeKmsKeyId: a root-volume entry exists to give the key"


def _image_id(cluster: Cluster) -> Iterator[Finding]:
    for group, path in cluster.groups():
        value = _literal(group.get("ImageId"))
        if isinstance(value, str) and not IMAGE_ID.fullmatch(value):
            yield [*path, "ImageId"], f"ImageId {value!r} is neither ami- with 8 or 17 hex digits nor default"


def _tags(cluster: Cluster) -> Iterator[Finding]:
    tags = _literal(cluster.properties.get("Tags"))
    for index, tag in enumerate(tags if isinstance(tags, list) else []):
        for field in ("Key", "Value"):
            value = _literal(tag.get(field)) if isinstance(tag, dict) else None
            if isinstance(value, str) and value.lower().startswith("aws:"):
                yield [*cluster.path, "Tags", index, field], f"tag {field.lower()} {value!r} starts with 'aws:'"


INVENTORY_CHECKS: dict[str, tuple[str, Callable[[Cluster], Iterator[Finding]]]] = {
    "E9240": ("createcluster-orchestrator-one", _orchestrator),
    "E9241": ("igs-instance-type-or-requirements", _instance_type),
    "E9242": ("ebs-root-volume-key", _root_volume),
    "E9243": ("cfn-cluster-tag-prefix", _tags),
    "E9244": ("igs-image-id-pattern", _image_id),
}
"""Each rule's id: the inventory row it judges, and the check."""
EVERY_CLUSTER = frozenset({"E9240"})
"""Rules that judge an EKS cluster too (the others leave a cluster with ``Orchestrator.Eks`` alone)."""


class _InventoryRule:
    cfn_id = ""

    def match(self, cfn: Any) -> list[RuleMatch]:
        row_id, check = INVENTORY_CHECKS[self.cfn_id]
        source = row(row_id)
        matches = []
        for name, resource in cfn.get_resources([CLUSTER]).items():
            cluster = Cluster(resource.get("Properties", {}), ["Resources", name, "Properties"])
            if not cluster.slurm and self.cfn_id not in EVERY_CLUSTER:
                continue
            for path, message in check(cluster):
                matches.append(RuleMatch(path, f'{message}. AWS: "{source.quote}" ({source.url})'))
        return matches


def _rule_class(cfn_id: str) -> type[CloudFormationLintRule]:
    source = row(INVENTORY_CHECKS[cfn_id][0])
    name = "".join(part.capitalize() for part in source.id.split("-"))
    rule: type[CloudFormationLintRule] = rule_class(
        _InventoryRule, cfn_id, name, source.id, source.quote, source.url, cfn_id=cfn_id
    )
    return rule


INVENTORY_RULES = {cfn_id: _rule_class(cfn_id) for cfn_id in INVENTORY_CHECKS}
"""The rule class of each id (hyperpod_cdk.cfnlint_rules puts them among its names, where cfn-lint finds them)."""
