"""The one retry policy: an attempt cap, or none (``attempts=None``), and a deadline that always holds."""

from __future__ import annotations

import pytest

from training_runtime.retry import NotReady, RetryPolicy


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(seconds, 1.0)  # time passes even when the jittered pause is 0


def never_ready() -> None:
    raise NotReady("not yet")


def test_the_attempt_cap_stops_retrying_before_the_deadline() -> None:
    time = FakeTime()
    with pytest.raises(NotReady):
        RetryPolicy(attempts=3, deadline_s=1000.0).call(never_ready, what="x", sleep=time.sleep, clock=time.clock)
    assert len(time.sleeps) == 2  # tried 3 times, slept between them


def test_no_attempt_cap_retries_until_the_deadline() -> None:
    time = FakeTime()
    with pytest.raises(NotReady):
        RetryPolicy(attempts=None, base_s=1.0, cap_s=1.0, deadline_s=500.0).call(
            never_ready, what="x", sleep=time.sleep, clock=time.clock
        )
    assert len(time.sleeps) == 500 and time.now >= 500.0  # far past the default cap of 8 attempts


def test_an_action_that_becomes_ready_returns_its_value() -> None:
    time = FakeTime()
    answers = iter([NotReady("no"), NotReady("no"), "up"])

    def action() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert RetryPolicy(attempts=None).call(action, what="x", sleep=time.sleep, clock=time.clock) == "up"
    assert len(time.sleeps) == 2


def test_other_errors_are_not_retried() -> None:
    time = FakeTime()

    def broken() -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        RetryPolicy(attempts=None).call(broken, what="x", sleep=time.sleep, clock=time.clock)
    assert time.sleeps == []


def test_the_pause_stays_under_the_cap_however_many_attempts() -> None:
    """With no attempt cap a fast poller reaches thousands of attempts; 2**1024 would overflow a float."""
    assert 0.0 <= RetryPolicy(attempts=None, base_s=0.01, cap_s=2.0).delay(5000) <= 2.0
