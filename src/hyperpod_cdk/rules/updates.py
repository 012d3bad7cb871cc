"""The update policies (``validate --previous``): one rule per policy kind, over the fields the AWS inventory's
update-policy rows name (:mod:`hyperpod_cdk.update_policy`, the one table of them). Each finding names the field,
the deployed and the new value, AWS's words with the page, and what to do instead."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from hyperpod_cdk.aws_inventory import POLICY_LEVELS
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from hyperpod_cdk.update_policy import POLICY_RULES, fix, row_changes, update_policies
from training_runtime.problems import Problem

SOURCE = "the AWS inventory's update-policy rows (src/hyperpod_cdk/data/aws_inventory; docs/rules.md, AWS inventory)"
WHAT = {
    "immutable": "AWS does not change it on a deployed cluster: the update fails",
    "irreversible": "AWS cannot undo it once deployed: the update fails",
    "new-nodes-only": "only nodes launched from now on get the new value; running nodes keep the deployed one",
    "replaces-root-volume": "the change replaces every node's root volume (what the nodes keep there is lost)",
}


def _shown(value: Any) -> str:
    return "unset" if value is None else repr(value)


def _policy_rule(policy: str) -> Callable[[ClusterView], Iterator[Problem]]:
    rule_id = POLICY_RULES[policy]

    def check(view: ClusterView) -> Iterator[Problem]:
        if view.previous is None:  # without validate --previous there is nothing to compare (nor a file to read)
            return
        rows = [r for r in update_policies() if r.policy == policy and r.rule_previous == rule_id]
        for change in row_changes(view, rows):
            row = change.row
            yield Problem(
                change.path,
                f'changed from {_shown(change.old)}: {WHAT[policy]}. AWS: "{row.quote}" ({row.url})',
                got=change.new,
                fix=fix(row),
            )

    check.__doc__ = {
        "immutable": "A field AWS says cannot change once the cluster or group exists keeps its deployed value.",
        "irreversible": "A setting AWS says cannot be undone keeps its deployed value once set.",
        "new-nodes-only": "A field AWS applies to new nodes only: changing it leaves running nodes as they were.",
        "replaces-root-volume": "A change that AWS applies by replacing every node's root volume.",
    }[policy]
    check.__name__ = "update_" + policy.replace("-", "_")
    return check


for _policy, _rule_id in POLICY_RULES.items():
    REGISTRY.rule(_rule_id, "cluster", "(fields with an update policy)", level=POLICY_LEVELS[_policy], source=SOURCE)(
        _policy_rule(_policy)
    )
