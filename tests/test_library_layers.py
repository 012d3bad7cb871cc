"""The library's layers point one way: the constructs never load the operator CLI or the runtime's bootstrap
machinery, and ``publish`` shares AWS helpers from :mod:`hyperpod_cdk.aws`, not from the operator CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from import_scan import imported_modules

ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP = ("training_runtime.plan", "training_runtime.steps", "training_runtime.apt")
OPERATOR_CLI = ("hyperpod_cdk.ops",)


def loaded_after(statement: str, prefixes: tuple[str, ...]) -> list[str]:
    probe = f"import sys\n{statement}\nprint('\\n'.join(m for m in sys.modules if m.startswith({prefixes!r})))"
    env = {"PYTHONPATH": str(ROOT / "src"), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_the_constructs_load_neither_the_operator_cli_nor_bootstrap_machinery() -> None:
    """Synth needs a log group's name and a database's name, not ``ops`` (boto3, rich) or ``steps``."""
    statement = (
        "import hyperpod_cdk.constructs, hyperpod_cdk.constructs.observability, hyperpod_cdk.constructs.group_api"
    )
    assert loaded_after(statement, OPERATOR_CLI + BOOTSTRAP) == []


@pytest.mark.parametrize("module", ["hyperpod_cdk.publishing.command", "hyperpod_cdk.publishing.upload"])
def test_publishing_does_not_load_the_operator_cli(module: str) -> None:
    source = (ROOT / "src" / (module.replace(".", "/") + ".py")).read_text()
    assert "hyperpod_cdk.ops" not in source  # its AWS helpers are imported where they are used, from .aws
    assert loaded_after(f"import {module}", OPERATOR_CLI) == []


PUBLISHING_FREE = [
    *(ROOT / "src" / "hyperpod_cdk").glob("*.py"),
    *(ROOT / "src" / "hyperpod_cdk" / "core").rglob("*.py"),
    *(ROOT / "src" / "hyperpod_cdk" / "aws_data").rglob("*.py"),
    *(ROOT / "src" / "hyperpod_cdk" / "deployed").rglob("*.py"),
    *(ROOT / "src" / "hyperpod_cdk" / "cfnlint_rules").rglob("*.py"),
    *(ROOT / "src" / "hyperpod_cdk" / "constructs").rglob("*.py"),
    *(ROOT / "src" / "hyperpod_cdk" / "stacks").rglob("*.py"),
    *(ROOT / "src" / "hyperpod_cdk" / "organization").rglob("*.py"),
    *(ROOT / "src" / "hyperpod_cdk" / "rules").rglob("*.py"),
    *(ROOT / "hyperpod-local" / "src" / "hyperpod_local").rglob("*.py"),
]
"""The core, the constructs and stacks, and the emulator: below ``publish`` (``cli.py`` dispatches to it)."""


def test_the_core_and_the_constructs_do_not_import_the_publish_command() -> None:
    """What the published layout is (keys, tree hash) is core (``hyperpod_cdk.core.published_layout``); the
    ``publishing`` package is the tool that uploads it, and nothing below it imports it."""
    upward = {
        str(path.relative_to(ROOT)): found
        for path in PUBLISHING_FREE
        if path.name != "cli.py" or path.parent.name != "hyperpod_cdk"  # the command line names every tool
        for found in [sorted(m for m in imported_modules(path) if m.startswith("hyperpod_cdk.publishing"))]
        if found
    }
    assert upward == {}


ROOMS = {
    "aws_data": set(),
    "cfnlint_rules": {"aws_data"},
    "core": {"aws_data", "model", "rules"},
    "deployed": {"aws", "aws_data", "core", "model"},
}
"""The rooms of ``hyperpod_cdk``'s lower floors -> the other rooms they may import (every import counts, as in
tests/test_import_cycles.py): AWS's data and its readers stand on nothing of ours; the cfn-lint rules read only
that; the core reads that, the model and (to judge a config, the one allowed cycle) the rules; what is deployed
reads the core. None of them reaches the constructs, the stacks, the operator CLI, preflight or publishing."""


def test_the_rooms_import_only_the_rooms_below_them() -> None:
    from test_import_cycles import LOCAL_SRC, SRC, import_graph

    graph = import_graph(SRC, LOCAL_SRC)

    def room(module: str) -> str:
        return module.split(".")[1] if module.count(".") >= 1 else ""

    wrong = {
        f"{name} -> {target}"
        for name, targets in graph.items()
        if name.startswith("hyperpod_cdk.") and room(name) in ROOMS
        for target in targets
        if target.startswith("hyperpod_cdk.") and room(target) != room(name) and room(target) not in ROOMS[room(name)]
    }
    assert wrong == set()
