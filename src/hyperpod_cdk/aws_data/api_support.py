"""The HyperPod API support table (``data/api_support.yaml``): what the SageMaker API accepts on a Slurm cluster for
each setting and combination hyperpod-cdk emits, with its AWS source, how sure we are and when it was checked.

One definition: the config rules take their level and source from their row (:func:`api_rule`), the cfn-lint rules
(:mod:`hyperpod_cdk.cfnlint_rules`) their level, message and source URL, and ``docs/rules.md`` prints the table.
No aws_cdk import (``hyperpod-cdk validate`` and cfn-lint load it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from training_runtime.problems import ERROR, LEVEL_LETTERS, LEVELS, WARNING, Problem

SLURM_SUPPORT = ("yes", "no", "unconfirmed")
CONFIDENCE = ("documented", "documented-eks-only", "inferred", "third-party-summary")
CONFIDENCE_TEXT = {
    "documented": "documented",
    "documented-eks-only": "documented for EKS only",
    "inferred": "inferred",
    "third-party-summary": "third-party summary",
}
SCOPES = ("continuous-only", "eks-only")
"""What a row may say its member needs (``scope``): continuous node provisioning, or an EKS cluster. The rule of such a
row judges every field the field map (data/fields.yaml) sends to its member (:func:`hyperpod_cdk.rules.field_values.
member_values`), whatever field sets it."""
CFN_LINT_LEVELS = {letter: level for level, letter in LEVEL_LETTERS.items()}
"""cfn-lint's rule-id letter to our level (E error, W warning, I info): ``training_runtime.problems.LEVEL_LETTERS``
read backwards, so a row's config rule and its cfn-lint rule cannot disagree."""
NO_CFN_LINT_RULE = "-"
"""A row cfn-lint cannot judge: it compares with the deployed config (``validate --previous``)."""
OWN_CFN_LINT_RULE = "9"
"""Our cfn-lint rule ids are E9xxx/W9xxx/I9xxx; any other id names a built-in cfn-lint rule that covers the row."""


@dataclass(frozen=True)
class SupportRow:
    """One property or combination rule of the HyperPod API, as AWS documents it for Slurm."""

    id: str
    setting: str
    """The API property (``property`` in the file) or the combination the row is about."""
    slurm: str
    """yes, no or unconfirmed: whether a Slurm cluster takes it (or, for a combination, whether it is allowed)."""
    constraint: str
    source: str
    """The AWS page or API reference that states it."""
    confidence: str
    checked: str
    """The date the source was last read (YYYY-MM-DD)."""
    level: str
    """The config rule's level."""
    rule: str | None
    """The config rule (docs/rules.md), or None when ``emitted`` says how the construct complies instead."""
    cfn_lint: str
    emitted: str = ""
    check: str = ""
    """What to check before relying on an unconfirmed setting."""
    aws: tuple[str, ...] = ()
    """The AWS inventory rows (``data/aws_inventory``) whose quotes the row rests on."""
    scope: str = ""
    """continuous-only or eks-only: the member is accepted only with continuous provisioning, or only on EKS
    (:data:`SCOPES`); empty for another row."""
    refusal: str = ""
    """For a scoped row whose rule no module writes: what its rule says of a field that sets the member (the rule is
    registered from the row, :mod:`hyperpod_cdk.rules.principles`), so a new member's rule is data."""

    @property
    def member(self) -> str:
        """The API member the row is about: the first of its ``property`` (``InstanceGroups[].MinInstanceCount``)."""
        return self.setting.split(",")[0].split(" ")[0].strip()

    @property
    def unconfirmed(self) -> bool:
        return self.slurm == "unconfirmed"

    @property
    def own_cfn_lint_rule(self) -> bool:
        return self.cfn_lint[1:2] == OWN_CFN_LINT_RULE

    @property
    def cited(self) -> str:
        """The source as a rule cites it: the page, how sure, when read."""
        return f"{self.source} ({CONFIDENCE_TEXT[self.confidence]}, checked {self.checked})"

    def unconfirmed_note(self) -> str:
        """What an unconfirmed setting's warning adds: the source and what to check before relying on it."""
        return (
            f"Slurm support is unconfirmed ({CONFIDENCE_TEXT[self.confidence]}: {self.source}); before relying on "
            f"it, check {self.check}"
        )


def _row(entry: dict[str, Any]) -> SupportRow:
    row = SupportRow(
        id=entry["id"],
        setting=entry["property"],
        slurm=str(entry["slurm"]),
        constraint=entry["constraint"],
        source=entry["source"],
        confidence=entry["confidence"],
        checked=str(entry["checked"]),
        level=entry["level"],
        rule=entry.get("rule"),
        cfn_lint=entry["cfn_lint"],
        emitted=entry.get("emitted", ""),
        check=entry.get("check", ""),
        aws=tuple(entry.get("aws", ())),
        scope=entry.get("scope", ""),
        refusal=entry.get("refusal", ""),
    )
    problems = list(row_problems(row))
    if problems:
        raise ValueError(f"data/api_support.yaml row {row.id}: " + "; ".join(problems))
    return row


