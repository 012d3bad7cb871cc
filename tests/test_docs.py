"""Docs that repeat what the code defines are generated from it; the committed copies must be current."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
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
