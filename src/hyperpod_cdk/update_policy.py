"""Update policies: the config fields AWS says cannot change (or change only in part) once the cluster or the
instance group exists, read from the AWS inventory's ``enforced_by: update-policy`` rows — the one table of them.

``validate --previous FILE`` compares the deployed config with the new one: each changed field that has a policy is
reported by its row's ``rule_previous`` with the old and new value, AWS's words and what to do instead
(:mod:`hyperpod_cdk.rules.updates` holds one rule per policy kind). No aws_cdk import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Any

from hyperpod_cdk.aws_inventory import Row, rows

POLICY_RULES = {
    "immutable": "UPD-IMMUTABLE",
    "irreversible": "UPD-IRREVERSIBLE",
    "new-nodes-only": "UPD-NEW-NODES-ONLY",
    "replaces-root-volume": "UPD-REPLACES-ROOT-VOLUME",
}
"""The generic ``validate --previous`` rule of each policy kind (a row may name a more specific rule instead)."""
VIEW_ROOTS = {"instance_groups": "groups", "storage_openzfs": "openzfs"}
"""Config sections whose ClusterView attribute has another name."""
GROUPS = "instance_groups[*]"
_BRACES = re.compile(r"^(.*)\{([^}]+)\}$")


@dataclass(frozen=True)
class RowChange:
    """One field of an inventory row whose deployed value differs from the new config's."""

    path: str
    """The field path in the new config (``instance_groups[2].instance_type``)."""
    old: Any
    new: Any
    row: Row


def expand(field: str) -> list[str]:
    """The paths a row's ``field`` names: ``network.{vpc_id,subnet_id}`` is two."""
    match = _BRACES.match(field)
    if not match:
        return [field]
    return [match.group(1) + name.strip() for name in match.group(2).split(",")]


@cache
def update_policies() -> tuple[Row, ...]:
    """Every update-policy row of the inventory, in file order."""
    return tuple(r for r in rows() if r.enforced_by == "update-policy")


def update_policy(field_path: str) -> Row | None:
    """The update-policy row of ``field_path`` (``instance_groups[*].instance_type``, or one group's
    ``instance_groups[3].instance_type``), or None when AWS states no policy for it."""
    wanted = re.sub(r"^instance_groups\[\d+\]", GROUPS, field_path)
    return next((r for r in update_policies() if r.field is not None and wanted in expand(r.field)), None)


def _get(value: Any, parts: Iterable[str]) -> Any:
    for part in parts:
        if value is None:
            return None
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value.value if hasattr(value, "value") and not isinstance(value, (str, int)) else value


def _values(view: Any, field: str) -> dict[str, tuple[str, Any]]:
    """The value of ``field`` in ``view`` by key: one per instance group (its name) for ``instance_groups[*].…``,
    so that the deployed and new groups pair up by name; else one, keyed ''."""
    if field.startswith(GROUPS + "."):
        rest = field[len(GROUPS) + 1 :].split(".")
        return {
            group.name: (f"instance_groups[{index}].{'.'.join(rest)}", _get(group, rest))
            for index, group in enumerate(view.groups)
        }
    first, *rest = field.split(".")
    return {"": (field, _get(getattr(view, VIEW_ROOTS.get(first, first), None), rest))}


def _set(value: Any) -> bool:
    return value not in (None, "", False) and value != [] and value != {}


def row_changes(view: Any, policies: Iterable[Row]) -> Iterator[RowChange]:
    """The fields of ``policies`` whose value in ``view`` differs from ``view.previous`` (none without one). A group
    new in ``view`` has no deployed value, so nothing about it changed. An irreversible field changes only when its
    deployed value was set: what AWS forbids is leaving it."""
    previous = view.previous
    if previous is None:
        return
    for row in policies:
        for field in expand(row.field or ""):
            before = _values(previous, field)
            for key, (path, new) in _values(view, field).items():
                if key not in before:
                    continue
                old = before[key][1]
                if old != new and (row.policy != "irreversible" or _set(old)):
                    yield RowChange(path, old, new, row)


