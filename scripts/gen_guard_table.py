#!/usr/bin/env python3
"""Write the Slurm guard's table in docs/node-runtime.md ("The Slurm guard") from the code's table.

What the guard repairs, reports and leaves alone, on which role, why, and each row's sources with their quotes are
defined once, in ``src/training_runtime/guard/table.py`` (``RULES``); the guard's checks name their row from it. This
script renders the same rows (``table.markdown_table``) between ``<!-- BEGIN GENERATED: slurm-guard -->`` and
``<!-- END GENERATED -->``::

    .venv/bin/python scripts/gen_guard_table.py          # rewrite the table
    .venv/bin/python scripts/gen_guard_table.py --check  # exit 1 if the committed copy is stale

Stdlib only: the table imports nothing of the runtime.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # docgen, when a test loads this file by path
sys.path.insert(0, str(ROOT / "src"))
import docgen  # noqa: E402

from training_runtime.guard import table  # noqa: E402

DOC = ROOT / "docs" / "node-runtime.md"
BEGIN = "<!-- BEGIN GENERATED: slurm-guard -->"
END = "<!-- END GENERATED -->"


def block() -> str:
    note = (
        "<!-- Generated from src/training_runtime/guard/table.py by scripts/gen_guard_table.py (`make docs`); "
        "tests/test_docs.py fails while it is stale. -->"
    )
    return "\n".join([BEGIN, note, "", table.markdown_table().rstrip("\n"), END])


def updated(text: str) -> str:
    return docgen.replace_block(text, BEGIN, END, block())


if __name__ == "__main__":
    sys.exit(docgen.main(DOC, lambda: updated(DOC.read_text()), __doc__))
