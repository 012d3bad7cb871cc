"""The registry: the construct-side rule book plus the node runtime's books (options, users, groups)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from training_runtime.problems import Problem, Rule, RuleBook

if TYPE_CHECKING:
    from hyperpod_cdk.rules.view import ClusterView

SECTIONS = (
    "cluster",
    "instance_groups",
    "network",
    "storage",
    "storage_openzfs",
    "lifecycle",
    "runtime",
    "users",
    "parameters",
    "organization",
    "observability",
)
"""The config file's sections, in the order the reference lists them."""
FACTS = ("hardware", "region")
"""What a rule may need besides sections: the instance catalogue (always there) and the Region (optional)."""

REGISTRY = RuleBook("hyperpod-cdk")
"""Rules that take a :class:`ClusterView`."""


def all_rules() -> list[Rule]:
    return list(REGISTRY.rules)


def run(view: ClusterView) -> list[Problem]:
    from hyperpod_cdk.api_support import unconfirmed_rules

    found: list[Problem] = []
    accepted = set(view.accepted) & unconfirmed_rules()
    for rule in REGISTRY.rules:
        if rule.id in accepted:
            continue
        wanted = {rule.section, *(n for n in rule.needs if n not in FACTS)}
        if not wanted <= view.sections:
            continue
        for problem in rule.check(view):
            problem = problem if isinstance(problem, Problem) else Problem.from_text(problem)
            found.append(problem.tagged(rule.id, rule.level))
    return found


def rule_doc(id: str) -> str:
    """The one-line documentation of rule ``id`` (a template parameter's description states its rule)."""
    return next(r.doc for r in REGISTRY.rules if r.id == id)