def fix(row: Row) -> str:
    """What to do instead of the change, by policy."""
    group = (row.field or "").startswith(GROUPS)
    return {
        "immutable": (
            "keep the deployed value; for the new one add a new instance group (and remove the old one)"
            if group
            else "keep the deployed value; for the new one create a new cluster"
        ),
        "irreversible": "keep the deployed value: nothing changes it back; a new cluster starts without it",
        "new-nodes-only": "expect running nodes to keep the old value until they are replaced (or replace them)",
        "replaces-root-volume": "save what the nodes keep on their root volumes first; /opt/sagemaker and FSx stay",
        "replaces-cluster": "keep the deployed value unless you mean to rebuild the cluster and every node",
    }[row.policy or "immutable"]


# --- The interface of issue #31: a policy for every config field, and the changes between two configs. ---------


class Kind(str, Enum):
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


KIND_OF_ROW_POLICY = {
    "immutable": Kind.REFUSED,
    "irreversible": Kind.IRREVERSIBLE,
    "new-nodes-only": Kind.NEW_NODES_ONLY,
    "replaces-root-volume": Kind.REPLACES_ROOT_VOLUMES,
    "replaces-cluster": Kind.REPLACES_RESOURCE,
}
"""The kind of each inventory row ``policy``."""


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
    """AWS's words (the inventory row's quote)."""
    row: str | None
    """The inventory row id."""


IN_PLACE = FieldPolicy(Kind.IN_PLACE, "applied to the running cluster by the stack update", "nothing", None, None, None)


def _schema_path(path: str) -> str:
    """``instance_groups[2].instance_type`` -> ``instance_groups[].instance_type``."""
    return re.sub(r"\[[^\]]*\]", "[]", path)


def policy_for(path: str) -> FieldPolicy:
    """The update policy of a config field (``instance_groups[].instance_type``; a concrete index is accepted)."""
    wanted = _schema_path(path).replace("[]", "[*]")
    parts = wanted.split(".")
    candidates = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]  # the field, then its enclosing fields
    fields = {f: r for r in reversed(update_policies()) if r.field is not None for f in expand(r.field)}
    row = next((fields[c] for c in candidates if c in fields), None)
    if row is None:
        return IN_PLACE
    kind = KIND_OF_ROW_POLICY[row.policy or "immutable"]
    return FieldPolicy(kind, row.how or kind.value, fix(row), row.url, row.quote, row.id)


_RETAINED_DATA = ("storage.", "storage_openzfs.")
"""Config sections whose resource holds data: replacing it loses or strands that data."""


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
        return kind is Kind.REPLACES_RESOURCE and self.path.startswith(_RETAINED_DATA)


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def _named(items: Any) -> bool:
    return (
        isinstance(items, list)
        and bool(items)
        and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)
    )


def _diff(path: str, before: Any, after: Any) -> Iterator[Change]:
    if before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            yield from _diff(f"{path}.{key}" if path else str(key), before.get(key), after.get(key))
        return
    if _named(before) and _named(after):
        old = {item["name"]: item for item in before}
        new_names = {item["name"] for item in after}
        for index, item in enumerate(after):
            if item["name"] in old:
                yield from _diff(f"{path}[{index}]", old[item["name"]], item)
            else:
                yield Change(f"{path}[{index}]", None, item, policy_for(f"{path}[]"))
        for index, item in enumerate(before):
            if item["name"] not in new_names:
                yield Change(f"{path}[{index}]", item, None, policy_for(f"{path}[]"))
        return
    yield Change(path, before, after, policy_for(path))


def changes(before: Any, after: Any) -> list[Change]:
    """Every field whose value differs between the deployed config ``before`` and the new one ``after``
    (ClusterConfig), each with its policy. Instance groups (and other named lists) pair up by name: a group new
    in ``after`` is one change at its index with ``before`` None, a group gone from it one with ``after`` None (at
    its index in ``before``)."""
    return list(_diff("", _plain(before), _plain(after)))
