"""What to change in Slurm for a set of check results: pure decisions, no files and no commands.

The caller (:mod:`training_runtime.health.cli`) reads the node's state and the recovery history, and
runs and records what :func:`plan_actions` returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Sequence

from training_runtime.health.results import (
    DRAIN,
    ESCALATE_WITHIN_S,
    HYPERPOD_REASON_PREFIX,
    HYPERPOD_REASONS,
    LOGIN_REASON_START,
    PERIODIC,
    REASON_MAX,
    REASON_PREFIX,
    REBOOT,
    REPLACE,
    SEVERITY,
    SPOT_REASON,
    CheckResult,
)


@dataclass(frozen=True)
class NodeState:
    """The parts of ``scontrol show node`` the checks act on."""

    state: str
    reason: str = ""
    comment: str = ""

    @property
    def flags(self) -> List[str]:
        return self.state.upper().split("+")

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def failing(self) -> bool:
        return "FAIL" in self.flags

    @property
    def ours(self) -> bool:
        """Drained by a health check (a Spot reclaim drain is the Spot watcher's, a login node's its bootstrap's)."""
        return self.reason.startswith(REASON_PREFIX) and not self.reason.startswith((SPOT_REASON, LOGIN_REASON_START))


def parse_node_state(text: str) -> Optional[NodeState]:
    """From ``scontrol show node NAME`` (one key per line group, Reason and Comment on lines of their own)."""
    state = re.search(r"(?:^|\s)State=(\S+)", text)
    if state is None:
        return None
    reason = re.search(r"^\s*Reason=(.*?)(?:\s+\[[^\]]*\])?\s*$", text, re.MULTILINE)
    comment = re.search(r"^\s*Comment=(.*?)\s*$", text, re.MULTILINE)
    comment_text = comment.group(1) if comment else ""
    return NodeState(
        state=state.group(1),
        reason=reason.group(1) if reason else "",
        comment="" if comment_text == "(null)" else comment_text,
    )


def reason_for(failures: Sequence[CheckResult]) -> str:
    """``hyperpod-cdk:<check>: <detail>`` for the first failure, naming any others; one line, short."""
    first = failures[0]
    others = [f.name for f in failures[1:]]
    text = "{}{}: {}{}".format(
        REASON_PREFIX, first.name, first.detail, " (also {})".format(",".join(others)) if others else ""
    )
    return " ".join(text.split())[:REASON_MAX]


def worst(failures: Sequence[CheckResult]) -> List[CheckResult]:
    """The failures, most severe remedy first (check order within a remedy)."""
    return sorted(failures, key=lambda f: -SEVERITY[f.remedy])


@dataclass(frozen=True)
class Situation:
    """Everything a decision about the node's Slurm state needs, as plain data (no files, no commands)."""

    node_name: str
    scontrol: str
    """The scontrol program to name in the commands."""
    mode: str
    hyperpod: bool
    on_hyperpod: str
    """``recover`` or ``drain`` (:attr:`HealthOptions.on_hyperpod`)."""
    now: float
    recoveries: Mapping[str, float] = field(default_factory=dict)
    """When each check last asked HyperPod for a reboot (seconds since the epoch)."""


def hyperpod_action(situation: Situation, check: CheckResult) -> Optional[str]:
    """REBOOT or REPLACE when HyperPod should recover the node for this failure, else None (drain)."""
    if not situation.hyperpod or situation.on_hyperpod != "recover" or check.remedy == DRAIN:
        return None
    if check.remedy == REBOOT:
        last = situation.recoveries.get(check.name)
        if last is not None and situation.now - last < ESCALATE_WITHIN_S:
            return REPLACE
    return check.remedy


def plan_actions(situation: Situation, results: Sequence[CheckResult], current: NodeState) -> List[List[str]]:
    """The scontrol commands that bring the node's Slurm state in line with ``results``.

    Never touches a node that is failing (HyperPod's recovery is under way: AWS says not to change its
    state then), or one drained for a reason that is not ours.
    """
    scontrol = situation.scontrol
    node = "nodename=" + situation.node_name
    failures = worst([r for r in results if r.failed])
    if current.failing or current.reason.startswith(HYPERPOD_REASON_PREFIX):
        return []
    if not failures:
        commands = []
        if situation.mode == PERIODIC and current.drained and current.ours:
            commands.append([scontrol, "update", node, "state=resume"])
        if current.comment.startswith(REASON_PREFIX):
            commands.append([scontrol, "update", node, "comment="])
        return commands
    if current.drained and not current.ours:
        return []
    reason = reason_for(failures)
    action = hyperpod_action(situation, failures[0])
    if action is not None:
        return [
            [scontrol, "update", node, "comment=" + reason],
            [scontrol, "update", node, "state=fail", "reason=" + HYPERPOD_REASONS[action]],
        ]
    same_check = current.reason.split(":")[:2] == reason.split(":")[:2]
    if current.drained and same_check:
        return []
    return [[scontrol, "update", node, "state=drain", "reason=" + reason]]
