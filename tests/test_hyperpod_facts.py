"""The sourced table of HyperPod facts (``data/hyperpod_facts.yaml``): sourced and dated, current in its generated
module and doc, true to botocore's SageMaker model, and equal to the emulator's independent copy of the limits."""

from __future__ import annotations

import ast
import gzip
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import botocore
import cfnlint
import pytest

from hyperpod_local.control_plane import validation
from test_doc_links import anchors as doc_anchors
from test_docs import _script
from training_runtime import hyperpod_facts


def _generator() -> Any:
    return _script("gen_hyperpod_facts")


def test_the_generated_module_and_doc_are_current() -> None:
    for path, text in _generator().outputs().items():
        assert path.read_text() == text, f"{path.name} is stale: run scripts/gen_hyperpod_facts.py"


def test_the_module_holds_every_fact_and_imports_nothing() -> None:
    generator = _generator()
    tree = ast.parse(generator.MODULE.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    for fact in generator.load():
        assert getattr(hyperpod_facts, fact.name) == fact.value, fact.name


def test_every_fact_has_a_source_or_an_inferred_note_and_a_date() -> None:
    generator = _generator()
    facts = generator.load()
    assert facts and all((f.source and f.quote) or f.inferred for f in facts)
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", f.checked) for f in facts)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"inferred": None}, "either a source"),
        ({"source": "https://docs.aws.amazon.com/x"}, "either a source"),
        ({"checked": "recently"}, "not a date"),
        ({"table": "ami"}, "table 'ami'"),
        ({"value": [1, 2]}, "value is not"),
    ],
)
def test_a_fact_without_a_source_a_date_or_a_known_shape_is_refused(change: dict[str, Any], problem: str) -> None:
    generator = _generator()
    row = {"name": "X", "table": "node", "value": "/x", "what": "a path", "inferred": "seen", "checked": "2026-11-28"}
    row["evidence"] = EVIDENCE
    assert generator.problems(row) == []
    broken = {k: v for k, v in {**row, **change}.items() if v is not None}
    assert any(problem in p for p in generator.problems(broken))
    text = "- " + json.dumps(broken)
    with pytest.raises(ValueError, match="X: "):
        generator.load(text)


EVIDENCE = "docs/research/hyperpod-lifecycle.md §2"


@pytest.mark.parametrize(
    ("evidence", "problem"),
    [
        (None, "names its evidence"),
        ([], "names its evidence"),
        ("/work/shared/research/hyperpod-lifecycle.md", "outside the repository"),
        ("../shared/research/hyperpod-lifecycle.md", "outside the repository"),
        ("docs/research/no-such-note.md", "no file docs/research/no-such-note.md"),
        ("docs/research/hyperpod-lifecycle.md §99", "no heading numbered 99"),
        ("docs/research/hyperpod-lifecycle.md#no-such-heading", "no heading with the anchor #no-such-heading"),
        ("research note hyperpod-lifecycle.md", "is not a path"),
        ({"file": "docs/research/hyperpod-lifecycle.md"}, "a link or a list of links"),
    ],
)
def test_an_inferred_fact_without_evidence_in_the_repository_is_refused(evidence: Any, problem: str) -> None:
    """Evidence kept outside the repository (a machine path, a note nobody else can open) or pointing at a section
    the file does not have is refused, and the generator writes nothing from such a table."""
    generator = _generator()
    row = {"name": "X", "table": "node", "value": "/x", "what": "a path", "inferred": "seen", "checked": "2026-11-28"}
    assert generator.problems({**row, "evidence": [EVIDENCE, "docs/research/local-slurm.md#1-verdict"]}) == []
    broken = {**row, "evidence": evidence} if evidence is not None else row
    assert any(problem in p for p in generator.problems(broken)), generator.problems(broken)
    with pytest.raises(ValueError, match="X: "):
        generator.load("- " + json.dumps(broken))


