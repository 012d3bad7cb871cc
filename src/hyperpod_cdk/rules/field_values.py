"""A config's values at a field map path (``instance_groups[].training_plan_arn``), each with its concrete path
(``instance_groups[2].training_plan_arn``) as the view names it: the principles' rules
(:mod:`hyperpod_cdk.rules.principles`) read every field of a class through it, on the whole file or on the part a
construct was given (a construct's props, CDK tokens among them).

Only the sections the view has are read. A model that has no attribute a map path names is a LookupError (the map and
the model disagree: tests/test_principles.py reads every classed path); a mapping (``runtime``, a free-form section)
without the key is a value not set.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import Any

from hyperpod_cdk.aws_data.api_support import support_row
from hyperpod_cdk.aws_data.fields import Field, field, fields
from hyperpod_cdk.rules.view import ClusterView

ATTRIBUTES = {"instance_groups": "groups", "storage_openzfs": "openzfs", "accept_unconfirmed": "accepted"}
"""The view's attribute where a config section (or top-level field) has another name."""
STEP = re.compile(r"\[\]|[^.\[\]]+")


def is_set(value: Any) -> bool:
    """Whether a value sets its field: not None, not an empty list or mapping (a CDK token is set)."""
    if value is None:
        return False
    if isinstance(value, Mapping | list | tuple):
        return len(value) > 0
    return True


def values_at(view: ClusterView, path: str | Field, *, concrete: bool = True) -> list[tuple[str, Any]]:
    """(concrete path, value) of every value set at map path ``path`` in ``view``: a list's items each at their
    index. ``concrete``: only values known now (a CDK token is skipped); else every value set, tokens too."""
    found = path if isinstance(path, Field) else field(path)
    if found.section not in view.sections:
        return []
    if found.section == "cluster":
        steps = STEP.findall(found.path)
        start: list[tuple[str, Any]] = [("", view)]
    else:
        steps = STEP.findall(found.in_section)
        root = getattr(view, ATTRIBUTES.get(found.section, found.section))
        start = [("", root)]
    return [
        (view.path(found.section, rest), value)
        for rest, value in _walk(start, steps, found.path)
        if is_set(value) and (not concrete or _known(view, value))
    ]


def _known(view: ClusterView, value: Any) -> bool:
    """Whether a value is known now: only a scalar can be a CDK token (a construct's structure, a model, is not one,
    and the CDK cannot be asked about it)."""
    return not isinstance(value, str | int | float) or view.concrete(value)


def _walk(nodes: list[tuple[str, Any]], steps: list[str], path: str) -> Iterator[tuple[str, Any]]:
    for step in steps:
        nodes = list(_step(nodes, step, path))
    yield from nodes


def _step(nodes: list[tuple[str, Any]], step: str, path: str) -> Iterator[tuple[str, Any]]:
    for rest, value in nodes:
        if value is None:
            continue
        if step == "[]":
            if isinstance(value, Sequence) and not isinstance(value, str):
                yield from ((f"{rest}[{index}]", item) for index, item in enumerate(value))
            continue
        where = f"{rest}.{step}" if rest else step
        yield where, _attribute(value, step, path)


def _attribute(value: Any, name: str, path: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    if isinstance(value, ClusterView):
        name = ATTRIBUTES.get(name, name)
    model_fields = getattr(type(value), "model_fields", None)
    known = name in model_fields if isinstance(model_fields, Mapping) else hasattr(value, name)
    if not known:
        raise LookupError(f"{path}: {type(value).__name__} has no {name!r} (the field map and the model disagree)")
    return getattr(value, name)


APPLIED_WHEN = {"organization.kms_key_arn": "continuous-only"}
"""Fields an aspect writes into their member only where the member's scope holds: the organization's key reaches the
node volumes' ``VolumeKmsKeyId`` only in a cluster with continuous provisioning
(:meth:`hyperpod_cdk.organization.encryption.KmsEncryption._node_volumes`, which warns where it does not;
tests/test_organization.py shows the template). Such a field cannot break its member's scope."""


@cache
def member_fields(member: str) -> tuple[Field, ...]:
    """The fields the map sends to API member ``member`` or to a member below it (``InstanceGroups[].AutoPatchConfig``
    takes ``instance_groups[].auto_patch`` and its sub-fields), in the map's order."""
    return tuple(
        f for f in fields() if f.api is not None and (f.api == member or f.api.startswith((member + ".", member + "[")))
    )


def member_values(view: ClusterView, member: str, scope: str = "") -> list[tuple[str, Any]]:
    """(path, value) of every field that sets API member ``member`` in ``view``, tokens too (a token sets it): the
    outermost set field only (``auto_patch``, not also ``auto_patch.strategy``), less the fields an aspect writes only
    where ``scope`` holds (:data:`APPLIED_WHEN`)."""
    found: list[tuple[str, Any]] = []
    for f in member_fields(member):
        if scope and APPLIED_WHEN.get(f.path) == scope:
            continue
        found += values_at(view, f, concrete=False)
    return [(p, v) for p, v in found if not any(p != q and p.startswith((q + ".", q + "[")) for q, _ in found)]


def scoped_values(view: ClusterView, row_id: str) -> list[tuple[str, Any]]:
    """:func:`member_values` of the member of ``data/api_support.yaml`` row ``row_id`` (a scoped row: its rule judges
    every field that sets the member)."""
    row = support_row(row_id)
    return member_values(view, row.member, row.scope)
