"""What the docs generators in scripts/ share: a marked block replaced in a doc, and the write-or-``--check`` main."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def replace_block(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with everything from ``begin`` to ``end`` (both included) replaced by ``block``."""
    start = text.index(begin)
    stop = text.index(end, start) + len(end)
    return text[:start] + block + text[stop:]


def main(doc: Path, render: Callable[[], str], description: str | None, argv: list[str] | None = None) -> int:
    """Write ``render()`` to ``doc``; with ``--check``, exit 1 (naming the script to run) if ``doc`` differs."""
    return main_many(lambda: {doc: render()}, description, argv)


def main_many(render: Callable[[], Mapping[Path, str]], description: str | None, argv: list[str] | None = None) -> int:
    """Write each file ``render()`` gives; with ``--check``, exit 1 (naming the stale files and the script to run)
    if any differs. A ``ValueError`` from ``render`` (bad source data) is printed and exits 2."""
    parser = argparse.ArgumentParser(description=(description or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed copy is stale")
    args = parser.parse_args(argv)
    script = Path(sys.argv[0]).name
    try:
        outputs = render()
    except ValueError as error:
        print(f"{script}: {error}", file=sys.stderr)
        return 2
    if not args.check:
        for path, text in outputs.items():
            path.write_text(text)
        return 0
    stale = [str(p.relative_to(ROOT)) for p, text in outputs.items() if not p.exists() or p.read_text() != text]
    if stale:
        print(f"{', '.join(stale)} stale: run scripts/{script}", file=sys.stderr)
        return 1
    return 0
