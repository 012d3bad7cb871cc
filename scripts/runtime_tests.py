"""Print the node runtime's test files that need only the stdlib and pytest: `make test` runs them on 3.8.

A runtime test file (``test_runtime_*.py``, ``test_params.py``) qualifies when every module it imports, and
every local helper it imports, is the standard library, pytest, training_runtime or another qualifying
helper. The list is derived, never maintained by hand.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
ALLOWED_THIRD_PARTY = {"pytest", "training_runtime"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def stdlib_only(path: Path, seen: set[Path] | None = None) -> bool:
    seen = seen or set()
    seen.add(path)
    for name in imports(path):
        local = TESTS / f"{name}.py"
        if local.is_file():
            if local not in seen and not stdlib_only(local, seen):
                return False
        elif name == "__future__" or name in sys.stdlib_module_names or name in ALLOWED_THIRD_PARTY:
            continue
        else:
            return False
    return True


def main() -> None:
    candidates = [*TESTS.glob("test_runtime_*.py"), TESTS / "test_params.py"]
    files = sorted(p for p in candidates if stdlib_only(p))
    print(" ".join(str(p.relative_to(TESTS.parent)) for p in files))


if __name__ == "__main__":
    main()
