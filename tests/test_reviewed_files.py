"""A missing snapshot or golden file fails the test instead of writing itself; only VARIABLE=1 writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewed_files import check_reviewed


def test_a_missing_copy_fails_and_stays_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UPDATE_X", raising=False)
    path = tmp_path / "snapshots" / "a.json"
    with pytest.raises(AssertionError, match=r"a\.json is missing: create it with UPDATE_X=1"):
        check_reviewed(path, "{}", "UPDATE_X")
    assert not path.exists()


def test_a_changed_copy_fails_until_regenerated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.json"
    path.write_text("old")
    monkeypatch.setenv("UPDATE_X", "0")
    with pytest.raises(AssertionError, match="regenerate with UPDATE_X=1"):
        check_reviewed(path, "new", "UPDATE_X")
    assert path.read_text() == "old"
    monkeypatch.setenv("UPDATE_X", "1")
    check_reviewed(path, "new", "UPDATE_X")
    assert path.read_text() == "new"
    monkeypatch.delenv("UPDATE_X")
    check_reviewed(path, "new", "UPDATE_X")
