"""Runs the online rules against an account, concurrently (one thread per rule; look-ups are shared)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hyperpod_cdk.core.suppress import silenced
from hyperpod_cdk.preflight.account import Account, Unchecked
from hyperpod_cdk.preflight.online import AWS, online_rules, unchecked
from hyperpod_cdk.rules.view import FACTS, ClusterView
from training_runtime.problems import WARNING, Problem

WORKERS = 16
"""Threads: look-ups wait on the network, and botocore's adaptive mode paces throttled APIs."""


def online_view(view: ClusterView, account: Account) -> ClusterView:
    """``view`` with the account: the online rules' section ``aws`` present."""
    return dataclasses.replace(view, sections=view.sections | {AWS}, account=account)


def run_rule(rule: Any, view: ClusterView) -> list[Problem]:
    """One rule's problems, tagged; a failure the rule did not guard becomes a warning at the rule's field."""
    assert view.account is not None
    view.account.acting_for(rule.id)
    found: list[Problem] = []
    try:
        for problem in rule.check(view):
            found.append(problem)
    except Unchecked as error:
        found.append(unchecked(rule.field, error))
    except Exception as error:  # a rule's bug or an answer it did not expect: report it, never crash
        found.append(
            Problem(
                rule.field,
                f"could not be checked: {type(error).__name__}: {error}",
                fix="report this to hyperpod-cdk",
                level=WARNING,
            )
        )
    return [p.tagged(rule.id, WARNING if p.level == WARNING else rule.level) for p in found]


def run_online(view: ClusterView, account: Account, rules: Sequence[Any] | None = None) -> list[Problem]:
    """Every online rule whose sections ``view`` has and that the config does not suppress, run concurrently;
    problems in registry order."""
    view = online_view(view, account)
    candidates = online_rules() if rules is None else rules
    quiet = silenced(view.suppressions, candidates)
    chosen = [
        r
        for r in candidates
        if {r.section, *(n for n in r.needs if n not in FACTS)} <= view.sections and r.id not in quiet
    ]
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="preflight") as pool:
        results = list(pool.map(lambda rule: run_rule(rule, view), chosen))
    return [problem for found in results for problem in found]
