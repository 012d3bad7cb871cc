"""Every rule the configuration decides, in one registry (no aws_cdk import).

``hyperpod-cdk validate``, ``ClusterConfig.warnings_if_valid()`` and the constructs run the same rules: the config
through a :class:`ClusterView` of the whole file, each construct through a view of its own props, with
CDK tokens skipped (the construct injects ``Token.is_unresolved``; a YAML file never holds tokens).
``docs/rules.md`` is generated from this registry (``python -m hyperpod_cdk.rules``).
"""

from __future__ import annotations

# Importing a rule module registers its rules; the report order is RULE_MODULES' (tests/test_rules_reference.py holds
# these imports and that list to each other). The online rules are preflight's: hyperpod_cdk.preflight.load().
from hyperpod_cdk.rules import (  # noqa: F401
    accounting,
    api_model,
    aws_infra,
    aws_provisioning,
    capacity,
    cluster,
    cost,
    directory,
    flexible,
    group_network,
    groups,
    hardware,
    images,
    lifecycle,
    login_pool,
    multihead,
    network,
    observability,
    openzfs,
    organization,
    parameters,
    principles,
    repositories,
    rest_api,
    runtime,
    scaling,
    slurm_api,
    storage,
    suppression,
    teams,
    updates,
    volumes,
)
from hyperpod_cdk.rules.registry import REGISTRY, RULE_MODULES, SECTIONS, all_rules, judge, run
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import ERROR, INFO, WARNING, Problem, Rule, errors, infos, warnings


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
