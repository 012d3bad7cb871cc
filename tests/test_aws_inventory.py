"""The AWS inventory (src/hyperpod_cdk/data/aws_inventory/*.yaml), data-driven: every file follows the format, every
row names an enforcement that exists at the level its word asks, and every row enforced by a config rule or an
update policy shows it: its ``test.breaks`` is refused by that rule, its ``test.passes`` is not."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_cdk.aws_data import inventory as aws_inventory
from hyperpod_cdk.aws_data.inventory import InventoryError, Row, RowTest, inventory_problems, load_directory, load_page
from hyperpod_cdk.aws_data.inventory_checks import apply_patch, cross_problems
from hyperpod_cdk.core.config import load_file, parse_model
from hyperpod_cdk.core.errors import ConfigurationError
from hyperpod_cdk.preflight import load as load_online_rules
from hyperpod_cdk.rules import REGISTRY
from training_runtime import hyperpod_facts

load_online_rules()  # rows name online (preflight) rules

ROOT = Path(__file__).resolve().parent.parent
LEVELS = {r.id: r.level for r in REGISTRY.rules}
ONLINE = {r.id for r in REGISTRY.rules if "aws" in r.needs}
FACTS = {name: getattr(hyperpod_facts, name) for name in dir(hyperpod_facts) if name.isupper()}


def _rows() -> list[Row]:
    try:
        return list(aws_inventory.rows())
    except InventoryError:
        return []  # test_inventory_loads reports why


ROWS = _rows()
TESTED = [r for r in ROWS if r.test is not None]


def _shipped_cfn_lint_ids() -> set[str]:
    from hyperpod_cdk.cfnlint_rules import INVENTORY_RULES, RULES
    from hyperpod_cdk.cfnlint_rules.infra import RULES as INFRA_RULES

    return {cls.id for cls in RULES.values()} | set(INVENTORY_RULES) | {cls.id for cls in INFRA_RULES}


def test_inventory_loads() -> None:
    pages = aws_inventory.load_directory(aws_inventory.inventory_directory())
    assert pages, "the inventory has no page"
    assert all(p.rows for p in pages)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row_names_what_exists_at_its_level(row: Row) -> None:
    assert cross_problems(row, LEVELS, _shipped_cfn_lint_ids(), FACTS) == []
    if row.preflight is not None:
        assert row.preflight in ONLINE, f"{row.where}: preflight {row.preflight} is not an online rule (needs aws)"


def _config(test: RowTest, patch: Any, name: str) -> Any:
    data = apply_patch(load_file(ROOT / test.base), patch)
    try:
        return parse_model(data, name)
    except ConfigurationError as error:
        raise AssertionError(f"{name}: the patched {test.base} does not parse: {error}") from error


def _fired(row: Row, patch: Any) -> list[Any]:
    """The problems of the row's rule (rule_previous for an update policy) on ``base`` patched by ``patch``."""
    assert row.test is not None
    test = row.test
    config = _config(test, patch, f"{row.id} (new)")
    previous = _config(test, test.previous, f"{row.id} (previous)") if test.previous is not None else None
    rule = row.rule_previous if row.enforced_by == "update-policy" else row.rule
    return [p for p in config.problems(region=test.region, previous=previous) if p.rule == rule]


@pytest.mark.parametrize("row", TESTED, ids=[r.id for r in TESTED])
def test_row_breaks_are_refused(row: Row) -> None:
    assert row.test is not None
    found = _fired(row, row.test.breaks)
    rule = row.rule_previous if row.enforced_by == "update-policy" else row.rule
    assert found, f"{row.where}: {rule} does not fire on test.breaks {dict(row.test.breaks)}"
    assert {p.level for p in found} <= row.rule_levels, f"{row.where}: {rule} fires at {[p.level for p in found]}"


@pytest.mark.parametrize("row", TESTED, ids=[r.id for r in TESTED])
def test_row_passes_are_not(row: Row) -> None:
    assert row.test is not None
    found = _fired(row, row.test.passes)
    assert found == [], f"{row.where}: test.passes is refused: {[str(p) for p in found]}"


# --- the checks themselves, on made-up files -------------------------------------------------------------------

GOOD_ROW = {
    "id": "demo-one",
    "quote": "You must do it.",
    "applies": "slurm",
    "word": "must",
    "enforced_by": "construction",
    "how": "demo.py renders it",
}


def _write(tmp_path: Path, slug: str, *rows: dict[str, Any]) -> Path:
    page = {
        "page": f"https://docs.aws.amazon.com/sagemaker/latest/dg/{slug}.html",
        "title": "Demo",
        "read": "2026-11-29",
        "rows": list(rows),
    }
    path = tmp_path / f"{slug}.yaml"
    path.write_text(yaml.safe_dump(page))
    return path


def _problems(tmp_path: Path, *rows: dict[str, Any]) -> list[str]:
    _page, problems = load_page(_write(tmp_path, "demo-page", *rows))
    return problems