def test_every_inferred_fact_links_evidence_that_resolves_as_the_docs_links_do() -> None:
    """Each link names a file of the repository and a heading of it; the doc's rendered links are the ones
    tests/test_doc_links.py checks, and the generator's anchors are GitHub's (the same as that test's)."""
    generator = _generator()
    inferred = [f for f in generator.load() if f.inferred]
    assert inferred and all(f.evidence for f in inferred)
    for fact in inferred:
        for link in fact.evidence:
            path, anchor = generator.resolve(link)
            assert path.is_relative_to(generator.ROOT) and (not anchor or anchor in doc_anchors(path)), link
            assert f"(research/{path.name}{'#' + anchor if anchor else ''})" in generator.DOC.read_text(), link
    for note in sorted((generator.ROOT / "docs" / "research").glob("*.md")):
        assert set(generator.headings(note)) == doc_anchors(note), note.name


def test_a_fact_from_cfn_lints_bundled_schema_is_what_the_schema_says() -> None:
    """A source that is cfn-lint's bundled registry schema is public: the quote is in the schema cfn-lint ships."""
    generator = _generator()
    cited = [f for f in generator.load() if f.source.startswith("cfn-lint's bundled")]
    assert cited, "ACCOUNTING_DATABASE cites cfn-lint's bundled schema"
    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    providers = json.loads((schemas / "providers" / "us-east-1.json").read_text())
    for fact in cited:
        type_name = re.search(r"AWS::\w+::\w+", fact.source)
        assert type_name, fact.name
        schema = json.loads((schemas / "resources" / f"{providers[type_name.group(0)]}.json").read_text())
        assert any(fact.quote in d for d in _descriptions(schema)), fact.name


def _descriptions(node: Any) -> list[str]:
    """Every ``description`` in a schema, at any depth."""
    if isinstance(node, dict):
        own = [node["description"]] if isinstance(node.get("description"), str) else []
        return own + [d for value in node.values() for d in _descriptions(value)]
    if isinstance(node, list):
        return [d for value in node for d in _descriptions(value)]
    return []


def test_a_sourced_fact_needs_its_quote_and_an_api_fact_its_model_shape() -> None:
    generator = _generator()
    row = {"name": "X", "table": "api", "value": 5, "what": "a limit", "source": "s", "checked": "2026-11-28"}
    found = generator.problems(row)
    assert any("quote" in p for p in found) and any("model" in p for p in found)


@cache
def _model() -> dict[str, Any]:
    data = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24"
    plain = data / "service-2.json"
    text = plain.read_bytes() if plain.exists() else gzip.decompress((data / "service-2.json.gz").read_bytes())
    shapes: dict[str, Any] = json.loads(text)["shapes"]
    return shapes


API_FACTS = [f for f in _generator().load() if f.model]


@pytest.mark.parametrize("fact", API_FACTS, ids=lambda f: f.name)
def test_an_api_fact_is_what_botocores_model_says(fact: Any) -> None:
    """The member exists, its documentation holds the quote, and the bound the fact names is its value."""
    shape_name, member = fact.model.split(".")
    shapes = _model()
    spec = shapes[shape_name]["members"][member]
    documentation = " ".join(re.sub(r"<[^>]+>", "", spec.get("documentation", "")).split())
    assert " ".join(fact.quote.split()) in documentation
    if fact.bound:
        assert shapes[spec["shape"]][fact.bound] == fact.value


def test_the_emulators_own_limits_agree_with_the_table() -> None:
    """The control plane's limits are an independent copy on purpose (it plays AWS for the CLI's tests); a change
    to either is a change to check against AWS."""
    assert validation.REBOOT_IDS_MAX == hyperpod_facts.REBOOT_NODES_MAX == hyperpod_facts.REPLACE_NODES_MAX
    assert validation.DELETE_IDS_MAX == hyperpod_facts.DELETE_NODES_MAX
    assert validation.ADD_NODES_MAX == hyperpod_facts.ADD_NODES_MAX
    assert validation.ADD_GROUPS_MAX == hyperpod_facts.ADD_GROUPS_MAX
    assert validation.INSTANCE_COUNT_MAX == hyperpod_facts.INSTANCE_COUNT_MAX
    assert validation.UPDATE_GROUPS_MAX == hyperpod_facts.INSTANCE_GROUPS_MAX
    assert validation.TAGS_MAX == hyperpod_facts.TAGS_MAX
