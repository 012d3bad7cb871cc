"""Every rule the configuration decides, in one registry (no aws_cdk import).

``hyperpod-cdk validate``, ``ClusterConfig.warnings_if_valid()`` and the constructs run the same rules: the config
through a :class:`ClusterView` of the whole file, each construct through a view of its own props, with
CDK tokens skipped (the construct injects ``Token.is_unresolved``; a YAML file never holds tokens).
``docs/rules.md`` is generated from this registry (``python -m hyperpod_cdk.rules``).
"""

from __future__ import annotations

import importlib

from hyperpod_cdk.rules.registry import REGISTRY, RULE_MODULES, SECTIONS, all_rules, judge, module_name, run
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import ERROR, INFO, WARNING, Problem, Rule, errors, infos, warnings

for _module in RULE_MODULES:  # importing a rule module registers its rules (report order: RULE_MODULES)
    importlib.import_module(module_name(_module))


def check(view: ClusterView) -> list[Problem]:
    """Every problem the rules find in ``view`` (errors, warnings and infos, in registry order), less what its
    suppressions silence (:func:`judge` gives those too)."""
    return run(view)


__all__ = [
    "ERROR",
    "INFO",
    "REGISTRY",
    "RULE_MODULES",
    "SECTIONS",
    "WARNING",
    "ClusterView",
    "Problem",
    "Rule",
    "all_rules",
    "check",
    "errors",
    "infos",
    "judge",
    "warnings",
]
