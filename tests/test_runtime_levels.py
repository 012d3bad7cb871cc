"""The problems vocabulary the node runtime shares (stdlib, Python 3.8): three levels, one letter each for cfn-lint,
and which rules a config may suppress by default."""

from __future__ import annotations

import pickle

import pytest

from training_runtime.problems import ERROR, INFO, LEVEL_LETTERS, LEVELS, WARNING, Problem, RuleBook, errors, infos
from training_runtime.problems import warnings as warnings_of


def test_three_levels_each_with_its_cfn_lint_letter() -> None:
    assert LEVELS == (ERROR, WARNING, INFO) == ("error", "warning", "info")
    assert LEVEL_LETTERS == {"error": "E", "warning": "W", "info": "I"}
    assert len(set(LEVEL_LETTERS.values())) == len(LEVELS)


def test_infos_are_neither_errors_nor_warnings() -> None:
    found = [Problem("a", "x"), Problem("b", "y", level=WARNING), Problem("c", "z", level=INFO)]
    assert [p.path for p in errors(found)] == ["a"]
    assert [p.path for p in warnings_of(found)] == ["b"]
    assert [p.path for p in infos(found)] == ["c"]
    copied = pickle.loads(pickle.dumps(found[2]))
    assert (copied.level, copied.as_dict()["level"]) == (INFO, "info")


def _check(view: object) -> list[Problem]:
    """A check."""
    return []


def test_a_new_error_rule_cannot_be_suppressed_unless_it_says_so() -> None:
    book = RuleBook("t")
    book.rule("E-API", "cluster", "x")(_check)
    book.rule("E-OPINION", "cluster", "x", suppressible=True)(_check)
    book.rule("W-ANY", "cluster", "x", level=WARNING)(_check)
    book.rule("I-ANY", "cluster", "x", level=INFO)(_check)
    assert {r.id: r.suppressible for r in book.rules} == {
        "E-API": False,
        "E-OPINION": True,
        "W-ANY": True,
        "I-ANY": True,
    }


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="level: got 'informational'; allowed: error, warning, info"):
        RuleBook("t").rule("X", "cluster", "x", level="informational")
