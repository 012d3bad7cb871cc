"""The registry: the construct-side rule book plus the node runtime's books (options, users, groups)."""

from __future__ import annotations

from hyperpod_cdk.core.suppress import Suppressed, silenced
from hyperpod_cdk.rules.view import FACTS, ClusterView
from hyperpod_cdk.rules.view import SECTIONS as SECTIONS  # re-exported: the rule modules import it from here
from training_runtime.problems import ERROR, Problem, Rule, RuleBook

RULE_MODULES = (
    "cluster",
    "groups",
    "hardware",
    "storage",
    "repositories",
    "lifecycle",
    "network",
    "observability",
    "organization",
    "parameters",
    "runtime",
    "teams",
    "directory",
    # The rules on the HyperPod API's newer group settings, after the rules they build on.
    "accounting",
    "capacity",
    "flexible",
    "group_network",
    "images",
    "multihead",
    "openzfs",
    "slurm_api",
    "suppression",
    "volumes",
    "scaling",
    "cost",
    "rest_api",
    "login_pool",
    # The rules AWS's pages on the network state (the inventory, data/aws_inventory).
    "aws_infra",
    "updates",
    # The rules from AWS's provisioning, Slurm-configuration and resiliency pages (data/aws_inventory).
    "aws_provisioning",
    # The principles: AWS's rules over the field map's classes (data/fields.yaml), after the rules on one field.
    "principles",
    # The whole CreateCluster (and UpdateCluster) request against the SageMaker API model, after the rules that
    # explain a value better.
    "api_model",
)
"""The offline rule modules (``hyperpod_cdk.rules.<name>``), in report order: the package imports each by a plain
import statement (``rules/__init__.py``), which registers its rules. Problems are reported, and docs/rules.md lists
rules, in this order, then in each module's own order. A new rule module is imported there and named here (a test
holds the two to each other). The online rules come after them: :func:`hyperpod_cdk.preflight.load` registers
its own modules with :func:`register_modules` (the rules never import ``preflight``)."""


def module_name(entry: str) -> str:
    """The importable name of a :data:`RULE_MODULES` entry."""
    return entry if "." in entry else f"hyperpod_cdk.rules.{entry}"


_POSITIONS = {module_name(entry): index for index, entry in enumerate(RULE_MODULES)}


def register_modules(names: tuple[str, ...]) -> None:
    """Put the rule modules ``names`` (full names, already imported: they registered their rules) after every module
    known so far in report order; a module already known keeps its place (loading twice changes nothing)."""
    for name in names:
        _POSITIONS.setdefault(name, len(_POSITIONS))


def modules_in_order() -> list[str]:
    """Every rule module known to the registry, in report order."""
    return sorted(_POSITIONS, key=_POSITIONS.__getitem__)


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


BACKSTOPS = frozenset({"API-MODEL"})
"""Rules that back the others up: they report a field only where no rule before them has an error at it, above it or
below it (the API model's words are less helpful than the specific rule's, and one fault is reported once)."""


EVERY_VIEW = frozenset({"PRINCIPLE-REGION"})
"""Rules over the field map's classes that run on every view, whatever sections it has: each reads only the sections
the view has (a construct's props: ClusterNetwork's zone, HyperPodCluster's groups), so no view escapes them."""


def _covered(path: str, judged: set[str]) -> bool:
    return any(
        path == p or path.startswith((p + ".", p + "[")) or p.startswith((path + ".", path + "[")) for p in judged
    )


def run(view: ClusterView) -> list[Problem]:
    """Every problem the rules find in ``view`` that no suppression silences."""
    return judge(view)[0]


def judge(view: ClusterView) -> tuple[list[Problem], list[Suppressed]]:
    """Every problem, and apart from them the findings of the rules ``view`` suppresses (each with its reason):
    a suppressed rule still runs, so ``validate`` can show what it silenced."""
    quiet = silenced(view.suppressions, REGISTRY.rules)
    found: list[Problem] = []
    hidden: list[Suppressed] = []
    for rule in all_rules():
        wanted = {rule.section, *(n for n in rule.needs if n not in FACTS)}
        if not wanted <= view.sections and rule.id not in EVERY_VIEW:
            continue
        judged = {p.path for p in found if p.level == ERROR} if rule.id in BACKSTOPS else set()
        for problem in rule.check(view):
            problem = problem if isinstance(problem, Problem) else Problem.from_text(problem)
            if judged and _covered(problem.path, judged):
                continue
            problem = problem.tagged(rule.id, rule.level)
            if rule.id in quiet:
                hidden.append(Suppressed(problem, quiet[rule.id]))
            else:
                found.append(problem)
    return found, hidden


def rule_doc(id: str) -> str:
    """The one-line documentation of rule ``id`` (a template parameter's description states its rule)."""
    return next(r.doc for r in REGISTRY.rules if r.id == id)
