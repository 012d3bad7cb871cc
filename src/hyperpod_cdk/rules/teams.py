"""Rules on the teams (Slurm accounts, QOS, budgets): the runtime's own book, and what teams need from accounting.

The runtime's rules (``training_runtime.teams.TEAM_RULES``) are registered here, so the config is checked with the
code the controller uses; the users they name come from the config's ``users``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperpod_cdk.core.accounting import slurmdbd_owner
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.params import SLURMDBD_BY_HYPERPOD
from training_runtime.problems import Problem
from training_runtime.teams import TEAM_RULES, teams_problems

rule = REGISTRY.rule


def _user_names(view: ClusterView) -> list[str]:
    return [u["name"] for u in view.users if isinstance(u, dict) and isinstance(u.get("name"), str)]


def _register_book() -> None:
    for book_rule in TEAM_RULES.rules:

        def check(view: ClusterView, _id: str = book_rule.id) -> list[Problem]:
            found = teams_problems(list(view.teams), view.enforce_accounts, _user_names(view), view.path("teams"))
            return [p for p in found if p.rule == _id]

        check.__doc__ = book_rule.doc
        rule(book_rule.id, "teams", book_rule.field, level=book_rule.level, needs=("users",), source=book_rule.source)(
            check
        )


_register_book()


@rule(
    "TEAM-ACCOUNTING",
    "teams",
    "teams",
    needs=("runtime", "cluster"),
    source="sacctmgr(1) (accounts live in slurmdbd's database); slurm.conf(5) AccountingStorageEnforce",
)
def teams_need_accounting(view: ClusterView) -> Iterator[Problem]:
    """Teams and enforce_accounts need the runtime's Slurm accounting (runtime.accounting.enabled), which applies
    them and renders the enforcement settings."""
    if not view.teams and view.enforce_accounts is not True:
        return
    options = view.runtime_options
    if options is None:
        return
    accounting: Any = options.accounting
    if not accounting.enabled:
        yield Problem(
            view.path("teams"),
            "teams are Slurm accounts, which live in the accounting database; runtime.accounting is off",
            got=[t.get("name") for t in view.teams if isinstance(t, dict)],
            fix="set runtime.accounting.enabled: true, or remove teams and enforce_accounts",
        )
    elif slurmdbd_owner(view.mode, view.node_provisioning_mode, accounting) == SLURMDBD_BY_HYPERPOD:
        yield Problem(
            view.path("teams"),
            "with the external accounting database in API-driven mode HyperPod writes the accounting settings, "
            "so the runtime cannot render AccountingStorageEnforce and the budget settings there",
            got=[t.get("name") for t in view.teams if isinstance(t, dict)],
            fix="use the local accounting database, or lifecycle-driven mode, for teams",
        )
