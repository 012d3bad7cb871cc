"""Three rule shapes, written once: a value in an allowed set, a value in a range (or matching a pattern), and
"needs X when Y". Each factory returns a rule's check; the caller registers it (``RuleBook.rule``) with its id,
section, field path, level and source.

A shape judges the (field path, value) pairs its ``values`` function finds in the rule's arguments (the runtime
options and the section's path; a ``ClusterView`` on the CDK side, :mod:`hyperpod_cdk.rules.shapes`), so the
problem it reports names the field path, the value and what is allowed. ``doc`` is the check's docstring, whose
first line documents the rule (docs/rules.md); ``module`` is the module the check counts as defined in (the CDK
registry orders rules by module), by default the caller's, as ``collections.namedtuple`` does.

Runs on the node's system Python (3.8 and newer), so: stdlib only, ``typing`` generics.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Tuple

from training_runtime.problems import Problem

Located = Tuple[str, Any]
"""A field's path and its value."""
Values = Callable[..., Iterable[Located]]
"""The pairs a shape judges, from the rule's arguments."""
Check = Callable[..., Iterator[Problem]]


def _caller(depth: int = 2) -> str:
    return str(sys._getframe(depth).f_globals.get("__name__", __name__))


def _named(check: Check, doc: str, module: Optional[str]) -> Check:
    check.__doc__ = doc
    check.__module__ = module or _caller(3)
    return check


def one_of(
    doc: str,
    values: Values,
    allowed: Sequence[Any],
    expected: Optional[str] = None,
    fix: str = "",
    module: Optional[str] = None,
) -> Check:
    """A check: every value is one of ``allowed``. ``expected`` (default ``allowed: a, b, c``, ``allowed``'s
    items in order) says what is allowed."""
    said = expected if expected is not None else "allowed: " + ", ".join(map(str, allowed))

    def check(*args: Any) -> Iterator[Problem]:
        for path, value in values(*args):
            if value not in allowed:
                yield Problem(path, said, got=value, fix=fix)

    return _named(check, doc, module)


def within(
    doc: str,
    values: Values,
    low: int,
    high: Optional[int],
    expected: str,
    fix: str = "",
    module: Optional[str] = None,
) -> Check:
    """A check: every value is from ``low`` to ``high`` (None: no upper bound). ``expected`` says so, with
    ``{low}`` and ``{high}`` filled in (e.g. ``allowed: {low} to {high} GiB``)."""
    said = expected.format(low=low, high=high)

    def check(*args: Any) -> Iterator[Problem]:
        for path, value in values(*args):
            if value < low or (high is not None and value > high):
                yield Problem(path, said, got=value, fix=fix)

    return _named(check, doc, module)


def matches(
    doc: str,
    values: Values,
    pattern: re.Pattern[str],
    expected: str,
    fix: str = "",
    module: Optional[str] = None,
) -> Check:
    """A check: every value that is set (not None) matches ``pattern`` in full (``fullmatch``: a trailing newline
    does not pass, as it would with ``$``); ``expected`` says what
    form it takes."""

    def check(*args: Any) -> Iterator[Problem]:
        for path, value in values(*args):
            if value is not None and not pattern.fullmatch(str(value)):
                yield Problem(path, expected, got=value, fix=fix)

    return _named(check, doc, module)


def needs(
    doc: str,
    present: Values,
    satisfied: Callable[..., bool],
    expected: str,
    fix: str = "",
    show_value: bool = True,
    module: Optional[str] = None,
) -> Check:
    """A check for "Y needs X": every field ``present`` finds (Y, with its path and value) is a problem unless
    ``satisfied`` (X) holds. ``expected`` says why it needs X and ``fix`` how to get there; ``show_value``: the
    problem shows the field's value (``got``)."""

    def check(*args: Any) -> Iterator[Problem]:
        found = list(present(*args))
        if not found or satisfied(*args):
            return
        for path, value in found:
            if show_value:
                yield Problem(path, expected, got=value, fix=fix)
            else:
                yield Problem(path, expected, fix=fix)

    return _named(check, doc, module)
