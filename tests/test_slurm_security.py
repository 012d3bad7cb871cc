"""The Slurm security table (src/hyperpod_cdk/data/slurm_security.yaml): its format and sources, its generated copies
(the runtime's module, docs/operations.md), an answer for every Slurm the project deploys, the refresh script on
stored CHANGELOG excerpts and offline, and the alarm on an affected cluster. No test reads today's date."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_cdk.constructs.alert_rules import CLUSTER_LABEL, alert_rules
from hyperpod_local.variant import SLURM_SUITES
from test_docs import _script
from training_runtime import slurm_security
from training_runtime.hyperpod_facts import AMI_SLURM_VERSIONS
from training_runtime.metrics import security

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "slurm_changelog"


@pytest.fixture(scope="module")
def gen() -> Any:
    return _script("gen_slurm_security")


@pytest.fixture(scope="module")
def refresh() -> Any:
    return _script("refresh_slurm_security")


@pytest.fixture(scope="module")
def table(gen: Any) -> dict[str, Any]:
    return gen.load()  # type: ignore[no-any-return]


def test_the_generated_module_and_doc_tables_are_current(gen: Any) -> None:
    for path, text in gen.outputs().items():
        assert path.read_text() == text, f"{path.name} is stale: run scripts/gen_slurm_security.py"


def test_the_table_is_in_the_refresh_scripts_format(refresh: Any) -> None:
    """The committed table is what the refresh script writes (its header, its layout), so a refresh changes only
    what SchedMD changed."""
    text = refresh.GEN.TABLE.read_text()
    assert refresh.dump(refresh.GEN.load(text)) == text, "run the table through refresh_slurm_security.dump"


def test_the_runtime_reads_the_same_table(table: dict[str, Any]) -> None:
    assert slurm_security.table_date() == table["checked"]
    assert [a.id for a in slurm_security.advisories()] == [a["id"] for a in table["advisories"]]


def test_every_advisory_has_a_source_with_its_quote_and_an_unverified_one_says_why(table: dict[str, Any]) -> None:
    for row in table["advisories"]:
        assert row["sources"] and all(s["source"] and s["quote"] for s in row["sources"]), row["id"]
        assert row["verified"] or row["why"], row["id"]


def bad(table: dict[str, Any], change: Any) -> dict[str, Any]:
    data = copy.deepcopy(table)
    change(data)
    return data


def _first(data: dict[str, Any]) -> dict[str, Any]:
    return data["advisories"][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.update(checked="2026-09-01"), "older than the newest advisory (2026-09-02)"),
        (lambda d: d.update(format=2), "format is 1"),
        (lambda d: _first(d)["sources"][0].update(quote=""), "sources[0] has a source and its quote"),
        (lambda d: _first(d)["fixed"].pop("25.11"), "fixed leaves out 25.11, between the lines it lists"),
        (lambda d: _first(d)["fixed"].update({"25.11": "25.05.9"}), "is not a release of the 25.11 line"),
        (lambda d: _first(d).update(older="maybe"), "older is one of"),
        (lambda d: _first(d).update(verified=False), "an unverified row says why"),
        (lambda d: _first(d).update(date=None), "null only in an unverified row"),
        (lambda d: _first(d)["cves"].append("CVE-2025-43904"), "CVE-2025-43904 is in two advisories"),
        (lambda d: _first(d)["cves"].append("cve 1"), "cves is a list of CVE ids"),
        (lambda d: d["versions"][0].update(kind="guess"), "kind is one of"),
    ],
)
def test_a_table_that_breaks_its_format_is_refused(gen: Any, table: dict[str, Any], change: Any, problem: str) -> None:
    found = gen.problems(bad(table, change))
    assert any(problem in p for p in found), found
    with pytest.raises(ValueError, match=re.escape(problem)):
        gen.load(yaml.safe_dump(bad(table, change)))


def test_every_slurm_the_project_deploys_or_runs_has_an_answer_in_the_docs(gen: Any, table: dict[str, Any]) -> None:
    """HyperPod's AMI majors (runtime.slurm.version's values), the local cluster's majors (SLURM_SUITES), and the
    releases AWS's release notes name: each is in the table's versions, and docs/operations.md answers it."""
    lines = {slurm_security.parse(v["version"]).line for v in table["versions"]}
    assert set(AMI_SLURM_VERSIONS) <= lines and set(SLURM_SUITES) <= lines
    block = gen.render_block(table)
    for version in table["versions"]:
        assert f"\n| {version['version']} | " in block, version["version"]
    assert "no fixed release exists for the 24.11 line" in block
    assert block in gen.DOC.read_text()


# --- the refresh script ----------------------------------------------------------------------------------------


def test_the_changelog_parser_finds_each_cves_first_release_of_the_line(refresh: Any) -> None:
    found = refresh.parse_changelog((FIXTURES / "slurm-24.11.md").read_text(), "24.11")
    assert found == {
        "CVE-2025-43904": (
            "24.11.5",
            "Fix security issue where a coordinator could add a user with elevated privileges. CVE-2025-43904.",
        )
    }
    older = refresh.parse_changelog((FIXTURES / "slurm-22.05.md").read_text(), "22.05")
    assert {cve: fix for cve, (fix, _) in older.items()} == {
        "CVE-2023-49933": "22.05.11",
        "CVE-2023-49936": "22.05.11",
        "CVE-2023-49937": "22.05.11",
        "CVE-2023-49938": "22.05.11",
        "CVE-2023-41914": "22.05.10",
        "CVE-2022-29500": "22.05.0",  # a release candidate's fix ships in the line's first release
        "CVE-2022-29501": "22.05.0",
        "CVE-2022-29502": "22.05.0",
    }
    assert refresh.parse_changelog((FIXTURES / "slurm-25.11.md").read_text(), "25.11")["CVE-2026-65107"][0] == "25.11.8"
    twice = "## Changes in 24.11.9\n\n* A follow-up. CVE-2026-11111.\n\n"
    twice += "## Changes in 24.11.8\n\n* The fix. CVE-2026-11111.\n"
    assert refresh.parse_changelog(twice, "24.11") == {"CVE-2026-11111": ("24.11.8", "The fix. CVE-2026-11111.")}


WHOLE = ("slurm-22.05.md", "slurm-24.11.md", "slurm-25.05.md")
"""The excerpts of SchedMD's CHANGELOG that keep every entry naming a CVE (slurm-25.11.md, from a release page
stored in part, does not: it serves the parser's test only)."""


