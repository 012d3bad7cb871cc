"""The update policies (``validate --previous``): one rule per policy kind over every changed field
(:func:`hyperpod_cdk.aws_data.update_policy.changes`, groups paired by name). Each finding names the field, the
deployed and
the new value, the consequence, AWS's words with the page, and what to do instead. A field whose inventory row names
its own rule (GRP-ROLE-IMMUTABLE, NET-REPLACES, CL-NAME-REPLACES, CL-MODE-NO-REVERT, CL-ACCOUNTING-NO-REVERT,
CL-PROVISIONING) is reported by that rule alone."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from hyperpod_cdk.aws_data.update_policy import Change, Kind, changes, dedicated_rule, holds_data
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

SOURCE = "the update policy of every field (src/hyperpod_cdk/data/fields.yaml; docs/configuration.md)"


def _shown(value: Any) -> str:
    return "unset" if value is None else repr(value)


def _section(path: str) -> str:
    return path.rpartition(".")[0]


def _set(value: Any) -> bool:
    return value not in (None, "", False) and value != [] and value != {}


RULES: dict[str, tuple[str, Callable[[Change], bool], str]] = {
    "UPD-REFUSED": (
        "error",
        lambda c: c.policy.kind is Kind.REFUSED,
        "A field the API refuses to change once the instance group or cluster exists keeps its deployed value.",
    ),
    "UPD-NEW-INSTANCE-GROUP": (
        "warning",
        lambda c: c.policy.kind is Kind.NEW_INSTANCE_GROUP,
        "A field fixed when an instance launches changes through a new instance group (AWS is silent on an "
        "in-place change, so a warning).",
    ),
    "UPD-IRREVERSIBLE": (
        "error",
        lambda c: c.policy.kind is Kind.IRREVERSIBLE and _set(c.before),
        "A setting AWS says cannot be undone keeps its deployed value once set.",
    ),
    "UPD-NEW-NODES-ONLY": (
        "warning",
        lambda c: c.policy.kind is Kind.NEW_NODES_ONLY,
        "A field that reaches only nodes provisioned later: running nodes keep the deployed value.",
    ),
    "UPD-REPLACES-ROOT-VOLUMES": (
        "warning",
        lambda c: c.policy.kind is Kind.REPLACES_ROOT_VOLUMES,
        "A change that reaches running nodes only by re-imaging their root volumes (UpdateClusterSoftware).",
    ),
    "UPD-REPLACES-DATA": (
        "error",
        lambda c: c.policy.kind is Kind.REPLACES_RESOURCE and holds_data(c.path),
        "A change that makes CloudFormation replace a file system: the new one starts empty.",
    ),
    "UPD-REPLACES": (
        "warning",
        lambda c: c.policy.kind is Kind.REPLACES_RESOURCE and not holds_data(c.path),
        "A change that makes CloudFormation replace a resource that holds no data (a data repository association).",
    ),
}


def _rule(rule_id: str, wanted: Callable[[Change], bool]) -> Callable[[ClusterView], Iterator[Problem]]:
    def check(view: ClusterView) -> Iterator[Problem]:
        if view.previous is None or view.previous.config is None or view.config is None:
            return  # without validate --previous there is nothing to compare
        found = changes(view.previous.config, view.config)
        # a field's own rule speaks for its section too (attaching an accounting database: CL-ACCOUNTING-ONE-WAY)
        owned = {_section(c.path) for c in found if dedicated_rule(c.path) is not None}
        for change in found:
            if not wanted(change) or dedicated_rule(change.path) is not None or _section(change.path) in owned:
                continue
            policy = change.policy
            cited = f' AWS: "{policy.quote}" ({policy.source})' if policy.quote else ""
            yield Problem(
                change.path,
                f"changed from {_shown(change.before)}: {policy.why}.{cited}",
                got=change.after,
                fix=policy.todo,
            )

    check.__name__ = "update_" + rule_id.removeprefix("UPD-").lower().replace("-", "_")
    return check


for _rule_id, (_level, _wanted, _doc) in RULES.items():
    _check = _rule(_rule_id, _wanted)
    _check.__doc__ = _doc
    REGISTRY.rule(_rule_id, "cluster", "(fields with an update policy)", level=_level, source=SOURCE)(_check)
