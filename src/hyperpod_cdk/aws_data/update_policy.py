"""Update policies: what changing each config field does to a deployed cluster (issue #31).

Every field of the config has one line in ``data/fields.yaml`` (the one place they are declared; the JSON
Schema shows it as ``x-update-policy`` and docs/configuration.md lists them): in place, or a kind that AWS documents
— an AWS inventory row (``data/aws_inventory``) with its quote, or a CloudFormation resource property that requires
replacement. :func:`changes` compares a deployed config with a new one (instance groups paired by name) and gives each
changed field its policy; ``validate --previous`` (:mod:`hyperpod_cdk.rules.updates`), ``plan`` and the emulated
control plane use them. No aws_cdk import.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

from hyperpod_cdk.aws_data.fields import fields
from hyperpod_cdk.aws_data.inventory import Row, rows

GROUPS = "instance_groups[*]"
_BRACES = re.compile(r"^(.*)\{([^}]+)\}$")
CFN_REFERENCE = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
DATA_RESOURCES = ("AWS::FSx::FileSystem",)
"""CloudFormation resources that hold data: replacing one strands or loses its files."""
GENERIC_RULES = (
    "UPD-REFUSED",
    "UPD-NEW-INSTANCE-GROUP",
    "UPD-IRREVERSIBLE",
    "UPD-NEW-NODES-ONLY",
    "UPD-REPLACES-ROOT-VOLUMES",
    "UPD-REPLACES",
    "UPD-REPLACES-DATA",
)
"""The ``validate --previous`` rules that read the policies (:mod:`hyperpod_cdk.rules.updates`); a row whose
``rule_previous`` names another rule has that rule instead (GRP-ROLE-IMMUTABLE, NET-REPLACES, ...)."""


class Kind(StrEnum):
    """What happens when a config field changes on a deployed cluster."""

    IN_PLACE = "in-place"
    """Applied by UpdateCluster / the stack update to running nodes."""
    NEW_NODES_ONLY = "new-nodes-only"
    """Accepted; only nodes provisioned later get it (AWS: the FSx configuration)."""
    REPLACES_ROOT_VOLUMES = "replaces-root-volumes"
    """Needs UpdateClusterSoftware: re-images the nodes' root volumes."""
    NEW_INSTANCE_GROUP = "new-instance-group"
    """Change it by adding a new group and removing the old one."""
    REFUSED = "refused"
    """The API refuses it once the group or cluster exists."""
    IRREVERSIBLE = "irreversible"
    """Accepted once, can never be undone (the external accounting database)."""
    REPLACES_RESOURCE = "replaces-resource"
    """CloudFormation replaces the resource (the cluster, a file system): data at risk."""


@dataclass(frozen=True)
class FieldPolicy:
    """A config field's update policy, with AWS's words for every kind but IN_PLACE."""

    kind: Kind
    why: str
    """One line: the consequence of changing the field on a deployed cluster."""
    todo: str
    """One line: what to do about it."""
    source: str | None
    """The AWS page (None only for IN_PLACE)."""
    quote: str | None
    """AWS's words (the inventory row's quote, or the CloudFormation reference's)."""
    row: str | None
    """The inventory row id (None for IN_PLACE and for a CloudFormation or AWS-silent citation)."""


WHY = {
    Kind.IN_PLACE: "the stack update applies it to the running cluster",
    Kind.NEW_NODES_ONLY: "accepted, but only nodes provisioned from now on get it; running nodes keep the deployed "
    "value",
    Kind.REPLACES_ROOT_VOLUMES: "a new AMI reaches running nodes through UpdateClusterSoftware, which re-images their "
    "root volumes (what the nodes keep there is lost; FSx stays)",
    Kind.NEW_INSTANCE_GROUP: "AWS does not document changing it on an existing instance group; it is fixed when an "
    "instance launches",
    Kind.REFUSED: "the API refuses it once the instance group or cluster exists: the update fails and rolls back",
    Kind.IRREVERSIBLE: "accepted once and never undone",
    Kind.REPLACES_RESOURCE: "CloudFormation replaces the resource: a new one is created and the old one deleted",
}
TODO = {
    Kind.IN_PLACE: "nothing",
    Kind.NEW_NODES_ONLY: "replace the running nodes (scale the group to 0 and back, or hyperpod-cdk replace) to "
    "apply it everywhere",
    Kind.REPLACES_ROOT_VOLUMES: "save what the nodes keep on their root volumes, then update the software group by "
    "group, draining each batch first",
    Kind.NEW_INSTANCE_GROUP: "add a new instance group with the new value, move the work, then remove the old group",
    Kind.REFUSED: "keep the deployed value; for the new one add a new instance group (and remove the old one)",
    Kind.IRREVERSIBLE: "keep the deployed value: nothing changes it back; a new cluster starts without it",
    Kind.REPLACES_RESOURCE: "keep the deployed value unless you mean to rebuild the resource (copy its data first)",
}


