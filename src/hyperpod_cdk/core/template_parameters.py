"""The template parameters of a config's ``parameters`` section: what a launching team may choose.

Each choice becomes a CloudFormation parameter whose constraints come from the definitions the rules use
(the name pattern and length, S3's bucket and key rules, the config's allowed values), and whose
description is the rule's own one-line documentation. No ``aws_cdk`` import: ``TrainingCluster`` turns
these into ``CfnParameter``s, and tests read them back from the template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.model import pascal_case
from hyperpod_cdk.rules.registry import rule_doc
from hyperpod_cdk.rules.repositories import S3_PREFIX_PARAMETER, bucket_name_pattern, prefix_default
from training_runtime.groups import MAX_NAME_LENGTH, NAME_PATTERN

if TYPE_CHECKING:
    from hyperpod_cdk.core.config import ClusterConfig

STRING = "String"
NUMBER = "Number"
MAX_BUCKET_NAME_LENGTH = 63
MAX_S3_KEY_LENGTH = 1024

CLUSTER_NAME_ID = "HyperPodClusterName"
STORAGE_CAPACITY_ID = "FsxStorageCapacityGib"


def group_count_id(group: str) -> str:
    return f"InstanceGroup{pascal_case(group)}Count"


def group_type_id(group: str) -> str:
    return f"InstanceGroup{pascal_case(group)}Type"


def group_capacity_id(group: str) -> str:
    return f"InstanceGroup{pascal_case(group)}Capacity"


def bucket_name_id(repository: str) -> str:
    return f"DataRepository{pascal_case(repository)}BucketName"


def bucket_prefix_id(repository: str) -> str:
    return f"DataRepository{pascal_case(repository)}BucketPrefix"


@dataclass(frozen=True)
class TemplateParameter:
    """One CloudFormation parameter: its logical ID, type, default, constraints and console texts."""

    logical_id: str
    type: str
    default: str | int
    description: str
    label: str
    """The console's label (``AWS::CloudFormation::Interface`` ParameterLabels)."""
    group: str
    """The console's parameter group it is listed under."""
    field: str
    """The config field whose value it replaces, e.g. ``instance_groups[1].count``."""
    allowed_values: tuple[str, ...] | None = None
    """CloudFormation compares values as text, so a Number's allowed values and default are strings."""
    allowed_pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_value: int | None = None
    max_value: int | None = None
    constraint_description: str | None = None


