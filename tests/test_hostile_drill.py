"""The hostile-user drill is whole: each way in of tests/hostile_drill.py has its local-cluster test, collected under
the ``hostile`` marker (so ``make drill-hostile`` and the local tier run it), and docs/testing.md lists every row."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hostile_drill import DRILL

ROOT = Path(__file__).resolve().parents[1]


def test_every_way_in_is_tried_by_a_test_under_the_hostile_marker() -> None:
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "hostile",
         *sorted({test.split("::")[0] for _, test, _ in DRILL})],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    ids = {line.split("[")[0] for line in collected.stdout.splitlines() if "::" in line}
    missing = [test for _, test, _ in DRILL if test not in ids]
    assert not missing, f"not collected under -m hostile: {missing}\n{collected.stdout}{collected.stderr}"


def test_the_docs_list_the_drill() -> None:
    text = (ROOT / "docs" / "testing.md").read_text()
    for way, test, shows in DRILL:
        assert f"| {way} | `{test.split('::')[1]}` | {shows} |" in text, way
