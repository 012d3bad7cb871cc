"""What the docs generators in scripts/ share: a marked block replaced in a doc, and the write-or-``--check`` main."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def replace_block(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with everything from ``begin`` to ``end`` (both included) replaced by ``block``."""
    start = text.index(begin)
    stop = text.index(end, start) + len(end)
    return text[:start] + block + text[stop:]


def main(doc: Path, render: Callable[[], str], description: str | None, argv: list[str] | None = None) -> int:
    """Write ``render()`` to ``doc``; with ``--check``, exit 1 (naming the script to run) if ``doc`` differs."""
    parser = argparse.ArgumentParser(description=(description or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {doc.relative_to(ROOT)} is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if doc.exists() and doc.read_text() == text:
            return 0
        print(f"{doc.relative_to(ROOT)} is stale: run scripts/{Path(sys.argv[0]).name}", file=sys.stderr)
        return 1
    doc.write_text(text)
    return 0
