"""Docs that repeat what the code defines are generated from it; the committed copies must be current."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass in the script looks its module up
    spec.loader.exec_module(module)
    return module


def test_runtime_options_tables_are_current() -> None:
    generator = _script("gen_runtime_options_doc")
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "docs/configuration.md is stale: run scripts/gen_runtime_options_doc.py"


def test_every_runtime_option_has_a_documented_row() -> None:
    generator = _script("gen_runtime_options_doc")
    text = generator.DOC.read_text()
    for path, cls in generator.SECTIONS:
        block = text.split(generator.begin_marker(path))[1].split(generator.END)[0]
        rows = re.findall(r"^\| `(\w+)` \|", block, flags=re.MULTILINE)
        assert rows == list(cls.__dataclass_fields__), path


def test_the_generator_reads_each_fields_own_docstring() -> None:
    generator = _script("gen_runtime_options_doc")
    from training_runtime.options import SlurmOptions

    docs = generator.field_docstrings(SlurmOptions)
    assert docs["slurmd_timeout"].startswith("Seconds. ``SlurmdTimeout``")
    assert "Slurm's default is 0" in docs["return_to_service"]


def test_construct_reference_is_current() -> None:
    generator = _script("gen_construct_reference")
    assert generator.DOC.read_text() == generator.render(), (
        "docs/constructs.md is stale: run scripts/gen_construct_reference.py"
    )


def test_every_optional_construct_prop_documents_its_default() -> None:
    """awslint's rule: an optional prop's description says what happens when it is left out."""
    generator = _script("gen_construct_reference")
    lacking = [
        f"{name}.{prop.name}"
        for module, name in generator.CLASSES
        for prop in generator.props_of(generator.load(module, name))
        if prop.lacks_default or not prop.description
    ]
    assert lacking == [], "add a `Default:` to these :param lines (or document the prop)"


def test_the_construct_reference_reads_params_signatures_and_flags_missing_defaults() -> None:
    generator = _script("gen_construct_reference")

    class Example:
        """Prose about the example.

        :param size: how big, across
            two lines. Default: 3.
        :param label: a name.
        """

        def __init__(self, scope: object, id: str, *, size: int = 3, label: str = "", color: str = "red") -> None:
            del scope, id, size, label, color

    prose, params = generator.split_docstring(Example.__doc__)
    assert prose == "Prose about the example."
    assert params == {"size": "how big, across two lines. Default: 3.", "label": "a name."}
    props = {prop.name: prop for prop in generator.props_of(Example)}
    assert list(props) == ["size", "label", "color"]
    assert (props["size"].type, props["size"].default, props["size"].lacks_default) == ("int", "3", False)
    assert props["label"].lacks_default and props["label"].default == "''"
    assert props["color"].description == ""