def run_refresh(refresh: Any, tmp_path: Path, extra: dict[str, str], today: str) -> tuple[list[str], dict[str, Any]]:
    """The refresh on a copy of the table, SchedMD's CHANGELOG read from the stored excerpts (plus ``extra`` text
    per line), nothing else written."""
    directory = tmp_path / "changelog"
    directory.mkdir()
    for path in (FIXTURES / name for name in WHOLE):
        (directory / path.name).write_text(path.read_text())
    for line, text in extra.items():
        target = directory / f"slurm-{line}.md"
        target.write_text(text + "\n" + (target.read_text() if target.exists() else ""))
    table = tmp_path / "slurm_security.yaml"
    table.write_text(refresh.GEN.TABLE.read_text())
    changes = refresh.refresh(refresh.from_directory(directory), today, table=table, write_outputs=False)
    return changes, refresh.GEN.load(table.read_text())


def test_the_committed_table_agrees_with_schedmds_changelog(
    refresh: Any, table: dict[str, Any], tmp_path: Path
) -> None:
    changes, after = run_refresh(refresh, tmp_path, {}, table["checked"])
    assert [c for c in changes if not c.startswith("note: ")] == []
    assert after == table


def test_a_release_that_fixes_a_line_is_taken_and_the_date_recorded(refresh: Any, tmp_path: Path) -> None:
    """When SchedMD ships a fixed 24.11, the refresh records it, and the gate then names it as the fix."""
    cves = sorted({c for a in slurm_security.advisories() if a.fixed.get("24.11", "x") is None for c in a.cves})
    section = "## Changes in 24.11.8\n\n" + "".join(f"* A fix. {cve}.\n" for cve in cves)
    changes, after = run_refresh(refresh, tmp_path, {"24.11": section}, "2026-12-31")
    assert "advisory 2026-09-02: 24.11 fixed in 24.11.8 (was None)" in changes
    assert "checked: 2026-12-31 (was 2026-12-05)" in changes
    assert after["checked"] == "2026-12-31"
    answer = slurm_security.verdict("24.11.0", after["advisories"])
    assert answer.line_fix == "24.11.8" and answer.fixed_by() == "Slurm 24.11.8 or later"