def row_problems(row: SupportRow) -> Iterable[str]:
    """What makes a row unusable: an unknown value, a missing source, an unconfirmed row that errors."""
    if row.slurm not in SLURM_SUPPORT:
        yield f"slurm {row.slurm!r} is not one of {', '.join(SLURM_SUPPORT)}"
    if row.confidence not in CONFIDENCE:
        yield f"confidence {row.confidence!r} is not one of {', '.join(CONFIDENCE)}"
    if row.scope and row.scope not in SCOPES:
        yield f"scope {row.scope!r} is not one of {', '.join(SCOPES)}"
    if row.level not in LEVELS:
        yield f"level {row.level!r} is not one of {', '.join(LEVELS)}"
    if not row.source.startswith("https://docs.aws.amazon.com/"):
        yield "source is not an AWS documentation URL"
    if row.unconfirmed and (row.level != WARNING or not row.check or not row.cfn_lint.startswith("W")):
        yield "an unconfirmed row warns (level warning, a W cfn-lint rule) and says what to check"
    if row.refusal and not (row.scope and row.rule):
        yield "a row whose rule is registered from it (refusal) has a scope and a rule id"
    if row.rule is None and not row.emitted:
        yield "a row without a config rule says how the template complies (emitted)"
    if row.cfn_lint != NO_CFN_LINT_RULE and row.cfn_lint[:1] not in CFN_LINT_LEVELS:
        yield f"cfn_lint {row.cfn_lint!r} is not a cfn-lint rule id (or {NO_CFN_LINT_RULE!r})"
    elif row.own_cfn_lint_rule and CFN_LINT_LEVELS[row.cfn_lint[:1]] != row.level:
        yield (
            f"cfn_lint {row.cfn_lint} is {CFN_LINT_LEVELS[row.cfn_lint[:1]]}-level but the row's level is {row.level}: "
            f"give the cfn-lint rule the letter {LEVEL_LETTERS.get(row.level, '?')} (one level per row)"
        )


@cache
def support_table() -> tuple[SupportRow, ...]:
    """Every row, in the file's order."""
    text = resources.files("hyperpod_cdk").joinpath("data/api_support.yaml").read_text()
    rows = tuple(_row(entry) for entry in yaml.safe_load(text))
    ids = [r.id for r in rows]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"data/api_support.yaml: rows listed twice: {', '.join(repeated)}")
    return rows


def support_row(id: str) -> SupportRow:
    """The row ``id`` (a KeyError names the missing row)."""
    for row in support_table():
        if row.id == id:
            return row
    raise KeyError(f"data/api_support.yaml has no row {id!r}")


def row_of_rule(rule_id: str) -> SupportRow | None:
    """The row whose config rule is ``rule_id``, if any."""
    return next((r for r in support_table() if r.rule == rule_id), None)


def unconfirmed_rules() -> frozenset[str]:
    """The config rules of unconfirmed rows: the only warnings ``accept_unconfirmed`` may silence."""
    return frozenset(r.rule for r in support_table() if r.unconfirmed and r.rule is not None)


def cfn_lint_rules_of(rule_ids: Iterable[str]) -> list[str]:
    """Our cfn-lint rules (``E9…``/``W9…``/``I9…``) of the rows whose config rule is one of ``rule_ids``: what the
    cluster's ``cfn-lint`` metadata tells cfn-lint to skip when the config suppresses those rules."""
    wanted = set(rule_ids)
    return sorted({r.cfn_lint for r in support_table() if r.rule in wanted and r.own_cfn_lint_rule})


def accepted_cfn_lint_rules(accepted: Iterable[str]) -> list[str]:
    """The cfn-lint rules of the accepted unconfirmed rules (the former ``accept_unconfirmed`` alone)."""
    return cfn_lint_rules_of(set(accepted) & unconfirmed_rules())


def api_rule(
    register: Callable[..., Callable[[Any], Any]], row_id: str, section: str, field: str, needs: tuple[str, ...] = ()
) -> Callable[[Any], Any]:
    """Register a rule whose id, level and source come from its support-table row (``register`` is a
    ``RuleBook.rule``). An unconfirmed row's problems say what to check before relying on the setting."""
    row = support_row(row_id)
    assert row.rule is not None, f"row {row_id} has no config rule"

    def decorate(check: Callable[..., Iterable[Problem]]) -> Callable[..., Iterable[Problem]]:
        if row.unconfirmed:
            inner = check

            def noted(view: Any) -> Iterable[Problem]:
                for problem in inner(view):
                    yield Problem(
                        problem.path,
                        f"{problem.expected}. {row.unconfirmed_note()}",
                        fix=problem.fix,
                        **({"got": problem.got} if problem.got is not None else {}),
                    )

            noted.__doc__ = check.__doc__
            noted.__name__ = check.__name__
            noted.__module__ = check.__module__  # the rule's report order is its module's (rules.RULE_MODULES)
            register(row.rule, section, field, needs=needs, level=row.level, source=row.cited)(noted)
            return check
        registered: Callable[..., Iterable[Problem]] = register(
            row.rule, section, field, needs=needs, level=row.level, source=row.cited
        )(check)
        return registered

    return decorate


__all__ = [
    "CONFIDENCE",
    "CONFIDENCE_TEXT",
    "ERROR",
    "SCOPES",
    "SLURM_SUPPORT",
    "SupportRow",
    "accepted_cfn_lint_rules",
    "api_rule",
    "cfn_lint_rules_of",
    "row_of_rule",
    "support_row",
    "support_table",
    "unconfirmed_rules",
]
