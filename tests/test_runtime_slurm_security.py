"""The Slurm security gate's verdict (training_runtime.slurm_security) and its node metric (metrics.security): which
releases an advisory affects, at the patch level, per line, with no fixed release on a line, for lines older and
newer than those listed, and the metric the controller's collector writes, on a fake root with fake Slurm commands.
Stdlib and pytest only (runs on 3.8)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from training_runtime import slurm_security
from training_runtime.metrics import collect, security
from training_runtime.slurm_security import AFFECTED, UNKNOWN, parse, verdict

TABLE = [
    {
        "id": "b",
        "date": "2026-09-02",
        "title": "b",
        "cves": ["CVE-2026-2"],
        "fixed": {"24.11": None, "25.05": "25.05.9", "25.11": "25.11.8"},
        "older": "affected",
        "url": "https://example.com/b",
        "severity": None,
        "verified": True,
    },
    {
        "id": "a",
        "date": "2025-05-07",
        "title": "a",
        "cves": ["CVE-2025-1"],
        "fixed": {"24.05": "24.05.8", "24.11": "24.11.5"},
        "older": "unknown",
        "url": "https://example.com/a",
        "severity": None,
        "verified": True,
    },
]
"""A small table: one advisory with no fix on 24.11 (older lines affected), one fixed on 24.05 and 24.11 (older lines
not stated)."""


def states(version: str) -> dict[str, str]:
    return {f.advisory.id: f.state for f in verdict(version, TABLE).findings}


@pytest.mark.parametrize(
    ("text", "shown", "line"),
    [
        ("24.11.0", "24.11.0", "24.11"),
        ("slurm 24.11.5", "24.11.5", "24.11"),
        ("24.11.5-4+deb13u1", "24.11.5", "24.11"),
        ("25.05.0rc1", "25.05.0rc1", "25.05"),
        ("25.11", "25.11", "25.11"),
    ],
)
def test_versions_are_read_as_slurm_prints_them(text: str, shown: str, line: str) -> None:
    release = parse(text)
    assert (str(release), release.line) == (shown, line)


@pytest.mark.parametrize("text", ["", "slurm", "24", "latest", "v24.11.0"])
def test_a_text_that_is_no_version_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm version"):
        parse(text)


def test_a_release_candidate_comes_before_its_release() -> None:
    assert parse("25.05.0rc1").key < parse("25.05.0").key < parse("25.05.1").key


def test_the_first_fixed_release_is_fixed_and_the_one_before_it_is_not() -> None:
    assert states("25.11.7") == {"b": AFFECTED}
    assert states("25.11.8") == {}
    assert states("25.05.8") == {"b": AFFECTED} and states("25.05.9") == {}
    assert states("24.11.4")["a"] == AFFECTED and "a" not in states("24.11.5")


def test_a_line_without_a_fixed_release_says_so_plainly_and_names_the_newer_lines_that_fix_it() -> None:
    answer = verdict("24.11.9", TABLE)
    assert answer.affected and answer.cves == ("CVE-2026-2",) and answer.line_fix is None
    assert answer.upgrades == ("25.05.9", "25.11.8")
    assert answer.fixed_by() == "no fixed release exists for the 24.11 line; fixed on newer lines: 25.05.9 or 25.11.8"
    assert "no fixed release exists for the 24.11 line" in answer.summary()


def test_older_lines_are_what_the_advisory_says_and_newer_lines_came_out_fixed() -> None:
    assert states("23.11.1") == {"b": AFFECTED, "a": UNKNOWN}
    answer = verdict("23.11.1", TABLE)
    assert answer.cves == ("CVE-2026-2",) and answer.unknown_cves == ("CVE-2025-1",)
    assert "not known for this line" in answer.summary()
    assert states("26.05.0") == {}
    assert not verdict("26.05.0", TABLE).affected and verdict("26.05.0", TABLE).fixed_by() == "nothing to fix"


def test_a_line_is_answered_for_its_releases_before_the_fix() -> None:
    answer = verdict("25.11", TABLE)
    assert answer.affected and answer.line_fix == "25.11.8"
    assert answer.summary().startswith("releases of the 25.11 line (before 25.11.8) is affected")
    assert verdict("24.11", TABLE).line_fix is None


def test_the_line_fix_is_the_latest_of_the_advisories_first_fixes() -> None:
    table = [dict(TABLE[0], fixed={"24.11": "24.11.8", "25.05": "25.05.9"}), TABLE[1]]
    answer = verdict("24.11.0", table)
    assert answer.cves == ("CVE-2025-1", "CVE-2026-2") and answer.line_fix == "24.11.8"
    assert answer.fixed_by() == "Slurm 24.11.8 or later"


def test_the_committed_table_answers_hyperpods_ami_and_the_2026_releases() -> None:
    """The facts of issue #43: HyperPod's newest AMI ships 24.11.0, and no 24.11 release fixes 2026's eight CVEs,
    fixed in 25.05.9, 25.11.8 and 26.05.4."""
    assert slurm_security.ami_release("24.11") == "24.11.0" and slurm_security.ami_release("25.11") is None
    answer = slurm_security.ami_verdict("24.11")
    eight = {"CVE-2026-65107", "CVE-2026-65108", "CVE-2026-65109", "CVE-2026-65138"}
    eight |= {"CVE-2026-65139", "CVE-2026-65140", "CVE-2026-65165", "CVE-2026-65168"}
    assert eight <= set(answer.cves) and answer.line_fix is None
    assert answer.upgrades == ("25.05.9", "25.11.8", "26.05.4")
    for fixed in ("25.05.9", "25.11.8", "26.05.4"):
        assert not eight & set(verdict(fixed).cves), fixed
    assert "no fixed release exists for the 24.11 line" in slurm_security.ami_summary("24.11")


# --- the node metric -------------------------------------------------------------------------------------------


def fake_run(answers: dict[str, str]):  # type: ignore[no-untyped-def]
    def run(argv: Sequence[str]) -> str:
        key = " ".join(argv)
        if key not in answers:
            raise RuntimeError(f"{key} failed")
        return answers[key]

    return run


VERSION = " ".join(security.VERSION)
NODES = " ".join(security.NODE_VERSIONS)


def samples(run) -> dict[str, dict[tuple, float]]:  # type: ignore[no-untyped-def]
    return {f.name: dict(f.samples) for f in security.security_families(run)}


def test_the_metric_is_one_for_an_affected_release_with_its_cves_and_fix_and_zero_for_a_fixed_one() -> None:
    got = samples(fake_run({VERSION: "slurm 24.11.0\n", NODES: "w1|24.11.0\nw1|24.11.0\nw2|25.11.8\nw3|N/A\n"}))
    affected = {dict(k)["version"]: (v, dict(k)) for k, v in got[security.AFFECTED].items()}
    assert set(affected) == {"24.11.0", "25.11.8"}
    value, labels = affected["24.11.0"]
    assert value == 1 and "CVE-2026-65107" in labels["cves"].split(",")
    assert labels["fixed_by"].startswith("no fixed release exists for the 24.11 line")
    assert affected["25.11.8"][0] == 0 and affected["25.11.8"][1]["cves"] == ""
    cves = {dict(k)["version"]: v for k, v in got[security.CVES].items()}
    assert cves == {"24.11.0": len(verdict("24.11.0").cves), "25.11.8": 0}


def test_running_versions_count_each_node_once_and_skip_what_cannot_be_read() -> None:
    found = security.running_versions(fake_run({NODES: "w1|24.11.5\nw1|24.11.5\nw2|24.11.5\nw3|(null)\n"}))
    assert found == {"24.11.5": 2}
    run = fake_run({VERSION: "not a version\n"})
    assert samples(run) == {security.AFFECTED: {}, security.CVES: {}}


def write_tool(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def test_the_collector_writes_the_metric_on_a_fake_root(tmp_path: Path) -> None:
    """The controller's collector, run as the node runs it (``--slurm --slurm-bin``) against fake Slurm commands: the
    security textfile says 24.11.0 is affected; the Slurm metrics are still written beside it."""
    bin_dir = tmp_path / "opt/slurm/bin"
    bin_dir.mkdir(parents=True)
    write_tool(
        bin_dir,
        "sinfo",
        'case "$*" in\n  --version) echo "slurm 24.11.0" ;;\n  *"%N|%v"*) printf "w1|24.11.0\\nw2|24.11.0\\n" ;;\n'
        "  *) ;;\nesac\n",
    )
    for name in ("squeue", "sdiag", "sacct", "sshare", "scontrol", "sacctmgr"):
        write_tool(bin_dir, name, "exit 0\n")
    out = tmp_path / "var/lib/prometheus/node-exporter"
    assert collect.main(["--slurm", "--dir", str(out), "--slurm-bin", str(bin_dir)]) == 0
    lines: list[str] = (out / "slurm_security.prom").read_text().splitlines()
    affected = [line for line in lines if line.startswith(security.AFFECTED + "{")]
    assert len(affected) == 1 and affected[0].endswith(" 1") and 'version="24.11.0"' in affected[0]
    assert 'fixed_by="no fixed release exists for the 24.11 line' in affected[0]
    assert '{}{{version="24.11.0"}} {}'.format(security.CVES, len(verdict("24.11.0").cves)) in lines
    assert (out / "slurm.prom").is_file()
