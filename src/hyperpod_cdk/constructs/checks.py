"""How a construct runs the rules on its own props: CDK tokens are skipped, paths name the props."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Annotations, Stack, Token
from constructs import Construct

from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.preflight import load as load_online_rules
from hyperpod_cdk.rules import ClusterView, check
from training_runtime.problems import errors, infos, warnings


def check_props(
    construct: Construct,
    subject: str,
    sections: set[str],
    *,
    also: Sequence[str] = (),
    instead_of: Sequence[str] = (),
    **fields: Any,
) -> None:
    """Run every rule on ``sections`` of the construct's props: raise on errors (with ``also``, the
    construct's own problems with its props, which replace the rules named in ``instead_of``), annotate
    warnings and infos."""
    fields.setdefault("region", stack_region(construct))
    load_online_rules()  # not run (no account here), but a suppression may name one
    view = ClusterView(sections=frozenset(sections), is_unresolved=Token.is_unresolved, **fields)
    found = [p for p in check(view) if p.rule not in instead_of]
    raise_if_any(f"{subject} {construct.node.path}", [*also, *errors(found)])
    for warning in warnings(found):
        Annotations.of(construct).add_warning_v2(f"hyperpod-cdk:{warning.rule}", str(warning))
    for info in infos(found):
        Annotations.of(construct).add_info(f"{info} [hyperpod-cdk:{info.rule}]")


def stack_region(construct: Construct) -> str | None:
    """The construct's Region when the stack names one; None for an environment-agnostic stack."""
    region = Stack.of(construct).region
    return None if Token.is_unresolved(region) else region
