"""API-MODEL: the requests a config produces, against the SageMaker API model's constraints.

The requests are :func:`hyperpod_cdk.core.api_request.cluster_request` of the view (CreateCluster, as the stack sends
it: the organization's name prefix, the merged tags and the organization's volume key in) and, with the deployed
config (``validate --previous``), :func:`~hyperpod_cdk.core.api_request.update_request` (the UpdateCluster the change
produces); the constraints are the generated table of :mod:`hyperpod_cdk.aws_data.api_constraints` (botocore's
``service-2.json``, with the CloudFormation schema's where that is stricter). Every violation is reported at once,
at the config field the member comes from. A construct runs it on its props too (synth), with CDK tokens skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_constraints import Violation, check_request, table
from hyperpod_cdk.core.api_request import (
    cluster_request,
    config_field,
    is_unknown,
    sent_cluster_name,
    sent_tags,
    sent_volume_key,
    update_request,
)
from hyperpod_cdk.model import prefixed
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

API_MODEL_SOURCE = (
    "botocore's SageMaker service model (service-2.json: CreateCluster's and UpdateCluster's request shapes), from "
    "which https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html and "
    "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_UpdateCluster.html are generated; the "
    "CloudFormation schema of AWS::SageMaker::Cluster where it is stricter"
)


@REGISTRY.rule("API-MODEL", "cluster", "instance_groups[*]", needs=("instance_groups",), source=API_MODEL_SOURCE)
def api_model(view: ClusterView) -> Iterator[Problem]:
    """The CreateCluster request the stack sends and the UpdateCluster request a change produces meet the API model.

    CreateCluster as sent: the organization's name prefix, the merged tags and the organization's volume key in;
    UpdateCluster with a deployed config (``validate --previous``). Every constraint of the SageMaker API model
    (required members, enums, ranges, lengths, patterns) and of the CloudFormation schema where stricter."""

    def unknown(value: object) -> bool:
        # Only a scalar can be a CDK token; a structure may hold UNKNOWN, which the CDK could not take.
        return is_unknown(value) or (isinstance(value, str | int | float) and view.is_unresolved(value))

    found = check_request(cluster_request(view), "CreateCluster", unknown=unknown)
    for violation in found:
        yield _problem(view, violation, f"the API rejects {violation.path}")
    update = update_request(view)
    if update is None:
        return
    seen = {(v.path, v.constraint) for v in found}  # a member both requests carry is reported once
    for violation in check_request(update, "UpdateCluster", unknown=unknown):
        if (violation.path, violation.constraint) not in seen:
            where = f"the API rejects UpdateCluster's {violation.path} (the update from the deployed config)"
            yield _problem(view, violation, where)


def _problem(view: ClusterView, violation: Violation, what: str) -> Problem:
    return Problem(
        merged_field(view, violation.path) or config_field(view, violation.path),
        f"{what}: allowed: {violation.allowed} ({violation.source})",
        got=violation.value,
        fix=f"give a value the SageMaker API accepts (botocore {table()['botocore']} is the model checked)",
    )


# Members whose value the stack merges in beyond the cluster's own fields (the organization's, the cost tag) or that
# only a change produces: their config field, ahead of core.api_request.config_field (the field map replaces both).


def merged_field(view: ClusterView, member_path: str) -> str | None:
    """The config field a merged or update-only member comes from, or None: the member's own field applies."""
    if member_path == "ClusterName":
        return _name_field(view)
    if member_path == "Tags" or member_path.startswith("Tags["):
        return _tag_field(view, member_path)
    if member_path.startswith("InstanceGroupsToDelete"):
        return view.path("instance_groups")  # the groups the config no longer has
    if member_path.endswith(".VolumeKmsKeyId") and sent_volume_key(view) is not None:
        index = int(member_path.removeprefix("InstanceGroups[").split("]", 1)[0])
        if index < len(view.groups) and view.groups[index].volume_kms_key_arn is None:
            return view.path("organization", "kms_key_arn")
    return None


