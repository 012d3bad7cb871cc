"""The run's clock, for the tests that meet a real one.

Some of what the tests talk to keeps its own calendar: moto's CloudWatch Logs drops events older than 14 days
(as CloudWatch does), a ``--since`` window or a "this month" default is counted back from now, a token or a
certificate expires. A fixed epoch in such a test ages out by itself (issue #38: main turned red on 2026-12-02).
Those tests stamp their data relative to :data:`NOW` and inject it into the code under test as its clock, and carry
the ``calendar`` marker: ``make test-calendar`` runs them with the clock moved by libfaketime (docs/testing.md).

A test whose code under test reads no clock but the one it is given keeps a fixed date, with a one-line comment
saying so.
"""

from __future__ import annotations  # the node runtime's tests import it on Python 3.8 too

import time
from datetime import datetime, timezone

NOW = float(int(time.time()))
"""Seconds since the epoch, whole, read once per process when the tests are collected: close enough to the real
clock for every window the tests meet (minutes against days), fixed for the run so expectations can be computed."""


def ago(seconds: float) -> float:
    """:data:`NOW` less ``seconds``."""
    return NOW - seconds


def ago_ms(seconds: float) -> int:
    """:data:`NOW` less ``seconds``, in the milliseconds CloudWatch Logs stamps events with."""
    return int(ago(seconds) * 1000)


def utc(seconds_ago: float = 0.0) -> datetime:
    """:data:`NOW` less ``seconds_ago`` as an aware UTC datetime (what botocore parses timestamps to)."""
    return datetime.fromtimestamp(ago(seconds_ago), timezone.utc)