def expand(field: str) -> list[str]:
    """The paths an inventory row's ``field`` names: ``network.{vpc_id,subnet_id}`` is two."""
    match = _BRACES.fullmatch(field)
    if not match:
        return [field]
    return [match.group(1) + name.strip() for name in match.group(2).split(",")]


@cache
def update_policies() -> tuple[Row, ...]:
    """Every update-policy row of the inventory, in file order."""
    return tuple(r for r in rows() if r.enforced_by == "update-policy")


def declarations() -> dict[str, Any]:
    """Each schema path's update policy, in the schema's order (the field map's policy part, data/fields.yaml)."""
    return {f.path: f.policy for f in fields()}


def schema_path(path: str) -> str:
    """``instance_groups[2].instance_type`` -> ``instance_groups[].instance_type``."""
    return re.sub(r"\[[^\]]*\]", "[]", path)


def declared_path(path: str) -> str:
    """The declared path that governs ``path``: itself, or the nearest enclosing one (a free-form section's keys);
    KeyError naming the path when the schema has no such field."""
    parts = schema_path(path).split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in declarations():
            return candidate
    raise KeyError(
        f"{path}: no update policy; the fields with one are listed in src/hyperpod_cdk/data/fields.yaml "
        "(add the field there)"
    )


def _entry(path: str) -> dict[str, Any]:
    entry = declarations()[declared_path(path)]
    return {"kind": entry} if isinstance(entry, str) else dict(entry)


@cache
def _row(row_id: str) -> Row:
    found = next((r for r in rows() if r.id == row_id), None)
    if found is None:
        raise KeyError(f"data/fields.yaml names the inventory row {row_id!r}, which does not exist")
    return found


FSX_API_REFERENCE = "https://docs.aws.amazon.com/fsx/latest/APIReference/"


def update_api_citation(entry: dict[str, Any]) -> tuple[str, str, str]:
    """``(service, update shape, member)`` of an ``update_api`` declaration: the API's update request lacks the member
    (tests/test_update_policy.py checks it against botocore's model, where the API reference comes from)."""
    service, _, shape = str(entry["update_api"]).partition(" ")
    return service, shape, str(entry["member"])


def cfn_source(resource: str) -> str:
    """The CloudFormation reference page of ``AWS::FSx::FileSystem``."""
    return CFN_REFERENCE + "aws-resource-" + resource.removeprefix("AWS::").replace("::", "-").lower() + ".html"


@cache
def _policy(declared: str) -> FieldPolicy:
    entry = _entry(declared)
    kind = Kind(entry["kind"])
    why, todo = entry.get("why", WHY[kind]), entry.get("todo", TODO[kind])
    if kind is Kind.REFUSED and not declared.startswith("instance_groups[]"):
        todo = "keep the deployed value; for the new one create a new cluster"
    if "row" in entry:
        row = _row(entry["row"])
        return FieldPolicy(kind, why, todo, row.url, row.quote, row.id)
    if "cfn" in entry and kind is Kind.REPLACES_RESOURCE:  # the map's cfn: the create-only property it quotes
        resource, _, prop = entry["cfn"].partition("/properties/")
        quote = f"{prop.split('/')[-1]}: Update requires: Replacement"
        return FieldPolicy(kind, f"{why} ({resource})", todo, cfn_source(resource), quote, None)
    if "silent" in entry:
        return FieldPolicy(kind, why, todo, entry.get("source"), entry.get("quote"), None)
    if "update_api" in entry:
        service, shape, member = update_api_citation(entry)
        quote = (
            f"{shape} (the {service} API's UpdateFileSystem) has no {member} member: the value is set when the file "
            "system is created and cannot be changed on it. CloudFormation's resource schema does not list it as "
            "create-only (so the stack update may fail and roll back), while hyperpod-cdk's FSX-REPLACES warns that a "
            "new, empty file system replaces the old: the sources disagree, and either way the change does not apply "
            "in place"
        )
        return FieldPolicy(kind, why, todo, f"{FSX_API_REFERENCE}API_{shape}.html", quote, None)
    return FieldPolicy(kind, why, todo, None, None, None)


