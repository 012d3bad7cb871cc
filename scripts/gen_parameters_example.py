#!/usr/bin/env python3
"""Write the example parameters file of docs/slurm-mode.md from the snapshot the tests pin.

``tests/snapshots/trn1-cluster.parameters.json`` is the file the stack uploads for
``examples/trn1-cluster.yaml`` (tests/test_examples.py keeps it current). This script copies its content
between ``<!-- BEGIN GENERATED: parameters-example -->`` and ``<!-- END GENERATED -->``, with each
deploy-time value (CDK's ``<<marker:0xbaba:N>>``) shown as ``<deploy time: KEY>``::

    .venv/bin/python scripts/gen_parameters_example.py          # rewrite the block
    .venv/bin/python scripts/gen_parameters_example.py --check  # exit 1 if the committed copy is stale

Stdlib only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # docgen, when a test loads this file by path
import docgen  # noqa: E402

DOC = ROOT / "docs" / "slurm-mode.md"
SNAPSHOT = ROOT / "tests" / "snapshots" / "trn1-cluster.parameters.json"
BEGIN = "<!-- BEGIN GENERATED: parameters-example -->"
END = "<!-- END GENERATED -->"
MARKER = re.compile(r"<<marker:0xbaba:\d+>>")


def readable(value: Any, key: str = "") -> Any:
    """The content with every deploy-time marker replaced by the key it stands for."""
    if isinstance(value, dict):
        return {name: readable(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [readable(item, key) for item in value]
    if isinstance(value, str) and MARKER.search(value):
        return MARKER.sub(f"<deploy time: {key}>", value)
    return value


def block() -> str:
    (entry,) = json.loads(SNAPSHOT.read_text()).values()
    content = readable(entry["content"])
    return f"{BEGIN}\n`{entry['file_name']}`:\n\n```json\n{json.dumps(content, indent=2)}\n```\n{END}"


def updated(text: str) -> str:
    return docgen.replace_block(text, BEGIN, END, block())


if __name__ == "__main__":
    sys.exit(docgen.main(DOC, lambda: updated(DOC.read_text()), __doc__))