def _name_field(view: ClusterView) -> str | None:
    """The prefix, when its own form breaks the name (ORG-NAME-PREFIX says why); else the name's own field, as
    ORG-PREFIXED-NAME reports a name the prefix makes too long (the name is what the cluster's owner shortens)."""
    organization = view.organization
    prefix = organization.name_prefix if organization is not None else None
    if prefix is None or sent_cluster_name(view) == view.cluster_name:
        return None
    shortest = {"ClusterName": prefixed(prefix, "a")}  # the prefix and a one-letter name
    broken = any(v.path == "ClusterName" for v in check_request(shortest, "CreateCluster"))
    return view.path("organization", "name_prefix") if broken else None


TAG_SOURCES = (("cluster", "tags"), ("organization", "required_tags"), ("cost", "aws_budget"))
"""Where the stack's tags come from, in the order CDK merges them (core.merged_values.merged_tags)."""


def _tag_field(view: ClusterView, member_path: str) -> str:
    """One tag: the field that set its value. The list: the first source whose tags, with those before it, break
    the list's constraint (the file's own tags, then the organization's, then the cost tag)."""
    tags = sent_tags(view)
    if member_path == "Tags":
        for stage in range(1, len(TAG_SOURCES) + 1):
            sections = {section for section, _ in TAG_SOURCES[:stage]}
            upto = [{"Key": k, "Value": t.value} for k, t in tags.items() if t.section in sections]
            if any(v.path == "Tags" for v in check_request({"ClusterName": "c", "Tags": upto}, "CreateCluster")):
                return view.path(*TAG_SOURCES[stage - 1])
        return view.path("cluster", "tags")
    index = int(member_path.removeprefix("Tags[").split("]", 1)[0])
    keys = list(tags)
    if index >= len(keys):
        return view.path("cluster", "tags")
    tag = tags[keys[index]]
    return view.path(tag.section, tag.field)


DISAGREEMENT_HEADER = """
## The SageMaker API model and the CloudFormation schema

`API-MODEL` (and cfn-lint rule `E9200`) hold the cluster's request against the constraints of botocore {botocore}'s
SageMaker model (`service-2.json`) on every member hyperpod-cdk emits, from the generated table
`src/hyperpod_cdk/data/api_constraints.json` (`scripts/gen_api_constraints.py`). `API-MODEL` checks the CreateCluster
request as the stack sends it, with what it merges in (the organization's name prefix, its required tags merged with
`tags` and the budget's cost tag, its key on each node volume of a continuous cluster), and with `validate
--previous` the UpdateCluster request the change produces (every group's new specification, the removed groups'
names in `InstanceGroupsToDelete`; a change of the cluster's name makes a new cluster, so no UpdateCluster). Each
refusal names the config field that set the value (`organization.required_tags.<key>`, `organization.kms_key_arn`,
`tags.<key>`, `cost.aws_budget`, `instance_groups` for the removed groups; a name the prefix makes too long at
`cluster_name`, a prefix that breaks the name's form at `organization.name_prefix`).

Where CloudFormation's schema of `AWS::SageMaker::Cluster` ({cfn_schema}) says otherwise, the stricter one applies (a
template passes through both); two different patterns both apply. The emulated control plane applies the API
model's alone, as the API does. Patterns are matched against the whole value, and `\\p{{L}}`/`\\p{{N}}` are read as
Python's `\\w`, `\\p{{Z}}` as `\\s`: neither source says more.

| member | facet | API model | CloudFormation schema | applied |
|---|---|---|---|---|
"""


def _cell(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return "<br>".join(f"`{v}`" for v in value)
    return f"`{value}`"


def disagreement_reference() -> str:
    """docs/rules.md's table of where the API model and the CloudFormation schema disagree."""
    meta = table()
    rows = [
        "| `{}` | {} | {} | {} | {} |".format(
            row["path"], row["facet"], *(_cell(row[k]).replace("|", "\\|") for k in ("api", "cfn", "applied"))
        )
        for row in meta["disagreements"]
    ]
    header = DISAGREEMENT_HEADER.format(botocore=meta["botocore"], cfn_schema=meta["cfn_schema"])
    return header + "\n".join(rows) + "\n"