def template_parameters(config: ClusterConfig) -> list[TemplateParameter]:
    """The parameters the config's ``parameters`` section asks for, in console order; none without it.

    Choices that name no group, repository or new file system are left out here; the rules
    (``PAR-TARGET``) report them before a template is built.
    """
    choices = config.parameters
    if choices is None:
        return []
    found: list[TemplateParameter] = []
    if choices.cluster_name:
        found.append(
            TemplateParameter(
                CLUSTER_NAME_ID,
                STRING,
                config.cluster_name,
                f"{rule_doc('CL-NAME')} Changing it later replaces the cluster.",
                label="Cluster name",
                group="Cluster",
                field="cluster_name",
                allowed_pattern=NAME_PATTERN.pattern,
                min_length=1,
                max_length=MAX_NAME_LENGTH,
                constraint_description=rule_doc("CL-NAME"),
            )
        )
    for index, group in enumerate(config.instance_groups):
        chosen = choices.instance_groups.get(group.name)
        if chosen is None:
            continue
        heading = f"Instance group {group.name}"
        if chosen.count is not None:
            low, high = chosen.count.min, chosen.count.max
            found.append(
                TemplateParameter(
                    group_count_id(group.name),
                    NUMBER,
                    group.count,
                    f"Instances in group {group.name}: {low} to {high}. {rule_doc('GRP-INSTANCE-COUNT')}",
                    label="Instance count",
                    group=heading,
                    field=f"instance_groups[{index}].count",
                    min_value=low,
                    max_value=high,
                    constraint_description=f"a whole number from {low} to {high}",
                )
            )
        if chosen.instance_types is not None and group.instance_type is not None:  # not flexible (GRP-FLEX-PARAMETER)
            found.append(
                TemplateParameter(
                    group_type_id(group.name),
                    STRING,
                    group.instance_type,
                    f"Instance type of group {group.name}: one of the types this template was validated with. "
                    f"{rule_doc('PAR-CHOICE')}",
                    label="Instance type",
                    group=heading,
                    field=f"instance_groups[{index}].instance_type",
                    allowed_values=tuple(chosen.instance_types),
                )
            )
        if chosen.capacity is not None and group.capacity is not None:
            found.append(
                TemplateParameter(
                    group_capacity_id(group.name),
                    STRING,
                    str(group.capacity),
                    f"Capacity of group {group.name}: spot (EC2 Spot, reclaimed when EC2 needs it back; jobs must "
                    f"checkpoint) or on-demand. {rule_doc('GRP-CAPACITY')}",
                    label="Capacity",
                    group=heading,
                    field=f"instance_groups[{index}].capacity",
                    allowed_values=tuple(str(c) for c in chosen.capacity),
                )
            )
    storage = config.storage
    if choices.storage_capacity_gib is not None and storage is not None and storage.existing is None:
        found.append(
            TemplateParameter(
                STORAGE_CAPACITY_ID,
                NUMBER,
                str(storage.storage_capacity_gib),
                f"FSx for Lustre capacity in GiB ({storage.deployment_type}). {rule_doc('FSX-CAPACITY')}",
                label="Storage capacity (GiB)",
                group="Storage",
                field="storage.storage_capacity_gib",
                allowed_values=tuple(str(c) for c in choices.storage_capacity_gib),
            )
        )
    repositories = storage.data_repositories if storage is not None else []
    for index, repository in enumerate(repositories):
        chosen_repository = choices.data_repositories.get(repository.name)
        if chosen_repository is None or repository.bucket_name is None:
            continue
        heading = f"Data repository {repository.name} ({repository.file_system_path})"
        listed = chosen_repository.bucket_name if isinstance(chosen_repository.bucket_name, list) else None
        start = chosen_repository.bucket_name_prefix or ""
        if listed:
            found.append(
                TemplateParameter(
                    bucket_name_id(repository.name),
                    STRING,
                    repository.bucket_name,
                    f"Existing S3 bucket linked to {repository.file_system_path}: one of the buckets the platform "
                    "team allows.",
                    label="S3 bucket",
                    group=heading,
                    field=f"storage.data_repositories[{index}].bucket_name",
                    allowed_values=tuple(listed),
                )
            )
        elif chosen_repository.bucket_name:
            found.append(
                TemplateParameter(
                    bucket_name_id(repository.name),
                    STRING,
                    repository.bucket_name,
                    f"Existing S3 bucket linked to {repository.file_system_path}"
                    + (f", its name starting with {start!r}" if start else "")
                    + f". {rule_doc('DRA-BUCKET')}",
                    label="S3 bucket",
                    group=heading,
                    field=f"storage.data_repositories[{index}].bucket_name",
                    allowed_pattern=bucket_name_pattern(start),
                    min_length=3,
                    max_length=MAX_BUCKET_NAME_LENGTH,
                    constraint_description=(
                        f"a bucket name starting with '{start}': " if start else "an S3 bucket name: "
                    )
                    + "3-63 lower-case letters, digits, dots and hyphens, starting and ending with a letter "
                    "or digit, no '..', not an IP address, no reserved prefix or suffix",
                )
            )
        if chosen_repository.bucket_prefix:
            found.append(
                TemplateParameter(
                    bucket_prefix_id(repository.name),
                    STRING,
                    prefix_default(repository.bucket_prefix),
                    f"Key prefix in the bucket linked to {repository.file_system_path}: empty for the whole bucket, "
                    "else S3-safe segments each ending in '/', e.g. datasets/2024/.",
                    label="S3 key prefix",
                    group=heading,
                    field=f"storage.data_repositories[{index}].bucket_prefix",
                    allowed_pattern=S3_PREFIX_PARAMETER.pattern,
                    max_length=MAX_S3_KEY_LENGTH,
                    constraint_description="empty, or letters, digits and ! _ . * ' ( ) - in segments each ending "
                    "in '/', without a leading '/'",
                )
            )
    return found


def interface_metadata(parameters: list[TemplateParameter]) -> dict[str, Any]:
    """``AWS::CloudFormation::Interface``: the console lists the parameters by group, with labels."""
    groups: dict[str, list[str]] = {}
    for parameter in parameters:
        groups.setdefault(parameter.group, []).append(parameter.logical_id)
    return {
        "ParameterGroups": [{"Label": {"default": label}, "Parameters": ids} for label, ids in groups.items()],
        "ParameterLabels": {p.logical_id: {"default": p.label} for p in parameters},
    }
