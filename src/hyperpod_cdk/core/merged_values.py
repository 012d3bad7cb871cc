"""What a stack merges into the cluster's request beyond the cluster's own fields: the organization's name prefix,
the tags every resource gets and the organization's key on the node volumes.

One function for each, read by what renders them (:func:`hyperpod_cdk.core.deployment.deployment`'s name,
``TrainingCluster``'s tags, the organization's ``KmsEncryption`` aspect) and by the request the API-MODEL rule
checks (:mod:`hyperpod_cdk.core.api_request`), so the two agree; tests/test_api_request.py holds them against
synthesized templates. No aws_cdk import.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hyperpod_cdk.model import NodeProvisioningMode, prefixed


class Organization(Protocol):
    """What is read of ``OrganizationConfig`` (named by shape: core.config imports the rules, which read this)."""

    @property
    def name_prefix(self) -> str | None: ...
    @property
    def required_tags(self) -> Mapping[str, str | None]: ...


class Cost(Protocol):
    """What is read of ``CostConfig``."""

    @property
    def aws_budget(self) -> object | None: ...


class Alarms(Protocol):
    @property
    def enabled(self) -> bool: ...


class Observability(Protocol):
    """What is read of ``ObservabilityConfig``."""

    @property
    def enabled(self) -> bool: ...
    @property
    def alarms(self) -> Alarms: ...


COST_TAG_KEY = "hyperpod-cdk:cluster"
"""The tag whose value, the cluster's name, finds the cluster's charges (``ClusterBudget``; docs/cost.md)."""


def deployed_name(
    cluster_name: str, organization: Organization | None, is_unresolved: Callable[[Any], bool] | None = None
) -> str:
    """The cluster name HyperPod gets: ``cluster_name`` with the organization's ``name_prefix``
    (:func:`hyperpod_cdk.model.prefixed`); a name that ``is_unresolved`` is left alone (the prefix rule
    constrains the template parameter instead)."""
    prefix = organization.name_prefix if organization else None
    if not prefix or (is_unresolved is not None and is_unresolved(cluster_name)):
        return cluster_name
    return prefixed(prefix, cluster_name)


@dataclass(frozen=True)
class MergedTag:
    """One tag every resource of the stack carries, and the config field that set it."""

    value: str
    section: str
    """The config section (as :class:`~hyperpod_cdk.rules.view.ClusterView` names it): ``cluster`` for ``tags``."""
    field: str
    """The field in that section: ``tags.team``, ``required_tags.CostCenter``, ``aws_budget``."""


def has_budget(cost: Cost | None, observability: Observability | None) -> bool:
    """Whether the stack creates the AWS budget (``cost.aws_budget``), which alerts the alarm topic: that exists
    with observability and its alarms on (else rule COST-BUDGET-TOPIC refuses the budget)."""
    return (
        cost is not None
        and cost.aws_budget is not None
        and observability is not None
        and observability.enabled
        and observability.alarms.enabled
    )


def merged_tags(
    tags: Mapping[str, str], organization: Organization | None, budget_cluster_name: str | None
) -> dict[str, MergedTag]:
    """The tags every resource of the stack gets, as CDK leaves them (of two on one key the later wins): the
    organization's required tags that carry a value, then ``tags``, then, with a budget, the cost tag on the name
    HyperPod gets (``budget_cluster_name``). Sorted by key, as CDK renders them."""
    merged: dict[str, MergedTag] = {}
    for key, value in (organization.required_tags if organization is not None else {}).items():
        if value is not None:
            merged[key] = MergedTag(value, "organization", f"required_tags.{key}")
    for key, value in tags.items():
        merged[key] = MergedTag(value, "cluster", f"tags.{key}")
    if budget_cluster_name is not None:
        merged[COST_TAG_KEY] = MergedTag(budget_cluster_name, "cost", "aws_budget")
    return {key: merged[key] for key in sorted(merged, key=cdk_tag_order)}


PUNCTUATION = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"
"""ASCII punctuation and symbols in the order of ICU's root collation (before digits, then letters)."""


def cdk_tag_order(key: str) -> tuple[Any, ...]:
    """The order in which CDK renders tags: JavaScript's ``localeCompare`` (ICU's collation: punctuation, digits, then
    letters whatever their case; then accents; then lowercase before uppercase), for the characters a tag key may
    hold (letters, digits, spaces and ``_.:/=+-@``). tests/test_api_request.py holds it against CDK's own."""
    primary: list[tuple[int, Any]] = []
    accents: list[str] = []
    for char in unicodedata.normalize("NFD", key):
        if unicodedata.combining(char) and accents:
            accents[-1] += char
            continue
        if char.isspace() or char in PUNCTUATION:
            primary.append((0, PUNCTUATION.index(char) if char in PUNCTUATION else 0))
        elif char.isdigit():
            primary.append((1, char))
        elif char.isalpha():
            primary.append((2, char.casefold()))
        else:
            primary.append((0, len(PUNCTUATION) + ord(char)))
        accents.append("")
    cases = tuple(c.isupper() for c in unicodedata.normalize("NFD", key) if not unicodedata.combining(c))
    return tuple(primary), tuple(accents), cases, key


def organization_volume_key(key: Any, node_provisioning_mode: Any) -> Any:
    """The organization's ``key`` on the node volumes, or None: HyperPod takes a customer managed key there only in
    a cluster with continuous node provisioning (rules.volumes.CMK_DOC); another keeps AWS's key, with a warning.
    ``node_provisioning_mode`` as the config or as the template spells it."""
    continuous = node_provisioning_mode in (NodeProvisioningMode.CONTINUOUS, NodeProvisioningMode.CONTINUOUS.cfn)
    return key if continuous else None


@dataclass(frozen=True)
class VolumeKeying:
    """What the organization's key does to one group's ``InstanceStorageConfigs``."""

    keyed: tuple[int, ...]
    """The EBS volume configs without a key of their own, which take the organization's."""
    other_keys: tuple[Any, ...]
    """Keys of the group's own that are not the organization's (an error: the organization's key is enforced)."""
    append_root: bool
    """Whether a root-volume config with the key is appended (the group has none)."""


def volume_keying(volumes: Sequence[tuple[bool, bool, Any]], key: Any) -> VolumeKeying:
    """The organization's ``key`` on a group's storage configs, each given as (is an EBS volume config, is the root
    volume, its own key or None)."""
    keyed = tuple(i for i, (ebs, _, own) in enumerate(volumes) if ebs and own is None)
    others = tuple(own for ebs, _, own in volumes if ebs and own is not None and own != key)
    has_root = any(ebs and root for ebs, root, _ in volumes)
    return VolumeKeying(keyed, others, not has_root)


def with_volume_key(configs: Sequence[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    """A group's ``InstanceStorageConfigs`` (API-shaped) as the organization's key leaves them
    (:func:`volume_keying`)."""
    described = [
        (
            "EbsVolumeConfig" in c,
            bool(c.get("EbsVolumeConfig", {}).get("RootVolume")),
            c.get("EbsVolumeConfig", {}).get("VolumeKmsKeyId"),
        )
        for c in configs
    ]
    keying = volume_keying(described, key)
    out = [dict(c) for c in configs]
    for index in keying.keyed:
        out[index] = {"EbsVolumeConfig": {**out[index]["EbsVolumeConfig"], "VolumeKmsKeyId": key}}
    if keying.append_root:
        out.append({"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": key}})
    return out
