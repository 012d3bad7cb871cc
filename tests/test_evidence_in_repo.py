"""Constraints and facts cite evidence a reader of the repository can open (issue #40; the code review of 2026-12-04,
change 5): no machine path into the team's workspace, and every research note cited is a file of docs/research/.

The team's research notes live outside the repository; the parts the code, the data and the docs rely on are copied
into docs/research/ (each file says where it came from). A citation of a note that is not there, written as a path
on one machine, or by a bare name, is refused here with its file and line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from test_docs import _script

ROOT = Path(__file__).resolve().parent.parent
RESEARCH = ROOT / "docs" / "research"
SCANNED = ["README.md", "CHANGELOG.md", "Makefile", "pyproject.toml", "src", "scripts", "docs", "examples"]
SCANNED += ["hyperpod-local/src", "hyperpod-local/README.md", "hyperpod-local/pyproject.toml"]
SKIPPED_DIRS = {"__pycache__", "node_modules", ".venv", "cdk.out"}

MACHINE = re.compile(r"/work/|(?<![\w.])\.\./shared/|(?<![\w./-])shared/(?:research|reviews)/")
"""A path into the team's workspace on one machine (its checkouts, its shared research and review folders)."""
RESEARCH_PATH = re.compile(
    r"(?<![\w./:-])((?:\.\./|[\w.-]+/)*research/[\w.-]+\.(?:md|json))(?:#([\w-]+)|`*[ \t]?§(\w+(?:\.\w+)*))?"
)
"""A path to a research note, with the ``#anchor`` or `` §section`` it cites."""
RESEARCH_NOTE = re.compile(r"research[\s#*]+notes?\b((?:(?!\n\s*\n)[^;)|]){0,160})", re.IGNORECASE)
"""``research note(s)`` and what follows it up to the end of the citation (``)``, ``;``, a table cell's end or a
blank line)."""
BARE_NAME = re.compile(r"(?<![\w./-])([\w-]+\.(?:md|json))\b")


def _generator() -> Any:
    return _script("gen_hyperpod_facts")


def scanned_files(root: Path = ROOT) -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        path = root / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [
                p for p in sorted(path.rglob("*")) if p.is_file() and not SKIPPED_DIRS & set(p.relative_to(root).parts)
            ]
    return found


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def findings(path: Path, text: str, root: Path = ROOT) -> list[str]:
    """Each citation in ``text`` (the file ``path``) that a reader of the repository cannot follow."""
    where = path.relative_to(root)
    notes = {p.name for p in (root / "docs" / "research").glob("*.*")}
    found = [f"{where}:{_line(text, m.start())}: a machine path ({m.group(0)}...)" for m in MACHINE.finditer(text)]
    for match in RESEARCH_PATH.finditer(text):
        cited, anchor, section = match.groups()
        candidates = [path.parent / cited, root / cited]
        target = next((c.resolve() for c in candidates if c.is_file() and c.resolve().is_relative_to(root)), None)
        if target is None:
            found.append(f"{where}:{_line(text, match.start())}: cites {cited}, which is not in the repository")
            continue
        link = target.relative_to(root).as_posix() + (f"#{anchor}" if anchor else f" §{section}" if section else "")
        problem = _generator().evidence_problem(link, root)
        if problem:
            found.append(f"{where}:{_line(text, match.start())}: {problem}")
    for match in RESEARCH_NOTE.finditer(text):
        for bare in BARE_NAME.finditer(match.group(1)):
            offset = match.start(1) + bare.start()
            found.append(
                f"{where}:{_line(text, offset)}: cites the research note {bare.group(1)} by name: copy what it relies "
                f"on into docs/research/ and cite docs/research/{bare.group(1)}"
            )
    for name in sorted(notes):
        for match in re.finditer(rf"(?<![\w./-]){re.escape(name)}", text):
            found.append(f"{where}:{_line(text, match.start())}: names {name} without its path docs/research/{name}")
    return sorted(set(found))


def test_no_file_cites_evidence_kept_outside_the_repository() -> None:
    found = []
    for path in scanned_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += findings(path, text)
    assert found == [], "citations a reader of the repository cannot follow:\n" + "\n".join(found)


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "research").mkdir(parents=True)
    (tmp_path / "docs" / "research" / "note.md").write_text("# Note\n\n## 2. Paths\n\ntext\n")
    return tmp_path


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# read with /work/shared/research/schema.json\n", "a machine path (/work/"),
        ("(`../shared/research/cfn.md`)\n", "a machine path (../shared/"),
        ("(`shared/reviews/review.md`)\n", "a machine path (shared/reviews/"),
        ("inferred: seen (research note\n    outside.md §2 item 5).\n", "cites the research note outside.md by name"),
        ("# (research notes note.md, other.md)\n", "cites the research note other.md by name"),
        ("see research/audit.md\n", "cites research/audit.md, which is not in the repository"),
        ("see docs/research/note.md §3\n", "no heading numbered 3"),
        ("see docs/research/note.md#nowhere\n", "no heading with the anchor #nowhere"),
        ("see `note.md` §2\n", "names note.md without its path docs/research/note.md"),
    ],
)
def test_a_citation_outside_the_repository_is_named_with_its_file_and_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    root = _tree(tmp_path)
    source = root / "src" / "data.yaml"
    source.parent.mkdir()
    found = findings(source, "first line\n" + text, root)
    assert any(re.match(r"src/data\.yaml:[23]: ", f) and problem in f for f in found), found


def test_citations_in_the_repository_pass(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    source = root / "docs" / "page.md"
    text = (
        "See [research/note.md §2](research/note.md#2-paths), docs/research/note.md §2 and\n"
        "``docs/research/note.md`` §2; (research note docs/research/note.md §2 item 5); spot-research-cluster.yaml;\n"
        "https://example.com/research/x.md; a researcher's notes.md.\n"
    )
    assert findings(source, text, root) == []
