"""The packages of this repository have no import cycles beyond the few listed here, each with its reason; the
emulator (hyperpod-local) has none at all.

Every import counts, at the top of a module, inside a function or under ``TYPE_CHECKING``: a lazy import that
closes a cycle is still a cycle (the parser and the rules it calls, the renderer and its checks, the emulator's
daemons re-opening the engine that starts them). A module importing its own package's ``__init__`` is not an edge
back.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
LOCAL_SRC = ROOT / "hyperpod-local" / "src"
ALLOWED = {
    frozenset(
        {"hyperpod_cdk.config", "hyperpod_cdk.rules", "hyperpod_cdk.rules.registry", "hyperpod_cdk.rules.view"}
    ): (
        "registration by import: ClusterConfig.problems() imports the rules when called; the view names the "
        "config's types for mypy only"
    ),
}
ALLOWED_LOCAL: dict[frozenset[str], str] = {}
"""The emulator's engine opens its state through :mod:`hyperpod_local.state`, its daemons start from
:mod:`hyperpod_local.processes`, and the control plane's backend gets a cluster opener injected: no cycle."""


def modules(*sources: Path) -> dict[str, Path]:
    found = {}
    for src in sources:
        for path in src.rglob("*.py"):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def import_graph(*sources: Path) -> dict[str, set[str]]:
    """Module -> the modules it imports, over every package under ``sources`` (imports of other packages are
    left out)."""
    known = modules(*sources)

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
    unexpected = [sorted(c) for c in cycles(import_graph(SRC, LOCAL_SRC)) if c not in {**ALLOWED, **ALLOWED_LOCAL}]
    assert unexpected == [], "new import cycles: move the shared definitions to a module both can import"


def test_the_emulator_is_scanned_with_its_function_level_imports() -> None:
    """The walk sees the emulator's modules and the imports inside its functions (the ones that made its cycle)."""
    graph = import_graph(SRC, LOCAL_SRC)
    assert {"hyperpod_local.cluster", "hyperpod_local.processes", "hyperpod_local.control_plane.local"} <= set(graph)
    assert "hyperpod_cdk.config" in graph["hyperpod_local.staging"]  # imported inside from_config()
    assert {"hyperpod_local.cluster", "hyperpod_local.agent"} <= graph["hyperpod_local.processes"]
