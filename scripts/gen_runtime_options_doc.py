#!/usr/bin/env python3
"""Write the runtime-options tables of docs/configuration.md from the code.

The options' names, types, defaults and meanings are defined once, in the dataclasses of
``src/training_runtime/options.py`` (each field's docstring is its meaning). This script renders one
Markdown table per section (``runtime``, ``runtime.slurm`` ...) between the markers
``<!-- BEGIN GENERATED: runtime-options <section> -->`` and ``<!-- END GENERATED -->`` in
docs/configuration.md::

    .venv/bin/python scripts/gen_runtime_options_doc.py          # rewrite the tables
    .venv/bin/python scripts/gen_runtime_options_doc.py --check  # exit 1 if the committed copy is stale

No CDK import: it needs only the node runtime's stdlib code.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hyperpod_cdk.core.docstrings import field_docstrings  # noqa: E402
from training_runtime import options  # noqa: E402

DOC = ROOT / "docs" / "configuration.md"
END = "<!-- END GENERATED -->"
NOTE = (
    "<!-- Generated from src/training_runtime/options.py by scripts/gen_runtime_options_doc.py: edit the "
    "field docstrings there, then run it. -->"
)

SECTIONS: tuple[tuple[str, type], ...] = (
    ("runtime", options.RuntimeOptions),
    ("runtime.slurm", options.SlurmOptions),
    ("runtime.health", options.HealthOptions),
    ("runtime.spot", options.SpotOptions),
    ("runtime.accounting", options.AccountingOptions),
    ("runtime.pytorch", options.PytorchOptions),
    ("runtime.observability", options.ObservabilityOptions),
    ("runtime.containers", options.ContainersOptions),
    ("runtime.security", options.SecurityOptions),
    ("runtime.checkpoint", options.CheckpointOptions),
)
"""Each section of the ``runtime:`` block, in the order the document shows them."""

SECTION_OF = {cls.__name__: path for path, cls in SECTIONS}

TYPE_WORDS = {
    "bool": "boolean",
    "int": "integer",
    "str": "string",
    "Optional[str]": "string or null",
    "Optional[int]": "integer or null",
    "Tuple[str, ...]": "list of strings",
    "Dict[str, Dict[str, Any]]": "map of instance type to figures",
}
"""How each annotation in options.py reads in the document; a new kind of annotation must be added here."""


def anchor(path: str) -> str:
    return "#" + path.replace(".", "")


def type_words(annotation: Any) -> str:
    text = str(annotation)
    nested = re.fullmatch(r"(Optional\[)?(\w+)\]?", text)
    if nested and nested.group(2) in SECTION_OF:
        path = SECTION_OF[nested.group(2)]
        words = f"[{path.split('.')[-1]} options]({anchor(path)})"
        return words + " or null" if nested.group(1) else words
    if text not in TYPE_WORDS:
        raise SystemExit(f"gen_runtime_options_doc: no words for the annotation {text!r}; add it to TYPE_WORDS")
    return TYPE_WORDS[text]


def default_words(spec: dataclasses.Field[Any]) -> str:
    if spec.default is not dataclasses.MISSING:
        value = spec.default
    elif spec.default_factory is not dataclasses.MISSING:
        value = spec.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "all defaults"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple | list):
        return "`[]`" if not value else f"`{list(value)}`"
    return f"`{value}`"


def prose(docstring: str) -> str:
    """A docstring as one Markdown table cell: one line, single backticks, pipes escaped."""
    text = " ".join(line.strip() for line in docstring.strip().splitlines())
    return text.replace("``", "`").replace("|", "\\|")


def table(cls: type) -> str:
    docs = field_docstrings(cls)
    rows = ["| Field | Type | Default | Meaning |", "|---|---|---|---|"]
    for spec in dataclasses.fields(cls):
        if spec.name not in docs:
            raise SystemExit(f"gen_runtime_options_doc: {cls.__name__}.{spec.name} has no docstring; write one")
        rows.append(f"| `{spec.name}` | {type_words(spec.type)} | {default_words(spec)} | {prose(docs[spec.name])} |")
    return "\n".join(rows)


def begin_marker(path: str) -> str:
    return f"<!-- BEGIN GENERATED: runtime-options {path} -->"


def updated(text: str) -> str:
    """``text`` with the table of each section between its markers rewritten from the code."""
    for path, cls in SECTIONS:
        begin = begin_marker(path)
        if text.count(begin) != 1:
            raise SystemExit(f"gen_runtime_options_doc: {DOC.name} needs exactly one {begin!r}")
        before, rest = text.split(begin)
        if END not in rest:
            raise SystemExit(f"gen_runtime_options_doc: {begin!r} has no {END!r} after it")
        _, after = rest.split(END, 1)
        text = f"{before}{begin}\n{NOTE}\n\n{table(cls)}\n\n{END}{after}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed tables are stale")
    args = parser.parse_args(argv)
    text = DOC.read_text()
    new = updated(text)
    if args.check:
        if new != text:
            print(f"{DOC.relative_to(ROOT)}: the runtime-options tables are stale; run {Path(__file__).name}")
            return 1
        return 0
    if new != text:
        DOC.write_text(new)
        print(f"rewrote the runtime-options tables in {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
