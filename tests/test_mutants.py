"""scripts/mutants.py stays honest as code moves: each mutation's text is found exactly once, and the tests
it names exist. (Running the mutations themselves takes minutes: `python scripts/mutants.py`.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("mutants", ROOT / "scripts" / "mutants.py")
assert spec and spec.loader
mutants = importlib.util.module_from_spec(spec)
sys.modules["mutants"] = mutants  # its dataclasses look themselves up there
spec.loader.exec_module(mutants)


@pytest.mark.parametrize("mutation", mutants.MUTATIONS, ids=lambda m: m.name)
def test_every_mutation_still_applies(mutation: object) -> None:
    text = (ROOT / mutation.file).read_text()  # type: ignore[attr-defined]
    assert text.count(mutation.old) == 1, f"{mutation.name}: update its pattern"  # type: ignore[attr-defined]
    for test in mutation.tests:  # type: ignore[attr-defined]
        assert (ROOT / test.split("::")[0]).is_file(), f"{mutation.name}: {test} does not exist"  # type: ignore[attr-defined]
