"""What the AWS inventory's rows get wrong about the code (:func:`cross_problems`: rule ids, levels, cfn-lint ids,
fact values), and the patches its row tests apply to an example config (:func:`apply_patch`). The format itself is
checked where the files are loaded (:mod:`hyperpod_cdk.aws_data.inventory`); tests/test_aws_inventory.py runs both."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

from hyperpod_cdk.aws_data.inventory import NO_CFN_LINT, POLICY_LEVELS, Row


def cross_problems(
    row: Row, levels: Mapping[str, str], cfn_lint_ids: Iterable[str], facts: Mapping[str, Any]
) -> list[str]:
    """What ``row`` gets wrong about the code: a rule not in ``levels`` (rule id → level, the registry), a rule
    whose level is not the word's (a row whose pages disagree, ``conflicts_with``, or an EKS page's row, whose
    Slurm support is unconfirmed, may warn instead; an update policy's ``rule_previous`` is at its policy's level,
    :data:`POLICY_LEVELS`), a cfn-lint id not shipped (``cfn_lint_ids``) or of the wrong letter, a preflight id that
    is not an online rule, a fact whose value the quote does not state."""
    problems = []
    shipped = set(cfn_lint_ids)
    allowed = {row.level} | ({"warning"} if row.conflicts_with or row.applies == "eks" else set())
    for key in ("rule", "rule_previous", "preflight"):
        rule = getattr(row, key)
        if rule is None:
            continue
        wanted = {POLICY_LEVELS.get(row.policy or "", "")} if key == "rule_previous" else allowed
        asks = f"the policy {row.policy!r}" if key == "rule_previous" else f"the word {row.word!r}"
        if rule not in levels:
            problems.append(f"{row.where}: {key} {rule} is not a rule in hyperpod_cdk.rules.REGISTRY")
        elif key != "preflight" and levels[rule] not in wanted:
            problems.append(f"{row.where}: {key} {rule} is a {levels[rule]} but {asks} asks for {'/'.join(wanted)}")
    if row.cfn_lint not in (None, NO_CFN_LINT):
        if row.cfn_lint not in shipped:
            problems.append(f"{row.where}: cfn_lint {row.cfn_lint} is not shipped by hyperpod_cdk.cfnlint_rules")
        elif {"E": "error", "W": "warning"}.get(row.cfn_lint[:1]) not in allowed:
            problems.append(
                f"{row.where}: cfn_lint {row.cfn_lint} is not at the level the word {row.word!r} asks ({row.level})"
            )
    if row.fact is not None:
        if row.fact not in facts:
            problems.append(f"{row.where}: fact {row.fact} is not in data/hyperpod_facts.yaml")
        elif not states(row.quote, facts[row.fact]):
            problems.append(f"{row.where}: the quote does not state fact {row.fact}'s value {facts[row.fact]!r}")
        if row.fact not in row.how:
            problems.append(f"{row.where}: how does not name fact {row.fact}")
    return problems


def states(quote: str, value: Any) -> bool:
    """Whether ``quote`` states ``value``: a number as a whole number (``6758`` or ``6,758``), else the text."""
    if isinstance(value, int):
        return any(re.search(rf"(?<![\d,]){re.escape(s)}(?![\d,])", quote) for s in (str(value), f"{value:,}"))
    return str(value) in quote


def apply_patch(data: Any, patch: Mapping[str, Any] | None) -> Any:
    """A copy of ``data`` with each dotted path of ``patch`` set (``instance_groups.1.count: 2``; a number is a
    list index, the list's length appends; ``None`` deletes the key). Missing mappings on the way are created."""
    result = copy.deepcopy(data)
    for dotted, value in (patch or {}).items():
        parts = [int(p) if p.isdigit() else p for p in str(dotted).split(".")]
        node = result
        for depth, part in enumerate(parts[:-1]):
            if isinstance(node, list):
                if not isinstance(part, int) or part >= len(node):
                    raise KeyError(
                        f"{dotted}: {'.'.join(map(str, parts[: depth + 1]))} is not an index of a list of {len(node)}"
                    )
                node = node[part]
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        last = parts[-1]
        if isinstance(node, list):
            if not isinstance(last, int) or last > len(node):
                raise KeyError(f"{dotted}: {last} is not an index of a list of {len(node)}")
            if value is None:
                del node[last]
            elif last == len(node):
                node.append(copy.deepcopy(value))
            else:
                node[last] = copy.deepcopy(value)
        elif value is None:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return result
