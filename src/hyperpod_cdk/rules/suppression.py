"""Rules on ``suppress`` (and its former form, ``accept_unconfirmed``): a suppression names a rule that exists and
may be suppressed, says why, and has something to silence (:mod:`hyperpod_cdk.core.suppress`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from hyperpod_cdk.core.suppress import ACCEPTED_REASON, why_not_suppressible
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import FACTS, ClusterView
from training_runtime.problems import INFO, Problem

OURS = "hyperpod-cdk (docs/rules.md, Levels and suppression)"
UNUSED = "CL-SUPPRESS-UNUSED"


@REGISTRY.rule("CL-SUPPRESS", "suppress", "suppress[*]", source=OURS)
def suppress_entries(view: ClusterView) -> Iterator[Problem]:
    """suppress names registered rules that may be suppressed (not an error the AWS API raises), each with a reason."""
    rules = {r.id: r for r in REGISTRY.rules}
    for index, suppression in enumerate(view.suppress):
        where = view.path("suppress", f"[{index}]")
        rule = rules.get(suppression.rule)
        if rule is None:
            close = difflib.get_close_matches(suppression.rule.upper(), sorted(rules), n=3, cutoff=0.6)
            yield Problem(
                f"{where}.rule",
                "no rule has this id" + (f" (close: {', '.join(close)})" if close else ""),
                got=suppression.rule,
                fix="use an id from docs/rules.md (or `hyperpod-cdk validate --json`'s rule field)",
            )
        elif not rule.suppressible:
            yield Problem(
                f"{where}.rule",
                f"cannot be suppressed: {why_not_suppressible(rule)}",
                got=suppression.rule,
                fix="fix the config instead, and remove this entry",
            )
        if not suppression.reason.strip():
            yield Problem(
                f"{where}.reason",
                "a suppression says why the finding does not apply (it is written into the template's metadata)",
                got=suppression.reason,
                fix=f'give a reason, e.g. reason: "{ACCEPTED_REASON}"',
            )


@REGISTRY.rule(UNUSED, "suppress", "suppress[*].rule", level=INFO, source=OURS)
def suppress_unused(view: ClusterView) -> Iterator[Problem]:
    """A suppressed rule finds something in this config; otherwise the suppression has no effect (informational)."""
    rules = {r.id: r for r in REGISTRY.rules}
    for index, suppression in enumerate(view.suppress):
        rule = rules.get(suppression.rule)
        if rule is None or not rule.suppressible or rule.id == UNUSED:
            continue
        if not {rule.section, *(n for n in rule.needs if n not in FACTS)} <= view.sections:
            continue  # not judged here (e.g. an online rule offline): nothing to say
        if not any(True for _ in rule.check(view)):
            yield Problem(
                view.path("suppress", f"[{index}].rule"),
                "the rule finds nothing in this config, so the suppression silences nothing",
                got=suppression.rule,
                fix="remove the entry, or keep it if a coming change needs it",
            )


@REGISTRY.rule("CL-ACCEPT-UNCONFIRMED-FORM", "cluster", "accept_unconfirmed", level=INFO, source=OURS)
def accept_unconfirmed_form(view: ClusterView) -> Iterator[Problem]:
    """accept_unconfirmed is the former form of suppress (informational; it keeps working)."""
    if view.accepted:
        entries = ", ".join(f'{{rule: {r}, reason: "{ACCEPTED_REASON}"}}' for r in view.accepted)
        yield Problem(
            view.path("cluster", "accept_unconfirmed"),
            "accept_unconfirmed is the former form of suppress; each rule it lists is suppressed with the reason "
            f"{ACCEPTED_REASON!r}",
            got=list(view.accepted),
            fix=f"write suppress: [{entries}] instead (with your own reason)",
        )
