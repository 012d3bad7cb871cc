"""No test ages out with the calendar (issue #38): every fixed epoch or date constructor in the tests and benchmarks
says in a comment why it is fixed (an injected clock, text only formatted, a window given in full), and the tests
that meet a real clock carry the ``calendar`` marker that ``make test-calendar`` runs under moved clocks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXED = re.compile(
    r"\b1_?[6-9]\d{2}_?\d{3}_?\d{3}(?:_?\d{3})?(?:\.\d)?\b"  # an epoch in seconds or milliseconds, 2020-2033
    r"|\bdatetime\(20\d{2}|\bdate\(20\d{2}"  # a date or time built from a year
)


def unexplained(text: str) -> list[int]:
    """The lines holding a fixed epoch or date with no comment on them, nor on the line that opens their block (a
    run of such lines, one under another, is explained by its first)."""
    found: list[int] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if not FIXED.search(line) or "#" in line:
            continue
        previous = number - 1
        while previous >= 0 and FIXED.search(lines[previous]) and "#" not in lines[previous]:
            previous -= 1
        if previous < 0 or "#" not in lines[previous]:
            found.append(number + 1)
    return found


def test_the_scan_finds_an_unexplained_epoch_and_accepts_an_explained_block() -> None:
    assert unexplained("T0 = 1_795_000_000_000\n") == [1]
    assert unexplained("x = datetime(2026, 11, 20)\n") == [1]
    assert unexplained("NOW = 1_795_000_000.0  # injected\n") == []
    assert unexplained("# injected clocks\nA = date(2026, 1, 1)\nB = date(2026, 2, 1)\n") == []
    assert unexplained("A = 1\nB = date(2026, 2, 1)\n") == [2]
    assert unexplained("port = 1_800\nuid = 12345\n") == []


@pytest.mark.parametrize("folder", ["tests", "bench"])
def test_every_fixed_date_in_the_tests_says_why(folder: str) -> None:
    problems = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / folder).glob("*.py"))
        if path.name != "test_calendar.py" and (lines := unexplained(path.read_text()))
    }
    assert not problems, (
        "a fixed epoch or date without a comment saying why it cannot age out (relative to tests/clock.py's NOW, "
        f"or an injected clock): {problems}"
    )
