"""The plan: which steps this node runs, in order; applying it; recording each step's result."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Dict, List

from training_runtime.files import read_text, write_file
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.paths import DONE_MARKER, STATE_DIR
from training_runtime.steps import Step

STATE_FILE = STATE_DIR + "/state.json"


def inputs_digest(node: Node) -> str:
    """Identifies the inputs a bootstrap ran with (the done marker records it)."""
    text = node.params.dumps() + json.dumps(
        {g: [(i.name, i.address) for i in inst] for g, inst in sorted(node.resources.groups.items())},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_state(node: Node) -> Dict[str, Any]:
    text = read_text(node, STATE_FILE)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def _record(node: Node, state: Dict[str, Any], step: Step, result: str, **fields: Any) -> None:
    state.setdefault("steps", {})[step.name] = dict(result=result, at=round(time.time(), 3), **fields)
    write_file(node, STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n", mode=0o600)


def apply_plan(node: Node, steps: List[Step]) -> int:
    """Apply every step that is needed, in order; returns how many changed the node.

    The done marker is removed before the first change and written last, only once every step has
    converged, so it never claims a node that a killed or failed run left half-configured. A run that
    finds nothing to do writes nothing.
    """
    state = load_state(node)
    changed = 0
    for step in steps:
        for line in step.left_alone(node):
            log("left-alone", step=step.name, what=line)
        if not step.needed(node):
            log("step", step=step.name, result="unchanged")
            if step.name not in state.get("steps", {}):
                _record(node, state, step, "unchanged")
            continue
        if changed == 0:
            node.path(DONE_MARKER).unlink(missing_ok=True)
        started = time.monotonic()
        _record(node, state, step, "running")
        try:
            step.apply(node)
        except Exception as error:
            _record(node, state, step, "failed", error=str(error)[:500])
            raise StepError(step.name, error) from error
        if step.needed(node):
            _record(node, state, step, "failed", error="did not converge")
            raise StepError(
                step.name,
                RuntimeError(
                    "still needs changes right after applying them; another process may be changing the "
                    "same files, or the step is broken"
                ),
            )
        changed += 1
        seconds = round(time.monotonic() - started, 3)
        log("step", step=step.name, result="changed", seconds=seconds)
        _record(node, state, step, "changed", seconds=seconds)
    if changed or _done_marker_stale(node):
        marker = {"at": round(time.time(), 3), "inputs": inputs_digest(node), "steps": [s.name for s in steps]}
        write_file(node, DONE_MARKER, json.dumps(marker, sort_keys=True) + "\n", mode=0o644)
    return changed


def _done_marker_stale(node: Node) -> bool:
    """True when the marker is missing or records other inputs."""
    text = read_text(node, DONE_MARKER)
    if text is None:
        return True
    try:
        return bool(json.loads(text).get("inputs") != inputs_digest(node))
    except ValueError:
        return True


class StepError(RuntimeError):
    """A step failed; ``step`` names it and the message says why."""

    def __init__(self, step: str, cause: BaseException) -> None:
        self.step = step
        super().__init__(str(cause))


def describe_plan(node: Node, steps: List[Step]) -> List[Dict[str, Any]]:
    """For ``plan``: every step, whether it is needed now, what it would do, and (``left_alone``, only where there
    is some) what it found set up by someone else and leaves as it is. No side effects."""
    rows = []
    for step in steps:
        needed = step.needed(node)  # may run read-only commands (dpkg-query, sacctmgr): ask once
        row: Dict[str, Any] = {"step": step.name, "needed": needed, "actions": step.describe(node) if needed else []}
        left = step.left_alone(node)
        if left:
            row["left_alone"] = left
        rows.append(row)
    return rows


def step_status(node: Node, steps: List[Step]) -> List[Dict[str, Any]]:
    """For ``status``: each step's last recorded result and whether it has drifted since."""
    recorded = load_state(node).get("steps", {})
    rows = []
    for step in steps:
        last = recorded.get(step.name, {})
        rows.append(
            {
                "step": step.name,
                "last_result": last.get("result", "never run"),
                "at": last.get("at"),
                "in_sync": not step.needed(node),
            }
        )
    return rows
