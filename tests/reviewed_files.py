"""Committed copies a test compares with what the code produces now (snapshots, golden files, generated tables).

A missing copy fails like a changed one: nothing writes itself during a test run. The one way to (re)write
them is explicit: run the tests with the copy's variable set to 1, e.g.
``UPDATE_SNAPSHOTS=1 UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_examples.py``, then review the diff
and commit it.
"""

from __future__ import annotations

import os
from pathlib import Path


def check_reviewed(path: Path, current: str, variable: str) -> None:
    """``current`` equals the committed ``path``; with ``variable=1`` in the environment, write it first."""
    if os.environ.get(variable) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(current)
    assert path.exists(), f"{path} is missing: create it with {variable}=1, review it and commit it"
    assert current == path.read_text(), f"{path.name} changed; review the change and regenerate with {variable}=1"
