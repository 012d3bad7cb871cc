"""The packages of this repository have no import cycles beyond the one listed here, with its reason; the
emulator (hyperpod-local) has none at all.

Every import counts, at the top of a module, inside a function or under ``TYPE_CHECKING``: a lazy import that
closes a cycle is still a cycle (the parser and the rules it calls, the renderer and its checks, the emulator's
daemons re-opening the engine that starts them). A module importing its own package's ``__init__`` is not an edge
back. Imports by name count too: ``importlib.import_module("a.b")`` and a string in a module that names another
module of these packages (a lazy export's home, ``"pkg.mod:function"``) are edges; ``import_module`` of a name
built at run time is allowed only where :data:`DYNAMIC` says which modules it can reach (they become its edges).
That is how the rule registry once hid an 11-module cycle through ``preflight`` (it imported its modules by name).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
LOCAL_SRC = ROOT / "hyperpod-local" / "src"
ALLOWED_CYCLE_MEMBERS = ("hyperpod_cdk.core.config", "hyperpod_cdk.core.api_request", "hyperpod_cdk.rules")
"""The one allowed cycle lies within these (a name and the modules under it) and holds ``hyperpod_cdk.core.config``:
``ClusterConfig.problems()`` imports the rules when called, and the rules' view names the config's types for mypy
(the request the API-MODEL rule checks names the view's type likewise). Nothing else may join it: ``preflight``'s
online rules register themselves (``hyperpod_cdk.preflight.load``), the rules never import them."""
DYNAMIC = {
    "hyperpod_cdk": ("", "the lazy exports: each name's home is a string in _HOMES (an edge by name already)"),
    "hyperpod_cdk.ops.parser": ("hyperpod_cdk.ops", "the operator commands' handlers, 'module:function' by command"),
    "training_runtime.metrics.neuron_bridge": ("prometheus_client", "an optional third-party package, on the node"),
}
"""Module -> (the package its run-time ``import_module`` names lie in, why): its edges are every module there ("":
the names are strings in the module, edges already)."""
ALLOWED_LOCAL: dict[frozenset[str], str] = {}
"""The emulator's engine opens its state through :mod:`hyperpod_local.state`, its daemons start from
:mod:`hyperpod_local.processes`, and the control plane's backend gets a cluster opener injected: no cycle."""


ROOTS = ("hyperpod_cdk", "training_runtime", "hyperpod_local")


def modules(*sources: Path) -> dict[str, Path]:
    found = {}
    for src in sources:
        for path in src.rglob("*.py"):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def dynamic_imports(tree: ast.AST) -> tuple[list[str], bool]:
    """The module names ``tree`` imports by name, and whether it calls ``import_module`` with a name built at run
    time. By name: a "module:function" string anywhere; in a module that calls ``import_module`` (or
    ``__import__``), every string naming a dotted module (its literal argument, a lazy export's home). Docstrings
    are prose; a module named to a subprocess (``-m``) in a module that imports nothing by name is not an import."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in ("import_module", "__import__")
    ]
    built = any(not (c.args and isinstance(c.args[0], ast.Constant)) for c in calls)
    pattern = r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+" + ("(:[A-Za-z_]\\w*)?" if calls else ":[A-Za-z_]\\w*")
    names = [
        node.value.partition(":")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        if re.fullmatch(pattern, node.value)
    ]
    return names, built


def import_graph(*sources: Path) -> dict[str, set[str]]:
    """Module -> the modules it imports, by statement or by name, over every package under ``sources`` (imports of
    other packages are left out)."""
    known = modules(*sources)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in known}
    unexplained = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        by_name, built = dynamic_imports(tree)
        if built and name not in DYNAMIC:
            unexplained.append(name)
        reach = DYNAMIC[name][0] if built and name in DYNAMIC else None
        graph[name] |= {m for m in known if reach and m.startswith(reach + ".") and m != name}
        graph[name] |= {m for m in (resolve(n) for n in by_name if n.split(".")[0] in ROOTS) if m and m != name}
        for node in ast.walk(tree):
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
    if unexplained:
        raise AssertionError(f"import_module of a name built at run time, not in DYNAMIC: {sorted(unexplained)}")
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


def allowed(cycle: frozenset[str]) -> bool:
    within = all(m == a or m.startswith(a + ".") for m in cycle for a in [_member_of(m)] if a)
    return "hyperpod_cdk.core.config" in cycle and within and all(_member_of(m) for m in cycle)


def _member_of(module: str) -> str | None:
    return next((a for a in ALLOWED_CYCLE_MEMBERS if module == a or module.startswith(a + ".")), None)


def test_no_import_cycles_beyond_the_allowed_one() -> None:
    found = cycles(import_graph(SRC, LOCAL_SRC))
    unexpected = [sorted(c) for c in found if not allowed(c) and c not in ALLOWED_LOCAL]
    assert unexpected == [], "new import cycles: move the shared definitions to a module both can import"
    assert len(found) <= 1


def test_imports_by_name_are_edges(tmp_path: Path) -> None:
    """A cycle closed only by importlib (a literal name, a lazy export's home, a "module:function" handler) is
    found; a name built at run time is refused unless DYNAMIC says where it leads."""
    package = tmp_path / "hyperpod_cdk"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("import importlib\nimportlib.import_module('hyperpod_cdk.b')\n")
    (package / "b.py").write_text("HANDLER = 'hyperpod_cdk.a:run'\n")
    assert cycles(import_graph(tmp_path)) == [frozenset({"hyperpod_cdk.a", "hyperpod_cdk.b"})]
    (package / "c.py").write_text('"""hyperpod_cdk.a in prose."""\nimport importlib\nimportlib.import_module(x)\n')
    with pytest.raises(AssertionError, match=r"hyperpod_cdk\.c"):
        import_graph(tmp_path)


def test_the_rules_never_import_preflight() -> None:
    """The online rules register themselves; an offline rule module naming a preflight module, even as a string,
    would put every rule and preflight into one cycle again."""
    graph = import_graph(SRC, LOCAL_SRC)
    reached = {
        m
        for name, targets in graph.items()
        if name.startswith("hyperpod_cdk.rules") and name != "hyperpod_cdk.rules.__main__"  # the docs' entry point
        for m in targets
    }
    assert not {m for m in reached if m.startswith("hyperpod_cdk.preflight")} - {"hyperpod_cdk.preflight.account"}


def test_the_emulator_is_scanned_with_its_function_level_imports() -> None:
    """The walk sees the emulator's modules and the imports inside its functions (the ones that made its cycle)."""
    graph = import_graph(SRC, LOCAL_SRC)
    assert {"hyperpod_local.cluster", "hyperpod_local.processes", "hyperpod_local.control_plane.local"} <= set(graph)
    assert "hyperpod_cdk.core.config" in graph["hyperpod_local.staging"]  # imported inside from_config()
    assert {"hyperpod_local.cluster", "hyperpod_local.agent"} <= graph["hyperpod_local.processes"]
