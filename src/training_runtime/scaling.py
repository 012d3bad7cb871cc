"""A compute group's ``scaling`` settings: the one definition shared by the parameters file and the scaler.

The constructs write ``hyperpod_cdk.groups[].scaling`` (an additive key of contract version 2: absent means the
group is not scaled) from the cluster config's ``instance_groups[].scaling``; the scaler on the controller reads
it. The config-side rules check the same bounds before deploy; :func:`parse_scaling` re-checks the file on the
node (a hand-edited file must not reach the service).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from training_runtime.hyperpod_facts import ADD_NODES_MAX

MAX_NODES_PER_CALL = ADD_NODES_MAX
"""BatchAddClusterNodes: at most this many nodes per call (:mod:`training_runtime.hyperpod_facts`)."""

DEFAULT_IDLE_MINUTES = 10
KEYS = ("min", "max", "idle_minutes")


@dataclass(frozen=True)
class ScalingSpec:
    """``min`` <= node count <= ``max``; nodes idle ``idle_minutes`` are drained and deleted (never below ``min``)."""

    min: int
    max: int
    idle_minutes: int = DEFAULT_IDLE_MINUTES

    def to_json(self) -> Dict[str, Any]:
        return {"min": self.min, "max": self.max, "idle_minutes": self.idle_minutes}


def _count(raw: Mapping[str, Any], key: str, where: str, lowest: int, problems: List[str]) -> Optional[int]:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        problems.append("{}.{}: got {!r}; expected a whole number >= {}".format(where, key, value, lowest))
        return None
    return value


def parse_scaling(raw: Any, where: str, problems: List[str]) -> Optional[ScalingSpec]:
    """``None`` for an absent/null value; otherwise the spec, or ``None`` with every problem appended."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected an object with {}".format(where, raw, ", ".join(KEYS)))
        return None
    before = len(problems)
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        problems.append("{}: unknown keys {}; allowed: {}".format(where, ", ".join(unknown), ", ".join(KEYS)))
    low = _count(raw, "min", where, 0, problems)
    high = _count(raw, "max", where, 1, problems)
    idle = _count(
        dict(raw, idle_minutes=raw.get("idle_minutes", DEFAULT_IDLE_MINUTES)), "idle_minutes", where, 1, problems
    )
    if low is not None and high is not None and low > high:
        problems.append("{}: min {} is above max {}; set min <= max".format(where, low, high))
    if len(problems) != before or low is None or high is None or idle is None:
        return None
    return ScalingSpec(low, high, idle)
