"""The scaler's persisted state: operations in flight (with their client tokens), counters, the last error.

One JSON file (:data:`STATE_PATH`), written atomically (a temporary file in the same directory, fsync, rename),
before every call that changes the cluster: a controller restarted mid-operation finds the operation, its
ClientToken and its base target, and resumes it (re-sends the same token, which HyperPod treats as the same
request for 8 hours, or sees the target already raised and drops it) instead of adding nodes twice.

Format (``version`` 1)::

    {"version": 1,
     "in_flight": [{"kind": "add", "group": "gpu", "count": 2, "token": "hpcdk-…", "base_target": 0,
                    "nodes": [], "instance_ids": [], "started": 1795000000.0, "sent": true}],
     "idle_seen": {"ip-10-1-2-3": 1795000000.0},
     "totals": {"requested": 2, "deleted": 0, "drained": 0, "undrained": 0},
     "failures": 0, "next_try": 0.0,
     "last_error": {"kind": "capacity", "message": "…", "at": 1795000000.0} | null}
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from training_runtime.paths import STATE_DIR
from training_runtime.scaler.policy import ADD, DELETE, InFlight

STATE_PATH = STATE_DIR + "/scaler/state.json"
VERSION = 1
TOTALS = ("requested", "deleted", "drained", "undrained")


class StateError(ValueError):
    pass


@dataclass
class Operation:
    kind: str
    group: str
    count: int
    token: str
    base_target: int = 0
    nodes: List[str] = field(default_factory=list)
    instance_ids: List[str] = field(default_factory=list)
    started: float = 0.0
    sent: bool = False
    """The call returned successfully at least once (a restart with ``sent`` False re-sends it)."""

    def in_flight(self) -> InFlight:
        return InFlight(self.kind, self.group, self.count, self.token, self.base_target, tuple(self.nodes))

    def to_json(self) -> Dict[str, Any]:
        return {
            "kind": self.kind,
            "group": self.group,
            "count": self.count,
            "token": self.token,
            "base_target": self.base_target,
            "nodes": list(self.nodes),
            "instance_ids": list(self.instance_ids),
            "started": self.started,
            "sent": self.sent,
        }

    @classmethod
    def from_json(cls, raw: Any) -> "Operation":
        try:
            kind = str(raw["kind"])
            if kind not in (ADD, DELETE):
                raise StateError("in_flight[].kind: got {!r}; expected add or delete".format(kind))
            return cls(
                kind=kind,
                group=str(raw["group"]),
                count=int(raw["count"]),
                token=str(raw["token"]),
                base_target=int(raw.get("base_target", 0)),
                nodes=[str(n) for n in raw.get("nodes", [])],
                instance_ids=[str(i) for i in raw.get("instance_ids", [])],
                started=float(raw.get("started", 0.0)),
                sent=bool(raw.get("sent", False)),
            )
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, StateError):
                raise
            raise StateError("in_flight entry {!r}: {}".format(raw, error)) from None


@dataclass
class State:
    in_flight: List[Operation] = field(default_factory=list)
    idle_seen: Dict[str, float] = field(default_factory=dict)
    """When the scaler first saw each node idle (used where Slurm gives no LastBusyTime)."""
    totals: Dict[str, int] = field(default_factory=lambda: {k: 0 for k in TOTALS})
    failures: int = 0
    next_try: float = 0.0
    last_error: Optional[Dict[str, Any]] = None

    def to_json(self) -> Dict[str, Any]:
        return {
            "version": VERSION,
            "in_flight": [op.to_json() for op in self.in_flight],
            "idle_seen": dict(sorted(self.idle_seen.items())),
            "totals": dict(self.totals),
            "failures": self.failures,
            "next_try": self.next_try,
            "last_error": self.last_error,
        }

    @classmethod
    def from_json(cls, data: Any) -> "State":
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise StateError("expected a JSON object with version {}".format(VERSION))
        totals = {k: int((data.get("totals") or {}).get(k, 0)) for k in TOTALS}
        return cls(
            in_flight=[Operation.from_json(op) for op in data.get("in_flight") or []],
            idle_seen={str(k): float(v) for k, v in (data.get("idle_seen") or {}).items()},
            totals=totals,
            failures=int(data.get("failures") or 0),
            next_try=float(data.get("next_try") or 0.0),
            last_error=data.get("last_error"),
        )


def load(path: Path) -> State:
    """The state at ``path``; a missing file is a fresh state. A corrupt file is an error (never silently
    forgotten: it may hold an add in flight)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return State()
    try:
        return State.from_json(json.loads(text))
    except ValueError as error:
        raise StateError(
            "{}: {}. Fix: inspect it; remove it only when no scaling operation is in flight".format(path, error)
        ) from None


def save(path: Path, state: State) -> None:
    """Atomic: readers (and a restart) see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle, temporary = tempfile.mkstemp(prefix=".state-", dir=str(path.parent))
    try:
        with os.fdopen(handle, "w") as out:
            out.write(json.dumps(state.to_json(), indent=1, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, str(path))
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
