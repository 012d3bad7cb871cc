"""Every relative link in README.md and docs/ resolves: the file exists, and a `#anchor` names a heading of it."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
"""An inline Markdown link ``[text](target "title")``; images (``![..](..)``) are checked by the same rule below."""
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def without_fences(text: str) -> str:
    """The text with every fenced code block's lines blanked (a fence closes with the same character, at least as
    many times, as it opened with)."""
    kept: list[str] = []
    fence = ""
    for line in text.splitlines():
        opening = FENCE.match(line.lstrip() if fence == "" else line)
        if fence == "" and opening:
            fence = opening.group(1)
            kept.append("")
        elif fence:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = ""
            kept.append("")
        else:
            kept.append(line)
    return "\n".join(kept)


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    return INLINE_CODE.sub("", without_fences(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower-cased, with every character that is not a letter,
    digit, space, hyphen or underscore removed and each space turned into a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text, not its target
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives ``path``'s headings (a repeated slug gets ``-1``, ``-2``, ...)."""
    text = without_fences(path.read_text())
    seen: dict[str, int] = {}
    found = set(EXPLICIT_ANCHOR.findall(text))
    for _, heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def targets(path: Path) -> list[str]:
    text = prose(path.read_text())
    return [*LINK.findall(text), *IMAGE.findall(text), *REFERENCE.findall(text)]


def problem(source: Path, target: str) -> str | None:
    """Why a link from ``source`` is broken, or None; absolute URLs and mail links are not checked."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.IGNORECASE):
        return None
    file_part, _, anchor = target.partition("#")
    resolved = (source.parent / unquote(file_part)).resolve() if file_part else source
    if not resolved.exists():
        return f"{target}: no file {resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved}"
    if not resolved.is_relative_to(ROOT):
        return f"{target}: leaves the repository"
    if anchor and resolved.suffix == ".md" and unquote(anchor) not in anchors(resolved):
        return f"{target}: no heading with the anchor #{anchor} in {resolved.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("path", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = [found for target in targets(path) if (found := problem(path, target))]
    assert broken == [], f"{path.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)


def test_slugs_follow_githubs_rules() -> None:
    assert slug("Using the constructs in your own stacks") == "using-the-constructs-in-your-own-stacks"
    assert slug("`runtime.slurm`") == "runtimeslurm"
    assert slug("`reboot` / `replace CLUSTER NODE... [--yes]`") == "reboot--replace-cluster-node---yes"
    assert slug("Example: `plan`") == "example-plan"
    assert slug("Metrics (`runtime.observability`)") == "metrics-runtimeobservability"
    assert slug("What's new: FSx & S3") == "whats-new-fsx--s3"
    assert slug("`storage.data_repositories[]`") == "storagedata_repositories"


def test_repeated_headings_get_numbered_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n## Usage\n```sh\n# not a heading\n```\n## Usage\n")
    assert anchors(page) == {"title", "usage", "usage-1"}


def test_a_broken_file_or_anchor_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n## Part one\n")
    source = tmp_path / "README.md"
    source.write_text(
        "[ok](docs/a.md#part-one) [gone](docs/b.md) [bad](docs/a.md#part-two) [self](#nowhere) "
        "`[code](nothing.md)` [web](https://example.com/x.md)\n"
    )
    found = [p for target in targets(source) if (p := problem(source, target))]
    assert found == [
        "docs/b.md: no file docs/b.md",
        "docs/a.md#part-two: no heading with the anchor #part-two in docs/a.md",
        "#nowhere: no heading with the anchor #nowhere in README.md",
    ]
