"""What a source file imports, read from its syntax tree (stdlib only: the layer tests run on Python 3.8 too)."""

from __future__ import annotations

import ast
from pathlib import Path


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (a lazy import is an arrow too); a
    ``from M import N`` names both ``M`` and ``M.N`` (N may be a submodule)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found