def policy_for(path: str) -> FieldPolicy:
    """The update policy of a config field (``instance_groups[].instance_type``; ``instance_groups[3].…`` too)."""
    return _policy(declared_path(path))


def holds_data(path: str) -> bool:
    """Whether the field's replacement is of a resource that holds data (a file system)."""
    cfn = str(_entry(path).get("cfn", ""))
    return cfn.startswith(DATA_RESOURCES)


def dedicated_rule(path: str) -> str | None:
    """The rule that reports a change of the field when it is not one of :data:`GENERIC_RULES` (the row's own)."""
    entry = _entry(path)
    if "rule" in entry:
        return None if entry["rule"] in GENERIC_RULES else str(entry["rule"])
    row_id = entry.get("row")
    if row_id is None:
        return None
    row = _row(row_id)
    rule = row.rule_previous if row.enforced_by == "update-policy" else row.rule
    return None if rule is None or rule in GENERIC_RULES or row.enforced_by == "construction" else rule


@dataclass(frozen=True)
class Change:
    """One field whose deployed value (``before``) differs from the new config's (``after``)."""

    path: str
    """Concrete: ``instance_groups[1].instance_type`` (the index in the new config; groups matched by name)."""
    before: Any
    after: Any
    policy: FieldPolicy

    @property
    def blocks(self) -> bool:
        """The change cannot go ahead as it is: the API refuses it, CloudFormation would replace a resource that
        holds data, or a field that takes a new instance group is changed on the existing one."""
        kind = self.policy.kind
        if kind in (Kind.REFUSED, Kind.NEW_INSTANCE_GROUP):
            return True
        return kind is Kind.REPLACES_RESOURCE and holds_data(self.path)


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def _named(items: Any) -> bool:
    return isinstance(items, list) and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)


def _diff(path: str, before: Any, after: Any) -> Iterator[Change]:
    if before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            yield from _diff(f"{path}.{key}" if path else str(key), before.get(key), after.get(key))
        return
    if path and {type(before), type(after)} == {dict, type(None)}:
        # a section set or removed: one change, unless a field in it has another policy (runtime.accounting.database)
        inner = list(_diff(path, before or {}, after or {}))
        whole = policy_for(path)
        if any(c.policy != whole for c in inner):
            yield from inner
        else:
            yield Change(path, before, after, whole)
        return
    if _named(before) and _named(after) and (before or after):
        old = {item["name"]: item for item in before}
        kept = {item["name"] for item in after}
        for index, item in enumerate(after):
            if item["name"] in old:
                yield from _diff(f"{path}[{index}]", old[item["name"]], item)
            else:
                yield Change(f"{path}[{index}]", None, item, policy_for(f"{path}[]"))
        for index, item in enumerate(before):
            if item["name"] not in kept:
                yield Change(f"{path}[{index}]", item, None, policy_for(f"{path}[]"))
        return
    yield Change(path, before, after, policy_for(path))


def changes(before: Any, after: Any) -> list[Change]:
    """Every field whose value differs between the deployed config ``before`` and the new one ``after``
    (ClusterConfig), each with its policy. Instance groups (and other lists of named items: data repositories,
    users, teams) pair up by name: an item new in ``after`` is one change at its index with ``before`` None, one
    gone from it a change with ``after`` None at its index in ``before``."""
    return list(_diff("", _plain(before), _plain(after)))


def schema_fields(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every field of the JSON Schema as ``(schema path, its property node)``, in order: ``instance_groups[]`` for a
    list of objects, then ``instance_groups[].name`` for its fields (``$ref`` and ``anyOf``/``oneOf``/``allOf``
    followed)."""
    defs = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
        node = resolve(node)
        for key in ("anyOf", "oneOf", "allOf"):
            for option in node.get(key, []):
                yield from walk(option, path)
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, dict) and "properties" in resolve(items):
            yield path + "[]", node
            yield from walk(items, path + "[]")
        for name, prop in node.get("properties", {}).items():
            child = f"{path}.{name}" if path else name
            yield child, prop
            yield from walk(prop, child)

    yield from walk(schema, "")


def annotate(schema: dict[str, Any]) -> dict[str, Any]:
    """Write each field's policy kind into the JSON Schema as ``x-update-policy`` (beside its description); a shared
    definition reached by two paths must have one policy. Returns ``schema``."""
    for path, prop in schema_fields(schema):
        if path.endswith("[]"):
            continue
        kind = policy_for(path).kind.value
        if prop.get("x-update-policy", kind) != kind:
            raise ValueError(f"{path}: a shared schema definition has two update policies")
        prop["x-update-policy"] = kind
    return schema
