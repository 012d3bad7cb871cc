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
class Change:
    """One field whose deployed value differs from the new config's."""

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


def changes(view: Any, policies: Iterable[Row]) -> Iterator[Change]:
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
                    yield Change(path, old, new, row)


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
