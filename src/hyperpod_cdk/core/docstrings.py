"""Field docstrings of a dataclass (the string under each field), read from its source: the one reader that
the JSON Schema (``schema_fragments``) and the generated options tables (``scripts/gen_runtime_options_doc.py``)
share. Stdlib only."""

from __future__ import annotations

import ast
import inspect
import itertools
from typing import Any


def field_docstrings(cls: Any) -> dict[str, str]:
    """``{field: docstring}`` from the class source: the string literal right after each annotated field."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = following.value.value
    return docs
