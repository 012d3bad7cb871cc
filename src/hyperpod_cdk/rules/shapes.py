"""The rule shapes (:mod:`training_runtime.rule_shapes`) for rules on a :class:`ClusterView`.

``one_of``, ``within`` and ``matches`` judge only concrete values: a value a CDK token stands for is known at
deploy, not now (``needs`` judges whether a field is set, which a token is). Each check counts as defined in the
module that calls the factory, so it is reported and listed in that module's place (``rules.RULE_MODULES``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hyperpod_cdk.rules.view import ClusterView
from training_runtime import rule_shapes
from training_runtime.rule_shapes import Check, Located

ViewValues = Callable[[ClusterView], Iterable[Located]]
"""The (field path, value) pairs a rule judges in a view."""


def _caller() -> str:
    return str(sys._getframe(2).f_globals["__name__"])


def _concrete(values: ViewValues) -> ViewValues:
    def judged(view: ClusterView) -> list[Located]:
        return [(path, value) for path, value in values(view) if view.concrete(value)]

    return judged


def one_of(doc: str, values: ViewValues, allowed: Sequence[Any], expected: str | None = None, fix: str = "") -> Check:
    """A check: every concrete value is one of ``allowed`` (:func:`training_runtime.rule_shapes.one_of`)."""
    return rule_shapes.one_of(doc, _concrete(values), allowed, expected, fix, module=_caller())


def within(doc: str, values: ViewValues, low: int, high: int | None, expected: str, fix: str = "") -> Check:
    """A check: every concrete value is from ``low`` to ``high`` (:func:`training_runtime.rule_shapes.within`)."""
    return rule_shapes.within(doc, _concrete(values), low, high, expected, fix, module=_caller())


def matches(doc: str, values: ViewValues, pattern: re.Pattern[str], expected: str, fix: str = "") -> Check:
    """A check: every concrete value matches ``pattern`` (:func:`training_runtime.rule_shapes.matches`)."""
    return rule_shapes.matches(doc, _concrete(values), pattern, expected, fix, module=_caller())


def needs(
    doc: str,
    present: ViewValues,
    satisfied: Callable[[ClusterView], bool],
    expected: str,
    fix: str = "",
    show_value: bool = True,
) -> Check:
    """A check: each field ``present`` finds needs ``satisfied`` (:func:`training_runtime.rule_shapes.needs`)."""
    return rule_shapes.needs(doc, present, satisfied, expected, fix, show_value, module=_caller())


def field_of(section: str, part: Callable[[ClusterView], Any], field: str) -> ViewValues:
    """The one field ``field`` of a section's object (``part(view)``; nothing when that is None), with its path."""

    def values(view: ClusterView) -> list[Located]:
        owner = part(view)
        return [] if owner is None else [(view.path(section, field), getattr(owner, field))]

    return values


def given_fields(section: str, part: Callable[[ClusterView], Any], fields: Sequence[str]) -> ViewValues:
    """Which of ``fields`` the file gives in a section's object (``part(view)``), by name, each with its path."""

    def values(view: ClusterView) -> list[Located]:
        owner = part(view)
        given = sorted(set(owner.model_fields_set) & set(fields)) if owner is not None else []
        return [(view.path(section, field), getattr(owner, field)) for field in given]

    return values
