"""Suppressions: the rules a config (``suppress:``) or a construct (``suppress=``) silences, each with a reason, as
ParallelCluster's ``--suppress-validators`` does but per rule and recorded in the template.

A suppressed rule still runs: ``validate`` lists its findings as suppressed, with the reason (``--json``,
``--show-suppressed``), and the cluster resource's metadata records every suppression
(``hyperpod-cdk: {suppressed: [{rule, reason}]}``) next to cfn-lint's own ignore list for the rule's cfn-lint rule
(``cfn-lint: {config: {ignore_checks: [...]}}``), as the cdk-nag and checkov reasons are recorded. Only a
suppressible rule is silenced (:attr:`training_runtime.problems.Rule.suppressible`: warnings and infos; an error
the AWS API would raise never). ``accept_unconfirmed`` is the former form: each rule it lists is a suppression with
:data:`ACCEPTED_REASON`. No aws_cdk import (``validate`` uses it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_cdk.aws_data.api_support import cfn_lint_rules_of, row_of_rule, unconfirmed_rules
from training_runtime.problems import ERROR, Problem, Rule

ACCEPTED_REASON = "checked: unconfirmed Slurm support accepted"
"""The reason of a rule listed under the former ``accept_unconfirmed``."""
METADATA_KEY = "hyperpod-cdk"
"""The cluster resource's metadata key that lists the suppressions."""


@dataclass(frozen=True)
class Suppression:
    """One rule silenced, and why."""

    rule: str
    reason: str

    @classmethod
    def of(cls, value: Suppression | Mapping[str, Any] | Any) -> Suppression:
        """A suppression from itself, a mapping ``{rule, reason}`` or anything with those attributes (the config's)."""
        if isinstance(value, Suppression):
            return value
        if isinstance(value, Mapping):
            return cls(str(value.get("rule", "")), str(value.get("reason", "")))
        return cls(str(value.rule), str(value.reason))

    def as_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "reason": self.reason}


@dataclass(frozen=True)
class Suppressed:
    """A finding of a suppressed rule: reported only as suppressed, with the reason."""

    problem: Problem
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.problem.as_dict(), "suppressed": self.reason}


def merged(suppress: Iterable[Any], accepted: Iterable[str]) -> tuple[Suppression, ...]:
    """``suppress``'s entries, then the rules of ``accept_unconfirmed`` that it may list (the unconfirmed rows';
    CL-ACCEPT-UNCONFIRMED refuses the others) with :data:`ACCEPTED_REASON`. A rule listed in both keeps the first."""
    listed = [Suppression.of(s) for s in suppress]
    named = {s.rule for s in listed}
    accepted = set(accepted) & unconfirmed_rules()
    listed += [Suppression(r, ACCEPTED_REASON) for r in sorted(accepted) if r not in named]
    return tuple(listed)


def silenced(suppressions: Iterable[Suppression], rules: Iterable[Rule]) -> dict[str, str]:
    """Rule id to reason, for the suppressions that take effect: a registered, suppressible rule and a reason."""
    allowed = {r.id for r in rules if r.suppressible}
    quiet: dict[str, str] = {}
    for suppression in suppressions:
        if suppression.rule in allowed and suppression.reason.strip():
            quiet.setdefault(suppression.rule, suppression.reason)
    return quiet


def why_not_suppressible(rule: Rule) -> str:
    """Why ``rule`` cannot be suppressed (for CL-SUPPRESS's message)."""
    row = row_of_rule(rule.id)
    if row is not None and row.level == ERROR:
        return (
            f"{rule.id} is an error the HyperPod API raises (data/api_support.yaml row {row.id}: {row.source}); "
            "suppressing it would only move the failure to deployment"
        )
    return (
        f"{rule.id} is an error (source: {rule.source or 'none given'}), and an error is suppressible only when "
        "it is marked as hyperpod-cdk's own opinion rather than a constraint of AWS or Slurm; this one is not"
    )


def template_metadata(quiet: Mapping[str, str]) -> dict[str, Any]:
    """The cluster resource's metadata for the effective suppressions ``quiet`` (rule id to reason): our list,
    and cfn-lint's ignore list of their cfn-lint rules (none when no suppressed rule has one)."""
    if not quiet:
        return {}
    metadata: dict[str, Any] = {
        METADATA_KEY: {"suppressed": [{"rule": rule, "reason": reason} for rule, reason in sorted(quiet.items())]}
    }
    skipped = cfn_lint_rules_of(quiet)
    if skipped:
        metadata["cfn-lint"] = {"config": {"ignore_checks": skipped}}
    return metadata
