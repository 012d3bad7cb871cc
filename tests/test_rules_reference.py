"""docs/rules.md is generated from the rule registry; the committed copy must be current."""

import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hyperpod_cdk.core.config import ClusterConfig, parse_model
from hyperpod_cdk.preflight import load
from hyperpod_cdk.rules import REGISTRY, RULE_MODULES, SECTIONS, ClusterView, Problem, Rule, all_rules
from hyperpod_cdk.rules.reference import reference
from hyperpod_cdk.rules.registry import modules_in_order, run

load()  # the reference lists the online rules too

ROOT = Path(__file__).resolve().parent.parent


def test_committed_rules_reference_is_current() -> None:
    committed = (ROOT / "docs" / "rules.md").read_text()
    assert committed == reference(), "run `make docs` and commit docs/rules.md"


def test_every_rule_is_documented_with_its_source() -> None:
    text = reference()
    for rule in all_rules():
        assert f"| `{rule.id}` |" in text
        assert rule.doc and rule.source, f"{rule.id} needs a docstring and a source"


def module_of(rule: Rule) -> str:
    """The :data:`RULE_MODULES` entry of the module that registered ``rule``."""
    module = rule.check.__module__
    return module if module.startswith("hyperpod_cdk.preflight.") else module.rpartition(".")[2]


def test_the_package_imports_each_listed_module_by_statement() -> None:
    """rules/__init__.py imports exactly RULE_MODULES, by import statements (no module imported by name)."""
    import ast

    tree = ast.parse((ROOT / "src" / "hyperpod_cdk" / "rules" / "__init__.py").read_text())
    imported = {
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "hyperpod_cdk.rules"
        for alias in node.names
    }
    assert imported == set(RULE_MODULES)


def test_preflight_registers_its_online_rules_after_the_offline_ones() -> None:
    order = modules_in_order()
    online = [m for m in order if m.startswith("hyperpod_cdk.preflight.")]
    assert order[: len(RULE_MODULES)] == [f"hyperpod_cdk.rules.{m}" for m in RULE_MODULES]
    assert order[len(RULE_MODULES) :] == online and len(online) == 6
    assert all("aws" in r.needs for r in REGISTRY.rules if r.check.__module__ in online)
    load()  # twice: nothing moves
    assert modules_in_order() == order


def test_report_order_is_the_listed_module_order_whatever_the_import_order(monkeypatch: pytest.MonkeyPatch) -> None:
    order = [m.rpartition(".")[2] if m.startswith("hyperpod_cdk.rules.") else m for m in modules_in_order()]
    assert {module_of(r) for r in all_rules()} == set(order)  # each known module registers rules
    # Registration follows import order; another import order (here: reversed) reports in the same module order.
    monkeypatch.setattr(REGISTRY, "rules", list(reversed(REGISTRY.rules)))
    positions = [order.index(module_of(r)) for r in all_rules()]
    assert positions == sorted(positions)
    bad = {
        "cluster_name": "-bad",
        "instance_groups": [{"name": "bad_name", "role": "compute", "count": 1, "instance_type": "ml.c5.large"}],
        "storage": {"storage_capacity_gib": 1},
        "lifecycle": {"bucket_name": "Bad_Bucket"},
    }
    reported = [module_of(rule_by_id(p.rule)) for p in run(ClusterView.of_config(parse_model(bad))) if p.rule]
    assert list(dict.fromkeys(reported)) == ["cluster", "groups", "storage", "lifecycle"]


def rule_by_id(id: str) -> Rule:
    return next(r for r in REGISTRY.rules if r.id == id)


def test_a_rule_from_an_unlisted_module_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def stray(view: ClusterView) -> list[Problem]:
        """A stray rule."""
        return []

    stray.__module__ = "hyperpod_cdk.rules.unlisted"
    monkeypatch.setattr(REGISTRY, "rules", [*REGISTRY.rules, Rule("STRAY", "cluster", "cluster_name", stray)])
    with pytest.raises(LookupError, match=r"rule STRAY is registered by hyperpod_cdk\.rules\.unlisted; list it"):
        all_rules()


def test_sections_are_the_config_nested_fields_in_their_order() -> None:
    """SECTIONS is ``cluster`` (the top-level scalars) then ClusterConfig's nested fields, in field order."""
    fields = ClusterConfig.model_fields
    assert SECTIONS[0] == "cluster"
    assert [name for name in fields if name in SECTIONS] == list(SECTIONS[1:])
    for name, info in fields.items():
        assert (name in SECTIONS) == nested(info.annotation), (
            f"ClusterConfig.{name} ({info.annotation}): a nested field is a section (list it in SECTIONS, "
            "rules/view.py); a scalar, an enum or a str -> str map belongs to the cluster section"
        )


def nested(annotation: Any) -> bool:
    """A pydantic model, a list of them, or a map to arbitrary values (``runtime``), optionally ``| None``; a list
    of plain values (``accept_unconfirmed``: rule ids) is a cluster-level scalar."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(nested(a) for a in args)
    origin = typing.get_origin(annotation)
    if origin is list:
        return args[0] not in (str, int, float, bool)
    if origin is dict:
        return args[1] is Any
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
