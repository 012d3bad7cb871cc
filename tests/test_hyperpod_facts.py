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
import pytest

from hyperpod_local.control_plane import validation
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
    assert generator.problems(row) == []
    broken = {k: v for k, v in {**row, **change}.items() if v is not None}
    assert any(problem in p for p in generator.problems(broken))
    text = "- " + json.dumps(broken)
    with pytest.raises(ValueError, match="X: "):
        generator.load(text)


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
