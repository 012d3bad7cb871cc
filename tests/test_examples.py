"""Every example synthesizes, lints clean with cfn-lint and matches its reviewed snapshot.

Snapshots are normalised (asset hashes, bootstrap checks) and live in tests/snapshots/. After a reviewed
change, regenerate them with ``UPDATE_SNAPSHOTS=1 make unit``.
"""

import json
import os
from pathlib import Path

import aws_cdk as cdk
import pytest

from support import CFN_LINT_IGNORED, EXAMPLES, build_example, cfn_lint, fast_app, normalised, template_of

SNAPSHOTS = Path(__file__).parent / "snapshots"


def _templates(example: Path) -> dict[str, dict]:
    stacks: list[cdk.Stack] = build_example(example, fast_app())
    return {stack.stack_name: template_of(stack) for stack in stacks}


@pytest.fixture(scope="module", params=EXAMPLES, ids=[e.name for e in EXAMPLES])
def example(request: pytest.FixtureRequest) -> tuple[Path, dict[str, dict]]:
    return request.param, _templates(request.param)


def test_cfn_lint_finds_nothing(example: tuple[Path, dict[str, dict]]) -> None:
    _, templates = example
    for name, template in templates.items():
        assert cfn_lint(template) == [], name


def test_snapshot(example: tuple[Path, dict[str, dict]]) -> None:
    path, templates = example
    for name, template in templates.items():
        snapshot = SNAPSHOTS / f"{path.stem}.{name}.json"
        current = normalised(template)
        if os.environ.get("UPDATE_SNAPSHOTS") == "1" or not snapshot.exists():
            snapshot.parent.mkdir(exist_ok=True)
            snapshot.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
            if os.environ.get("CI"):
                pytest.fail(f"snapshot {snapshot.name} was missing; commit it")
        assert current == json.loads(snapshot.read_text()), f"{snapshot.name} changed; review and update it"


def test_ignored_lint_checks_carry_reasons() -> None:
    assert all(reason.strip() for reason in CFN_LINT_IGNORED.values())


def test_examples_cover_the_required_shapes() -> None:
    names = {e.name for e in EXAMPLES}
    assert {
        "trn1-cluster.yaml",
        "cpu-cluster.yaml",
        "gpu-cluster.yaml",
        "existing-vpc-fsx.yaml",
        "shared_filesystem.py",
        "embed_construct.py",
    } <= names
