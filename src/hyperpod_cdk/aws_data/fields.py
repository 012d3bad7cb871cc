"""The field map (``data/fields.yaml``): for every config field, the API member and CloudFormation property it
reaches, its classes for the principles, whether ``plan`` reads it back, and its update policy.

One declaration per config path; the readers derive from it: the request's member -> field map
(:func:`field_of_member`, used by API-MODEL's findings), the deployed config's read-back
(:mod:`hyperpod_cdk.deployed.config`), CDK's validator findings by field (:mod:`hyperpod_cdk.core.template_findings`),
the plain group members the construct and the request write (:func:`plain_group_members`), the principles' rules
(:func:`of_class`) and the update policies (:mod:`hyperpod_cdk.aws_data.update_policy`). No aws_cdk import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

CLUSTER_TYPE = "AWS::SageMaker::Cluster"
MAP_KEYS = frozenset({"api", "render", "class", "plan"})
"""The map's own keys; ``cfn`` is shared with the update policy (the create-only property it quotes)."""
CLASSES = ("arn:", "endpoint", "az", "volume-key", "counted")
"""The principle classes (``arn:<service>`` names the service)."""


@dataclass(frozen=True)
class Field:
    """One line of the map."""

    path: str
    """The config's schema path (``instance_groups[].instance_type``)."""
    api: str | None
    """The CreateCluster/UpdateCluster member path (``InstanceGroups[].InstanceType``), or None."""
    cfn: str | None
    """``TYPE/properties/A/B``: the CloudFormation property (the cluster's is the API member path)."""
    render: str | None
    classes: tuple[str, ...]
    plan: bool
    policy: Any
    """The update policy's declaration (a kind, or a mapping), as data/fields.yaml writes it."""

    @property
    def section(self) -> str:
        """The config section the field lies in (``cluster`` for a top-level scalar)."""
        head = re.split(r"[.\[]", self.path, maxsplit=1)[0]
        return head if head != self.path or self.path in _sections() else "cluster"

    @property
    def in_section(self) -> str:
        """The field's path inside its section (``[].instance_type``; the field itself for the cluster's)."""
        return self.path if self.section == "cluster" else self.path[len(self.section) :].lstrip(".")

    @property
    def leaf(self) -> str:
        return re.split(r"[.\]]", self.path)[-1]

    @property
    def cfn_property(self) -> tuple[str, str] | None:
        """(resource type, property pointer ``InstanceGroups/*/InstanceType``) where the value lands in a template."""
        if self.cfn:
            resource, _, pointer = self.cfn.partition("/properties/")
            return resource, pointer
        if self.api:
            return CLUSTER_TYPE, self.api.replace("[].", "/*/").replace("[]", "/*").replace(".", "/")
        return None


@cache
def _sections() -> frozenset[str]:
    """The config's sections: the top-level paths with fields of their own under them in the map (``tags``, a free
    mapping, is a scalar of the cluster section, as the rules' view has it)."""
    paths = list(declarations())
    return frozenset(
        p for p in paths if re.fullmatch(r"\w+", p) and any(q.startswith((p + ".", p + "[")) for q in paths)
    )


@cache
def declarations() -> dict[str, Any]:
    """``data/fields.yaml`` as written: each schema path's line, in the schema's order."""
    text = resources.files("hyperpod_cdk").joinpath("data/fields.yaml").read_text()
    found: dict[str, Any] = yaml.safe_load(text)
    return found


@cache
def fields() -> tuple[Field, ...]:
    """Every line of the map, in the schema's order."""
    out = []
    for path, entry in declarations().items():
        entry = {"kind": entry} if isinstance(entry, str) else dict(entry)
        policy = {k: v for k, v in entry.items() if k not in MAP_KEYS}
        out.append(
            Field(
                path=path,
                api=entry.get("api"),
                cfn=entry.get("cfn"),
                render=entry.get("render"),
                classes=tuple(entry.get("class") or ()),
                plan=bool(entry.get("plan")),
                policy=policy["kind"] if set(policy) == {"kind"} else policy,
            )
        )
    return tuple(out)


def field(path: str) -> Field:
    found = next((f for f in fields() if f.path == path), None)
    if found is None:
        raise KeyError(f"{path}: not in src/hyperpod_cdk/data/fields.yaml (add its line)")
    return found


def of_class(name: str) -> tuple[Field, ...]:
    """The fields of a principle class: ``arn:`` is every ARN-valued one, ``arn:kms`` those of one service."""

    def wanted(given: str) -> bool:
        return given.startswith(name) if name.endswith(":") else given == name

    return tuple(f for f in fields() if any(wanted(c) for c in f.classes))


def plain_group_members() -> tuple[tuple[str, str], ...]:
    """(API member, group field) of every plain group member: the value as the group holds it."""
    return tuple(
        (f.api.removeprefix("InstanceGroups[]."), f.leaf)
        for f in fields()
        if f.render == "plain" and f.api and f.api.startswith("InstanceGroups[].")
    )


@cache
def _member_patterns() -> tuple[tuple[re.Pattern[str], Field], ...]:
    """Each field with an API member, its member path as a pattern (``[]`` a captured index), most specific first."""
    found = []
    for f in fields():
        if f.api is None:
            continue
        pattern = re.escape(f.api).replace(r"\[\]", r"\[(\d+)\]")
        found.append((re.compile(f"^{pattern}(?=$|[.\\[])"), f))
    return tuple(sorted(found, key=lambda pf: -len(pf[1].api or "")))


def field_of_member(member_path: str) -> tuple[Field, tuple[str, ...], str] | None:
    """The field a request member (``InstanceGroups[2].InstanceType``) comes from, with the list indexes it passed
    through and the rest of the path below the field's member; the nearest enclosing member's field when the member
    itself has none; None when none maps. Where
    several fields reach one member, the first in the map is the one named (the config's own before organization
    defaults)."""
    best: tuple[Field, tuple[str, ...], str] | None = None
    for pattern, f in _member_patterns():
        match = pattern.match(member_path)
        if match and (best is None or len(f.api or "") > len(best[0].api or "")):
            best = (f, match.groups(), member_path[match.end() :])
    return best


def shape_of(member_path: str, operation: str = "CreateCluster") -> str | None:
    """The botocore shape and member a request member path lands on (``InstanceGroups[].InstanceType`` ->
    ``ClusterInstanceGroupSpecification.InstanceType``), walked through the API model's table
    (data/api_constraints.json); None where the table does not hold it."""
    from hyperpod_cdk.aws_data.api_constraints import table

    shapes = table()["shapes"]
    parent, name = table()["operations"][operation], None
    for part in member_path.split("."):
        member = part.removesuffix("[]")
        if name is not None:
            parent = name
            while shapes.get(parent, {}).get("type") == "list":
                parent = shapes[parent]["member"]
        members = shapes.get(parent, {}).get("members") or {}
        if member not in members:
            return None
        name = members[member]
        last = (parent, member)
    return f"{last[0]}.{last[1]}"
