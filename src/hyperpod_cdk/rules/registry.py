"""The registry: the construct-side rule book plus the node runtime's books (options, users, groups)."""

from __future__ import annotations

from hyperpod_cdk.rules.view import FACTS, ClusterView
from hyperpod_cdk.rules.view import SECTIONS as SECTIONS  # re-exported: the rule modules import it from here
from training_runtime.problems import Problem, Rule, RuleBook

RULE_MODULES = (
    "cluster",
    "groups",
    "storage",
    "repositories",
    "lifecycle",
    "network",
    "observability",
    "organization",
    "parameters",
    "runtime",
    # The rules on the HyperPod API's newer group settings, after the rules they build on.
    "accounting",
    "capacity",
    "flexible",
    "group_network",
    "images",
    "multihead",
    "openzfs",
    "slurm_api",
    "volumes",
    "scaling",
    "updates",
    # The rules from AWS's provisioning, Slurm-configuration and resiliency pages (data/aws_inventory).
    "aws_provisioning",
    # The online rules (needs aws): only `hyperpod-cdk preflight` / `validate --online` run them; no boto3 import.
    "hyperpod_cdk.preflight.checks_access",
    "hyperpod_cdk.preflight.checks_capacity",
    "hyperpod_cdk.preflight.checks_network",
    "hyperpod_cdk.preflight.checks_scaling",
    "hyperpod_cdk.preflight.checks_storage",
)
"""The rule modules (``hyperpod_cdk.rules.<name>``, or a dotted module name): the package imports each, which
registers its rules. Problems are reported, and docs/rules.md lists rules, in this order, then in each module's
own order: explicit here, whatever order the modules happen to be imported in. A new rule module is added here."""


def module_name(entry: str) -> str:
    """The importable name of a :data:`RULE_MODULES` entry."""
    return entry if "." in entry else f"hyperpod_cdk.rules.{entry}"


_POSITIONS = {module_name(entry): index for index, entry in enumerate(RULE_MODULES)}

REGISTRY = RuleBook("hyperpod-cdk")
"""Rules that take a :class:`ClusterView`."""


def report_position(rule: Rule) -> int:
    """Where ``rule``'s module stands in :data:`RULE_MODULES` (a rule from an unlisted module is a bug)."""
    position = _POSITIONS.get(rule.check.__module__)
    if position is None:
        raise LookupError(f"rule {rule.id} is registered by {rule.check.__module__}; list it in RULE_MODULES")
    return position


def all_rules() -> list[Rule]:
    """Every registered rule in report order: by :data:`RULE_MODULES`, then as each module defines them."""
    return sorted(REGISTRY.rules, key=report_position)


def run(view: ClusterView) -> list[Problem]:
    from hyperpod_cdk.api_support import unconfirmed_rules

    found: list[Problem] = []
    accepted = set(view.accepted) & unconfirmed_rules()
    for rule in all_rules():
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