def test_a_good_row_loads(tmp_path: Path) -> None:
    _write(tmp_path, "demo-page", GOOD_ROW)
    (page,) = load_directory(tmp_path)
    assert page.rows[0].id == "demo-one" and page.rows[0].level == "error"


def test_a_row_without_enforcement_is_refused(tmp_path: Path) -> None:
    (problem,) = _problems(tmp_path, {k: v for k, v in GOOD_ROW.items() if k != "enforced_by"})
    assert "demo-page.yaml row demo-one: enforced_by None is not one of rule, cfn-lint" in problem


def test_a_kind_without_its_fields_is_refused(tmp_path: Path) -> None:
    problems = _problems(tmp_path, {**GOOD_ROW, "enforced_by": "rule", "how": ""})
    assert any("row demo-one: rule is missing" in p for p in problems)
    assert any("row demo-one: test is missing" in p for p in problems)
    problems = _problems(tmp_path, {**GOOD_ROW, "enforced_by": "out-of-scope", "how": None})
    assert any("row demo-one: how is missing" in p for p in problems)


def test_unknown_fields_and_values_are_named(tmp_path: Path) -> None:
    problems = _problems(tmp_path, {**GOOD_ROW, "word": "should", "applies": "k8s", "rule": "X"})
    assert any("word 'should' is not one of must" in p for p in problems)
    assert any("applies 'k8s' is not one of slurm" in p for p in problems)
    assert any("rule is not a field of an enforced_by construction row" in p for p in problems)


def test_a_page_named_unlike_its_file_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "demo-page", GOOD_ROW)
    path.rename(tmp_path / "other-page.yaml")
    _, problems = load_page(tmp_path / "other-page.yaml")
    assert any("other-page.yaml: page" in p and "name the file after the page" in p for p in problems)


def test_a_repeated_id_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, "demo-page", GOOD_ROW)
    _write(tmp_path, "demo-other", GOOD_ROW)
    with pytest.raises(InventoryError, match=r"demo-page\.yaml row demo-one: id is repeated"):
        load_directory(tmp_path)


def test_conflicts_must_be_mutual(tmp_path: Path) -> None:
    one = {**GOOD_ROW, "conflicts_with": ["demo-two"]}
    two = {**GOOD_ROW, "id": "demo-two"}
    _write(tmp_path, "demo-page", one, two)
    with pytest.raises(InventoryError, match="but demo-two does not name demo-one"):
        load_directory(tmp_path)
    _write(tmp_path, "demo-page", one, {**two, "conflicts_with": ["demo-one"]})
    assert load_directory(tmp_path)
    pages = load_directory(tmp_path)
    assert list(inventory_problems(pages)) == []


def _row(**fields: Any) -> Row:
    return Row(
        **{
            "id": "demo-one",
            "page": "demo-page",
            "url": "u",
            "quote": "q",
            "applies": "slurm",
            "word": "must",
            "enforced_by": "rule",
            **fields,
        }
    )


def test_cross_problems_name_unknown_ids_and_wrong_levels() -> None:
    levels = {"R-ERR": "error", "R-WARN": "warning"}
    assert cross_problems(_row(rule="R-ERR", cfn_lint="E9001"), levels, {"E9001"}, {}) == []
    assert cross_problems(_row(rule="R-NONE"), levels, (), {}) == [
        "demo-page.yaml row demo-one: rule R-NONE is not a rule in hyperpod_cdk.rules.REGISTRY"
    ]
    assert cross_problems(_row(rule="R-WARN"), levels, (), {}) == [
        "demo-page.yaml row demo-one: rule R-WARN is a warning but the word 'must' asks for error"
    ]
    assert "asks for warning" in cross_problems(_row(rule="R-ERR", word="avoid"), levels, (), {})[0]
    assert cross_problems(_row(rule="R-WARN", conflicts_with=("x-y",)), levels, (), {}) == []
    assert "not shipped" in cross_problems(_row(rule="R-ERR", cfn_lint="E9999"), levels, {"E9001"}, {})[0]
    assert "not at the level" in cross_problems(_row(rule="R-ERR", cfn_lint="W9001"), levels, {"W9001"}, {})[0]
    assert "rule_previous R-NONE" in cross_problems(_row(rule_previous="R-NONE"), levels, (), {})[0]


def test_an_eks_pages_row_may_warn_and_errs_only_where_a_slurm_page_says_the_same() -> None:
    """An EKS page's sentence about a member Slurm clusters also send is unconfirmed on Slurm: its rule may warn
    (the README); where its rule is an error, a row that covers Slurm names the same rule."""
    levels = {"R-ERR": "error", "R-WARN": "warning"}
    assert cross_problems(_row(rule="R-WARN", applies="eks"), levels, (), {}) == []
    assert "asks for error" in cross_problems(_row(rule="R-WARN", applies="both"), levels, (), {})[0]
    on_slurm = {r.rule for r in ROWS if r.applies != "eks" and r.rule}
    for row in ROWS:
        # a sentence that scopes the setting to EKS ("available only for HyperPod Amazon EKS clusters") is definite
        # for Slurm: it leaves Slurm out
        eks_only = row.word == "only" and re.search(r"only for .*EKS", row.quote) is not None
        if row.applies == "eks" and row.rule and LEVELS[row.rule] == "error" and not eks_only:
            assert row.rule in on_slurm, f"{row.where}: an error only where a Slurm page says the same"


