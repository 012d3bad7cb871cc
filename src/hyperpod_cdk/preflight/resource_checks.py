"""The shape of most online rules: every resource the config names is looked up and judged, and a look-up the
account will not answer becomes one warning at that resource's field path (the rule's other resources go on)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from hyperpod_cdk.preflight.online import account_of, guarded
from training_runtime.problems import Problem

if TYPE_CHECKING:  # importing hyperpod_cdk.rules imports the online rules, which import this module
    from hyperpod_cdk.preflight.account import Account
    from hyperpod_cdk.rules.view import ClusterView

Judge = Callable[["Account", str, str], Iterable[Problem]]
"""What a rule finds about one resource: ``judge(account, field path, resource id)``'s problems."""


def each_resource(view: ClusterView, listed: Iterable[tuple[str, str]], judge: Judge) -> Iterator[Problem]:
    """``judge``'s problems for every (field path, resource id) in ``listed``, each look-up guarded."""
    resources = list(listed)
    if not resources:
        return
    account = account_of(view)
    for where, resource in resources:
        yield from guarded(where, functools.partial(judge, account, where, resource), got=resource)
