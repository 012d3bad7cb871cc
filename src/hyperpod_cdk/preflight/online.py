"""How a preflight rule is declared: a registry rule that needs ``aws`` plus the IAM actions it calls.

Offline, ``registry.run`` skips every rule that needs ``aws`` (no view has that section). ``hyperpod-cdk preflight``
gives the view an :class:`~hyperpod_cdk.preflight.account.Account` and runs these rules concurrently
(:mod:`hyperpod_cdk.preflight.runner`). The least-privilege policy a preflight role needs is the union of the
actions declared here (:func:`policy`); a test holds each rule to the actions it declared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.rules.registry import REGISTRY
from training_runtime.problems import ERROR, WARNING, Problem

if TYPE_CHECKING:
    from hyperpod_cdk.preflight.account import Account, Unchecked
    from hyperpod_cdk.rules.view import ClusterView

AWS = "aws"
"""The need that marks a rule as online (the account's answers)."""

ACTIONS: dict[str, tuple[str, ...]] = {}
"""Rule id -> the IAM actions its look-ups call (read-only)."""

POLICY_FIX = "allow it to the identity running preflight (`hyperpod-cdk preflight --policy` prints the whole policy)"


def online_rule(
    id: str,
    section: str,
    field: str,
    actions: tuple[str, ...],
    source: str,
    needs: tuple[str, ...] = (),
    level: str = ERROR,
) -> Callable[[Callable[..., Iterable[Problem]]], Callable[..., Iterable[Problem]]]:
    """Register a rule that reads the account: ``needs`` gains ``aws``; ``actions`` are recorded for the policy."""

    def register(check: Callable[..., Iterable[Problem]]) -> Callable[..., Iterable[Problem]]:
        ACTIONS[id] = tuple(actions)
        return REGISTRY.rule(id, section, field, needs=(AWS, *needs), level=level, source=source)(check)

    return register


def online_rules() -> list[Any]:
    """Every online rule (loaded first: :func:`hyperpod_cdk.preflight.load`)."""
    from hyperpod_cdk.preflight import load

    load()
    return [r for r in REGISTRY.rules if AWS in r.needs]


def policy() -> dict[str, Any]:
    """The IAM policy document a preflight identity needs: every declared action, read-only, on ``*``.

    The look-ups name resources the config chooses, and most Describe/List actions take no resource-level
    permission, so the statement is on ``*``; sts:GetCallerIdentity needs no permission."""
    from hyperpod_cdk.preflight import load

    load()  # registers the online rules, and with them their actions

    actions = sorted({a for listed in ACTIONS.values() for a in listed})
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "HyperPodCdkPreflight", "Effect": "Allow", "Action": actions, "Resource": "*"}],
    }


def account_of(view: ClusterView) -> Account:
    account = getattr(view, "account", None)
    if account is None:
        raise RuntimeError("an online rule ran without an account (the runner gives the view one)")
    return account  # type: ignore[no-any-return]


def cluster_name(view: ClusterView) -> str:
    """The cluster's physical name (:func:`hyperpod_cdk.core.deployment.deployed_name`): how ListClusters knows it."""
    from hyperpod_cdk.core.deployment import deployed_name

    return deployed_name(view.cluster_name, view.organization)


def unchecked(path: str, error: Unchecked, got: str | None = None) -> Problem:
    """The warning for a look-up the account would not answer: what could not be checked and the action."""
    fix = POLICY_FIX if error.denied else "check it by hand, or run preflight again"
    text = f"could not be checked: {error.action} {error.reason}"
    if got is None:
        return Problem(path, text, fix=fix, level=WARNING)
    return Problem(path, text, got=got, fix=fix, level=WARNING)


def guarded(path: str, check: Callable[[], Iterable[Problem]], got: str | None = None) -> Iterator[Problem]:
    """``check()``'s problems; a look-up it cannot make becomes one warning at ``path`` naming the resource ``got``
    (the rule's other items go on)."""
    from hyperpod_cdk.preflight.account import Unchecked

    try:
        yield from check()
    except Unchecked as error:
        yield unchecked(path, error, got)