def test_a_new_cve_becomes_an_unverified_advisory_to_read(refresh: Any, tmp_path: Path) -> None:
    section = "## Changes in 26.05.6\n\n* Fix a thing. CVE-2026-99999.\n"
    changes, after = run_refresh(refresh, tmp_path, {"26.05": section}, "2026-12-31")
    (row,) = [a for a in after["advisories"] if "CVE-2026-99999" in a["cves"]]
    assert row["verified"] is False and "not read yet" in row["why"] and row["date"] is None
    assert row["fixed"] == {"26.05": "26.05.6"} and row["sources"][0]["quote"] == "Fix a thing. CVE-2026-99999."
    assert any(c.startswith("new advisory new-CVE-2026-99999") for c in changes)
    assert slurm_security.verdict("26.05.5", after["advisories"]).cves == ("CVE-2026-99999",)
    assert "(date not read)" in refresh.GEN.render_block(after)


def test_an_advisory_whose_cves_part_ways_is_left_for_a_person(refresh: Any, tmp_path: Path) -> None:
    section = "## Changes in 24.11.9\n\n* CVE-2026-65107.\n\n## Changes in 24.11.8\n\n* CVE-2026-65108.\n"
    changes, after = run_refresh(refresh, tmp_path, {"24.11": section}, "2026-12-31")
    assert any("advisory 2026-09-02: on 24.11" in c and "split the advisory by hand" in c for c in changes)
    (row,) = [a for a in after["advisories"] if a["id"] == "2026-09-02"]
    assert row["fixed"]["24.11"] is None


def test_offline_the_refresh_says_so_in_one_line_and_changes_nothing() -> None:
    before = (ROOT / "src/hyperpod_cdk/data/slurm_security.yaml").read_text()
    done = subprocess.run(
        [
            sys.executable,
            "scripts/refresh_slurm_security.py",
            "--base-url",
            "http://127.0.0.1:9/",
            "--today",
            "2027-01-01",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Nothing changed" in done.stderr and "http://127.0.0.1:9/slurm-" in done.stderr
    assert (ROOT / "src/hyperpod_cdk/data/slurm_security.yaml").read_text() == before


# --- the alarm -------------------------------------------------------------------------------------------------

SERIES = re.compile(r"^(\w+)\{(.*)\} (\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
EXPR = re.compile(r"^(\w+)\{(.*)\} == (\S+)$")


def fires(expr: str, text: str, cluster: str) -> list[dict[str, str]]:
    """The series of a textfile (with the scrape's cluster label) an alert expression of the form
    ``metric{label="value",...} == N`` selects."""
    match = EXPR.match(expr)
    assert match, expr
    name, selector, wanted = match.groups()
    needed = dict(LABEL.findall(selector))
    found = []
    for line in text.splitlines():
        series = SERIES.match(line)
        if not series or series.group(1) != name or float(series.group(3)) != float(wanted):
            continue
        labels = {**dict(LABEL.findall(series.group(2))), CLUSTER_LABEL: cluster}
        if all(labels.get(k) == v for k, v in needed.items()):
            found.append(labels)
    return found


@pytest.mark.parametrize(("running", "alarms"), [("24.11.0", 1), ("25.11.7", 1), ("25.11.8", 0), ("26.05.5", 0)])
def test_the_alarm_fires_on_an_affected_cluster_and_not_on_a_fixed_one(running: str, alarms: int) -> None:
    from training_runtime.metrics.exposition import render

    def run(argv: Any) -> str:
        return f"slurm {running}\n" if list(argv) == security.VERSION else f"w1|{running}\n"

    text = render(security.security_families(run))
    (rule,) = [r for r in alert_rules("team-a") if r.name == "SlurmSecurityAffected"]
    found = fires(rule.expr, text, "team-a")
    assert len(found) == alarms, text
    assert not fires(rule.expr, text, "another-cluster")
    if alarms:
        assert found[0]["version"] == running and found[0]["cves"]
