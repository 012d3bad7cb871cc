"""Principles: AWS's rules over the field map's classes (``class:`` in data/fields.yaml), not over one field.

Each rule reads every field of its class through :func:`~hyperpod_cdk.rules.field_values.values_at`, so a field added
to the map with that class is judged without a line here (tests/test_principles.py sets each one):

- PRINCIPLE-REGION: every ``arn:*``, ``endpoint`` and ``az`` value is in the cluster's Region.
- PRINCIPLE-VOLUME-KEY: an existing group's volume key does not change, whichever ``volume-key`` field sets it.

The continuous-only and EKS-only members are judged by member in their own rules
(:func:`~hyperpod_cdk.rules.field_values.scoped_values`, rows with ``scope`` in data/api_support.yaml); a scoped row
with a ``refusal`` has its rule registered here from the row itself (:func:`_member_rule`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from hyperpod_cdk.aws_data.api_support import SupportRow, api_rule, support_table
from hyperpod_cdk.aws_data.fields import Field, of_class
from hyperpod_cdk.model import NodeProvisioningMode
from hyperpod_cdk.rules.field_values import APPLIED_WHEN, member_fields, scoped_values, values_at
from hyperpod_cdk.rules.network import zone_region
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

rule = REGISTRY.rule

PREREQ_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites.html"
SAME_REGION_QUOTE = (
    '"Make sure that all resources are deployed in the same AWS Region as the SageMaker HyperPod cluster."'
)
"""Row prereq-same-region."""
CMK_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html"
NO_KEY_CHANGE_QUOTE = (
    "\"KMS key transition isn't currently supported, so you can't change the KMS key specified in your "
    "configuration. To use a different key, create a new instance group with the desired key and delete your old "
    'instance group."'
)
"""Row cmk-no-key-change."""

# --- PRINCIPLE-REGION -----------------------------------------------------------------------------------------------

ARN = re.compile(r"^arn:aws[a-z-]*:[a-z0-9-]+:(?P<region>[^:]*):")
REGION_NAME = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
AWS_DNS_SUFFIXES = (".amazonaws.com", ".amazonaws.com.cn")


def arn_region(value: str) -> str | None:
    """The Region part of an ARN; None for an ARN without one (IAM's ``arn:aws:iam::<account>:...``, S3 buckets')
    or a value that is no ARN (the field's own rule judges its form)."""
    match = ARN.match(value)
    return match["region"] or None if match else None


def endpoint_region(name: str) -> str | None:
    """The Region an AWS service's DNS name embeds, next to the service's label: ``fs-0123.fsx.us-west-2.amazonaws.com``
    (FSx), ``db.abc.us-west-2.rds.amazonaws.com`` (RDS). None for any other name (a private zone's, an IP address):
    nothing in it says a Region."""
    host = name.lower().rstrip(".")
    suffix = next((s for s in AWS_DNS_SUFFIXES if host.endswith(s)), None)
    if suffix is None:
        return None
    labels = host[: -len(suffix)].split(".")[-2:]
    found = [label for label in labels if REGION_NAME.fullmatch(label)]
    return found[-1] if found else None


REGION_OF: dict[str, Callable[[str], str | None]] = {"arn:": arn_region, "endpoint": endpoint_region, "az": zone_region}
"""Each Region-bound class and how a value of it says its Region (None: it does not, and is not judged)."""
WHAT = {"arn:": "an ARN", "endpoint": "an endpoint", "az": "an Availability Zone"}
ELSEWHERE = {"observability.workspace_arn": "OBS-WORKSPACE-REGION"}
"""Fields whose other Region works by design, with the warning that says what it costs: the nodes' metrics agent
signs for the workspace's own Region (docs/observability.md). HyperPod is not given the value."""


def region_class(f: Field) -> str | None:
    """The Region-bound class of field ``f`` (``arn:`` for any ``arn:<service>``), or None."""
    for given in f.classes:
        name = "arn:" if given.startswith("arn:") else given
        if name in REGION_OF:
            return name
    return None


@cache
def region_fields() -> tuple[Field, ...]:
    """Every field of a Region-bound class, in the map's order."""
    return tuple({f.path: f for name in REGION_OF for f in of_class(name)}.values())


def cluster_region_of(view: ClusterView) -> tuple[str | None, str]:
    """The Region the cluster deploys in and what says so: the stack's, else network.availability_zone's."""
    if view.region:
        return view.region, "the stack's Region"
    net = view.network if "network" in view.sections else None
    zone = net.availability_zone if net is not None else None
    if isinstance(zone, str) and view.concrete(zone) and zone_region(zone):
        return zone_region(zone), f"the Region of {view.path('network', 'availability_zone')} {zone}"
    return None, ""


@rule(
    "PRINCIPLE-REGION",
    "cluster",
    "every arn:*, endpoint and az field (data/fields.yaml)",
    needs=("region",),
    source=f"{PREREQ_DOC} (Make sure that all resources are deployed in the same AWS Region)",
)
def same_region(view: ClusterView) -> Iterator[Problem]:
    """Every ARN, AWS endpoint name and Availability Zone the config gives is in the cluster's Region.

    The cluster's Region is the stack's, else network.availability_zone's; neither known, nothing is judged. An ARN
    without a Region part (IAM) or a DNS name that embeds none is not judged; observability.workspace_arn is
    OBS-WORKSPACE-REGION's (the nodes sign for the workspace's own Region)."""
    region, whence = cluster_region_of(view)
    if region is None:
        return
    for f in region_fields():
        name = region_class(f)
        if name is None or f.path in ELSEWHERE:
            continue
        for where, value in values_at(view, f):
            found = REGION_OF[name](value) if isinstance(value, str) else None
            if found is not None and found != region:
                yield Problem(
                    where,
                    f"{WHAT[name]} in {found}, but the cluster is in {region} ({whence}); AWS ({PREREQ_DOC}): "
                    f"{SAME_REGION_QUOTE}",
                    got=value,
                    fix=f"use {WHAT[name]} in {region}, or deploy the cluster to {found}",
                )


# --- PRINCIPLE-VOLUME-KEY -------------------------------------------------------------------------------------------


def _reaches(view: ClusterView, f: Field) -> bool:
    """Whether a field outside the groups reaches their volumes: the organization's key only with continuous
    provisioning (:data:`~hyperpod_cdk.rules.field_values.APPLIED_WHEN`)."""
    if APPLIED_WHEN.get(f.path) == "continuous-only":
        return view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS
    return True


def volume_keys(view: ClusterView) -> dict[str, list[tuple[Field, str, Any]]]:
    """Each group's volume key as every ``volume-key`` field gives it, in the map's order (the group's own field
    before the organization's default): group name -> [(field, path, value or None)]."""
    keys: dict[str, list[tuple[Field, str, Any]]] = {g.name: [] for g in view.groups}
    names = [g.name for g in view.groups]
    for f in of_class("volume-key"):
        found = values_at(view, f, concrete=False)
        if f.section == "instance_groups":
            by_index = {int(m.group(1)): (p, v) for p, v in found if (m := re.search(r"\[(\d+)\]", p))}
            for index, name in enumerate(names):
                path, value = by_index.get(index, (view.path("instance_groups", f"[{index}]"), None))
                keys[name].append((f, path, value))
        else:
            path, value = found[0] if found and _reaches(view, f) else (view.path(f.section, f.in_section), None)
            for name in names:
                keys[name].append((f, path, value))
    return keys


def _key(given: list[tuple[Field, str, Any]]) -> Any:
    return next((value for _, _, value in given if value is not None), None)


def _refused_by_its_policy(f: Field) -> bool:
    """A field whose own update policy is row cmk-no-key-change: UPD-REFUSED reports its change."""
    return isinstance(f.policy, Mapping) and f.policy.get("row") == "cmk-no-key-change"


@rule(
    "PRINCIPLE-VOLUME-KEY",
    "instance_groups",
    "every volume-key field (data/fields.yaml)",
    needs=("cluster",),
    source=f"{CMK_DOC} (KMS key transition isn't currently supported)",
)
def volume_key_kept(view: ClusterView) -> Iterator[Problem]:
    """An existing group's volume key does not change, whichever volume-key field sets it (the organization's too).

    The organization's key reaches every group without its own in a continuous cluster, so changing, adding or
    removing it changes theirs (a group's own key is UPD-REFUSED's). A new group takes any key."""
    previous = view.previous
    if previous is None:
        return
    before = volume_keys(previous)
    changed: dict[str, tuple[Field, list[str], Any, Any]] = {}
    for name, given in volume_keys(view).items():
        old_given = before.get(name)
        if old_given is None or str(_key(old_given)) == str(_key(given)):
            continue
        for (f, path, value), (_, _, old) in zip(given, old_given, strict=True):
            if str(value) != str(old):
                if not _refused_by_its_policy(f):
                    entry = changed.setdefault(path, (f, [], _key(old_given), _key(given)))
                    entry[1].append(name)
                break
    for path, (f, groups, old, new) in changed.items():
        yield Problem(
            path,
            f"changes the volume key of existing instance group(s) {', '.join(groups)} from {old or 'none'} to "
            f"{new or 'none'}; AWS ({CMK_DOC}): {NO_KEY_CHANGE_QUOTE}",
            got=new,
            fix=f"keep the deployed {f.leaf}; for another key add new instance groups (they take it) and remove "
            "the old ones",
        )


def _member_rule(row: SupportRow) -> None:
    """Register the rule of scoped support row ``row`` (one with a ``refusal``): every field that sets its member is
    refused where the scope does not hold (an EKS-only member on any Slurm cluster; a continuous-only one without
    continuous provisioning), in the row's words and level."""
    fields = member_fields(row.member)
    if not fields:
        raise LookupError(f"data/api_support.yaml row {row.id}: no field of data/fields.yaml sends {row.member}")

    def check(view: ClusterView) -> Iterator[Problem]:
        if row.scope == "continuous-only" and view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS:
            return
        for where, value in scoped_values(view, row.id):
            yield Problem(
                where, f"{row.member}: {row.refusal} ({row.source})", got=value, fix=f"remove it: {row.constraint}"
            )

    check.__doc__ = f"{row.member} is refused where AWS does not take it: {row.refusal}"
    check.__name__ = f"member_{row.id.replace('-', '_')}"
    check.__module__ = __name__
    first = fields[0]
    api_rule(rule, row.id, first.section, first.path.replace("[]", "[*]"))(check)


for _row in support_table():
    if _row.refusal:
        _member_rule(_row)
