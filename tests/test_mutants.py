"""scripts/mutants.py reads its mutations from data: every ``tests/mutations/*.yaml`` file, entries checked,
ids and aliases unique, ``--check`` finding an entry that no longer applies.

Whether the committed mutations still apply to today's code is not a unit test (it pins exact code text, so
reformatting a line would fail it): ``make mutants`` runs ``scripts/mutants.py --check`` first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("mutants", ROOT / "scripts" / "mutants.py")
assert spec and spec.loader
mutants = importlib.util.module_from_spec(spec)
sys.modules["mutants"] = mutants  # its dataclasses look themselves up there
spec.loader.exec_module(mutants)


def entry(**changes: Any) -> dict[str, Any]:
    base = {"id": "pkg.thing-breaks", "what": "w", "file": "src/a.py", "old": "x = 1", "new": "x = 2"}
    return {**base, "tests": ["tests/test_a.py"], **changes}


def tables(tmp_path: Path, **files: list[Any]) -> Path:
    folder = tmp_path / "mutations"
    folder.mkdir()
    for name, entries in files.items():
        (folder / f"{name}.yaml").write_text(entries if isinstance(entries, str) else yaml.safe_dump(entries))
    return folder


def test_every_file_is_read_and_an_alias_names_its_entry(tmp_path: Path) -> None:
    folder = tables(tmp_path, a=[entry(alias="M1")], b=[entry(id="other.thing", compliance=True)])
    (folder / "notes.txt").write_text("not a table")
    loaded = mutants.load(folder)
    assert [(m.name, m.alias, m.compliance, m.source) for m in loaded] == [
        ("pkg.thing-breaks", "M1", False, "a.yaml[0]"),
        ("other.thing", None, True, "b.yaml[0]"),
    ]
    assert loaded[0].known_as("M1") and loaded[0].known_as("pkg.thing-breaks") and not loaded[1].known_as("M1")


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a": [entry()], "b": [entry()]}, "'pkg.thing-breaks' is already used by a.yaml[0]"),
        ({"a": [entry(alias="M1"), entry(id="pkg.two", alias="M1")]}, "'M1' is already used"),
        ({"a": [entry(id="no-area")]}, "must be '<area>.<slug>'"),
        ({"a": [{**entry(), "tests": []}]}, "tests must be a non-empty list"),
        ({"a": [entry(colour="red")]}, "unknown keys ['colour']"),
        ({"a": [{k: v for k, v in entry().items() if k != "new"}]}, "missing keys ['new']"),
        ({"a": [entry(old="")]}, "old not empty"),
        ({"a": [entry(compliance="yes")]}, "compliance must be true or false"),
        ({"a": {"id": "x.y"}}, "must be a YAML list"),
        ({"a": "old: a: b"}, "a.yaml: not YAML: mapping values are not allowed here"),
    ],
)
def test_a_malformed_table_is_refused_naming_the_entry(tmp_path: Path, files: dict[str, Any], message: str) -> None:
    with pytest.raises(mutants.TableError) as raised:
        mutants.load(tables(tmp_path, **files))
    assert message in str(raised.value)


def test_check_names_what_no_longer_applies(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\ny = 1\ny = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    fine = mutants.Mutation("a.fine", "w", "src/a.py", "x = 1", "x = 2", ("tests/test_a.py::test_one",))
    twice = mutants.Mutation("a.twice", "w", "src/a.py", "y = 1", "y = 2", ("tests/test_a.py",))
    gone = mutants.Mutation("a.gone", "w", "src/b.py", "z", "w", ("tests/test_b.py",))
    assert mutants.check([fine, twice, gone], tmp_path) == [
        "a.twice: the old text is found 2 times in src/a.py: update its pattern",
        "a.gone: the old text is not found in src/b.py: update its pattern",
        "a.gone: tests/test_b.py does not exist",
    ]


def test_the_committed_tables_load() -> None:
    """Well formed and unique (cheap, and independent of the code's text); --check is the text check."""
    assert mutants.load(ROOT / mutants.TABLES)


def test_the_scratch_copy_keeps_links_as_links(tmp_path: Path) -> None:
    """A committed link to a folder (``examples/jobs``) is in the copy the mutations run in, still a link."""
    import subprocess

    repo, copy = tmp_path / "repo", tmp_path / "copy"
    (repo / "pkg" / "jobs").mkdir(parents=True)
    (repo / "pkg" / "jobs" / "job.sh").write_text("echo hi\n")
    (repo / "examples").mkdir()
    (repo / "examples" / "jobs").symlink_to("../pkg/jobs")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    mutants.copy_repository(repo, copy)
    assert (copy / "examples" / "jobs").is_symlink()
    assert (copy / "examples" / "jobs" / "job.sh").read_text() == "echo hi\n"
