"""The packages of this distribution have no import cycles beyond the few listed here, each with its reason.

Every import counts, at the top of a module, inside a function or under ``TYPE_CHECKING``: a lazy import that
closes a cycle is still a cycle (the parser and the rules it calls, the renderer and its checks). A module
importing its own package's ``__init__`` is not an edge back.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
ALLOWED = {
    frozenset(
        {"hyperpod_cdk.config", "hyperpod_cdk.rules", "hyperpod_cdk.rules.registry", "hyperpod_cdk.rules.view"}
    ): (
        "registration by import: ClusterConfig.problems() imports the rules when called; the view names the "
        "config's types for mypy only"
    ),
}


def modules(src: Path) -> dict[str, Path]:
    found = {}
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(src: Path) -> dict[str, set[str]]:
    known = modules(src)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in targets:
                module = resolve(target)
                if module and module != name and not name.startswith(module + "."):
                    graph[name].add(module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_cycle_finder_finds_a_lazy_two_module_cycle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\nA = 1\n")
    (package / "b.py").write_text("B = 2\ndef f():\n    from pkg import a\n    return a.A\n")
    (package / "c.py").write_text("from . import a\n")
    assert cycles(import_graph(tmp_path)) == [frozenset({"pkg.a", "pkg.b"})]


def test_no_import_cycles_beyond_the_listed_ones() -> None:
    unexpected = [sorted(c) for c in cycles(import_graph(SRC)) if c not in ALLOWED]
    assert unexpected == [], "new import cycles: move the shared definitions to a module both can import"
