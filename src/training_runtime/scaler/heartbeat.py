"""The scaler's heartbeat: one line that the service writes (a file on the controller and the cluster tag
:data:`TAG_KEY`) and that ``hyperpod-cdk status`` parses. :func:`format_heartbeat` is the one writer and
:func:`parse_heartbeat` the one parser of that value.

Value (at most 256 characters, AWS's tag value limit; only letters, digits, spaces and ``_ . : / = + - @``, the
characters AWS allows in tag values)::

    <status> <UTC time> <group>=<target>/<min>..<max> ... pending=<nodes> [error=<kind>]

e.g. ``ok 2026-11-26T01:02:03Z gpu=2/0..8 pending=3``. ``status`` is ``ok``, ``waiting`` (jobs wait on an add
HyperPod is still launching, or a group at its max) or ``error`` (the last call failed: ``error=`` says how).
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

TAG_KEY = "hyperpod-cdk:scaler"
HEARTBEAT_PATH = "/var/lib/hyperpod-cdk/scaler/heartbeat"
MAX_VALUE = 256
STATUSES = ("ok", "waiting", "error")


@dataclass(frozen=True)
class GroupLine:
    name: str
    target: int
    min: int
    max: int


@dataclass(frozen=True)
class Heartbeat:
    status: str
    at: float
    """Epoch seconds (UTC)."""
    groups: Tuple[GroupLine, ...] = ()
    pending: int = 0
    error: Optional[str] = None
    extra: Dict[str, str] = field(default_factory=dict)


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def format_heartbeat(beat: Heartbeat) -> str:
    if beat.status not in STATUSES:
        raise ValueError("status: got {!r}; allowed: {}".format(beat.status, ", ".join(STATUSES)))
    parts = [beat.status, _stamp(beat.at)]
    parts += ["{}={}/{}..{}".format(g.name, g.target, g.min, g.max) for g in beat.groups]
    parts.append("pending={}".format(beat.pending))
    if beat.error:
        parts.append("error={}".format("".join(c if c.isalnum() or c in "_.:/+-@" else "-" for c in beat.error)))
    value = " ".join(parts)
    if len(value) > MAX_VALUE:  # many groups: keep the head and the counts, drop the group list
        value = " ".join(parts[:2] + parts[-2 if beat.error else -1 :])
    return value[:MAX_VALUE]


def parse_heartbeat(value: str) -> Heartbeat:
    """The heartbeat a tag value says; ValueError naming what is wrong."""
    words = value.split()
    if len(words) < 2 or words[0] not in STATUSES:
        raise ValueError("not a scaler heartbeat: {!r}".format(value))
    try:
        at = float(calendar.timegm(time.strptime(words[1], "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        raise ValueError("not a scaler heartbeat time: {!r}".format(words[1])) from None
    groups = []
    pending = 0
    error = None
    for word in words[2:]:
        key, _, rest = word.partition("=")
        if key == "pending":
            pending = int(rest)
        elif key == "error":
            error = rest
        elif "/" in rest and ".." in rest:
            target, _, bounds = rest.partition("/")
            low, _, high = bounds.partition("..")
            groups.append(GroupLine(key, int(target), int(low), int(high)))
        else:
            raise ValueError("not a scaler heartbeat field: {!r}".format(word))
    return Heartbeat(words[0], at, tuple(groups), pending, error)


def describe(beat: Heartbeat, now: float) -> str:
    """One line for ``hyperpod-cdk status``."""
    groups = ", ".join("{} {} ({}..{})".format(g.name, g.target, g.min, g.max) for g in beat.groups)
    age = max(0, int(now - beat.at))
    text = "{} {}s ago; {}; {} node(s) pending".format(beat.status, age, groups or "no groups", beat.pending)
    return text + ("; last error: {}".format(beat.error) if beat.error else "")


def group_lines(groups: Sequence[Tuple[str, int, int, int]]) -> Tuple[GroupLine, ...]:
    return tuple(GroupLine(*g) for g in groups)
