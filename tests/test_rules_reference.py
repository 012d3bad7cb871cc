"""docs/rules.md is generated from the rule registry; the committed copy must be current."""

from pathlib import Path

from hyperpod_cdk.rules import all_rules
from hyperpod_cdk.rules.reference import reference

ROOT = Path(__file__).resolve().parent.parent


def test_committed_rules_reference_is_current() -> None:
    committed = (ROOT / "docs" / "rules.md").read_text()
    assert committed == reference(), "run `make docs` and commit docs/rules.md"


def test_every_rule_is_documented_with_its_source() -> None:
    text = reference()
    for rule in all_rules():
        assert f"| `{rule.id}` |" in text
        assert rule.doc and rule.source, f"{rule.id} needs a docstring and a source"