def test_can_is_a_permission_honoured_by_construction(tmp_path: Path) -> None:
    """AWS's "You can ..." is no constraint: no rule refuses it, and the update policies cite it for in-place."""
    assert _problems(tmp_path, {**GOOD_ROW, "word": "can"}) == []
    (problem,) = _problems(tmp_path, {**GOOD_ROW, "word": "can", "enforced_by": "preflight", "preflight": "AWS-X"})
    assert "word 'can' (AWS allows it) is honoured by construction, not by preflight" in problem


def test_a_fact_row_states_the_value() -> None:
    fact = _row(enforced_by="construction", fact="MAX_X", how="MAX_X caps it", quote="at most 6,758 nodes")
    assert cross_problems(fact, {}, (), {"MAX_X": 6758}) == []
    assert "does not state fact MAX_X" in cross_problems(fact, {}, (), {"MAX_X": 675})[0]
    assert "how does not name" in cross_problems(_row(fact="MAX_X", quote="6758"), {}, (), {"MAX_X": 6758})[0]


def test_apply_patch_sets_deletes_and_indexes() -> None:
    data = {"a": {"b": 1, "c": 2}, "groups": [{"n": 1}, {"n": 2}]}
    patched = apply_patch(data, {"a.b": 5, "a.c": None, "groups.1.n": 9, "groups.2": {"n": 3}, "x.y": True})
    assert patched == {"a": {"b": 5}, "groups": [{"n": 1}, {"n": 9}, {"n": 3}], "x": {"y": True}}
    assert data["a"] == {"b": 1, "c": 2}  # the base is not changed
    with pytest.raises(KeyError, match=r"groups\.7\.n: groups\.7 is not an index of a list of 2"):
        apply_patch(data, {"groups.7.n": 1})


def test_docs_show_the_coverage_of_every_page_and_every_out_of_scope_reason() -> None:
    from hyperpod_cdk.aws_data.inventory_coverage import coverage_reference

    text = coverage_reference()
    assert text in (ROOT / "docs" / "rules.md").read_text(), "run `python -m hyperpod_cdk.rules > docs/rules.md`"
    for page in aws_inventory.pages():
        read = f"{page.read} (partial: " if page.partial else f"{page.read} |"
        assert f"]({page.url}) | {read}" in text and text.count(f"| {len(page.rows)} |") >= 1
    assert f"| all | {len(ROWS)} |" in text
    for row in ROWS:
        if row.enforced_by == "out-of-scope":
            assert f"| `{row.id}` |" in text and row.how.replace("|", "\\|") in text


def test_every_api_limit_is_a_row_that_quotes_its_value() -> None:
    """Each per-call API limit of data/hyperpod_facts.yaml lives once, checked against AWS's words: a construction
    row on its API page names the fact and quotes its value (test_row_names_what_exists_at_its_level)."""
    facts = yaml.safe_load((ROOT / "src" / "hyperpod_cdk" / "data" / "hyperpod_facts.yaml").read_text())
    api = {f["name"] for f in facts if f["table"] == "api"}
    assert len(api) == 8
    named = {r.fact: r for r in ROWS if r.fact is not None}
    assert api <= set(named), f"no inventory row for {sorted(api - set(named))}"
    for name in api:
        assert named[name].enforced_by == "construction" and named[name].page.startswith("API_")


def test_every_support_row_cites_known_inventory_rows() -> None:
    from hyperpod_cdk.aws_data.api_support import support_table

    known = {r.id for r in ROWS}
    unknown = {s.id: sorted(set(s.aws) - known) for s in support_table() if set(s.aws) - known}
    assert unknown == {}, "data/api_support.yaml cites inventory rows that do not exist"
    cited = {s.id: s.aws for s in support_table()}
    assert "ami-auto-patching-eks-only" in cited["auto-patch"]


def test_the_unread_pages_are_listed_with_what_was_tried_and_are_not_pages() -> None:
    """data/aws_pages_unread.yaml names each page no copy of which was found; one found later has a file and
    leaves the list, and docs/rules.md lists what is left."""
    from hyperpod_cdk.aws_data.inventory_coverage import coverage_reference, unread_pages

    listed = unread_pages()
    assert any("login nodes" in p["page"] for p in listed)
    slugs = {p.url.rsplit("/", 1)[-1].removesuffix(".html") for p in aws_inventory.pages()}
    for page in listed:
        assert set(page) == {"page", "searched", "tried", "meanwhile"}, page
        assert not any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", page["page"]) for s in slugs), page["page"]
        assert page["page"] in coverage_reference()
