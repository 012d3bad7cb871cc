"""IaC scanners: every checkov finding on every example's template is fixed or carries its reason.

checkov runs from its own virtual environment (``make setup`` installs it in ``.venv-scan``: its pinned
dependencies would fight ours) inside a network namespace of its own, so it cannot reach its vendor's API.
A finding we keep on purpose is recorded in the resource's ``Metadata.checkov.skip`` with a comment
(``hyperpod_cdk.constructs.scanners``); checkov reports it as skipped, with that comment.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from example_builds import ExampleBuilds, publishable
from hyperpod_cdk import TrainingClusterStack, parse_config
from reviewed_files import check_reviewed
from support import EXAMPLES, ROOT, fast_app, template_of

CHECKOV = ROOT / ".venv-scan" / "bin" / "checkov"

pytestmark = pytest.mark.compliance


def checkov(directory: Path) -> dict[str, Any]:
    """checkov's JSON report on the CloudFormation templates in ``directory`` (offline, no network)."""
    assert CHECKOV.exists(), f"{CHECKOV} is missing: run make setup"
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is needed to run checkov without network"
    argv = [unshare, "--net", str(CHECKOV), "-d", str(directory), "--framework", "cloudformation"]
    argv += ["--skip-download", "--compact", "--output", "json"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    # checkov exits 1 when a check fails; anything else but 0 is a crash.
    assert result.returncode in (0, 1), result.stderr[-2000:]
    report = json.loads(result.stdout) if result.stdout.strip() else {}
    if isinstance(report, list):  # one entry per framework
        (report,) = report
    return report


OPENZFS_TEMPLATE = "openzfs-homes"


def _templates(tmp_path: Path, builds: ExampleBuilds) -> Path:
    """Every template a user deploys or a platform team publishes, as files in one directory: each example as
    ``cdk deploy`` takes it, each config example as ``hyperpod-cdk publish`` builds it, and each Service Catalog
    product's template (``builds``: tests/example_builds.py)."""
    out = tmp_path / "templates"
    out.mkdir()
    for build in builds.all():
        for name, template in build.template_files().items():
            (out / name).write_text(json.dumps(template))
    # Not an example yet: homes on a new FSx for OpenZFS beside the default Lustre.
    app = fast_app(outdir=str(tmp_path / "openzfs"))
    homes = TrainingClusterStack(app, "homes", config=parse_config({"storage_openzfs": {}}))
    (out / f"{OPENZFS_TEMPLATE}.template.json").write_text(json.dumps(template_of(homes)))
    return out


@pytest.fixture(scope="module")
def templates(scanned_templates: Path) -> Path:
    """:func:`_templates`, synthesized once per test process (tests/conftest.py ``scanned_templates``)."""
    return scanned_templates


def test_the_scan_covers_published_and_product_templates(templates: Path) -> None:
    names = {p.name for p in templates.iterdir()}
    published = {n for n in names if "-published." in n}
    assert published == {f"{e.stem}-published.template.json" for e in EXAMPLES if publishable(e)}
    assert len(published) >= 3
    assert any(n.endswith(".product.template.json") for n in names)
    assert f"{OPENZFS_TEMPLATE}.template.json" in names


@pytest.mark.slow  # handed out first (tests/conftest.py)
def test_the_scan_saw_the_new_openzfs_file_system(report: dict[str, Any]) -> None:
    results = report.get("results", {})
    checked = [
        r for k in ("passed_checks", "skipped_checks") for r in results.get(k, []) if OPENZFS_TEMPLATE in r["file_path"]
    ]
    assert any(r["resource"].startswith("AWS::EC2::SecurityGroup.OpenZfs") for r in checked)


@pytest.fixture(scope="module")
def report(templates: Path) -> dict[str, Any]:
    return checkov(templates)


def test_checkov_finds_nothing_unexplained(report: dict[str, Any]) -> None:
    results = report.get("results", {})
    failed = [f"{f['check_id']} {f['resource']} ({f['file_path']})" for f in results.get("failed_checks", [])]
    assert failed == []
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] > 100  # the templates were scanned, not skipped


def test_every_kept_finding_carries_its_reason(report: dict[str, Any]) -> None:
    skipped = report.get("results", {}).get("skipped_checks", [])
    assert skipped, "the examples keep some findings on purpose (e.g. CKV_AWS_18 without a log bucket)"
    missing = [
        f"{s['check_id']} {s['resource']}"
        for s in skipped
        if len(s["check_result"].get("suppress_comment") or "") < 40  # a sentence, not a placeholder
    ]
    assert missing == []


def test_the_scan_fails_on_an_unexplained_finding(tmp_path: Path) -> None:
    """The harness catches a finding: a bucket without access logs and no reason is reported as failed."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    stack = cdk.Stack(fast_app(outdir=str(tmp_path / "out")), "Bad")
    s3.Bucket(stack, "Plain", enforce_ssl=True)
    (tmp_path / "bad.template.json").write_text(json.dumps(template_of(stack)))
    failed = {f["check_id"] for f in checkov(tmp_path).get("results", {}).get("failed_checks", [])}
    assert "CKV_AWS_18" in failed


FINDINGS_DOC = ROOT / "docs" / "scanner-findings.md"
FINDINGS_HEADER = """# Scanner findings kept by design

Generated by `tests/test_scanners.py` from checkov's report over every example's template (as `cdk deploy`
takes it, as `hyperpod-cdk publish` builds it, and each Service Catalog product); regenerate with
`UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_scanners.py` after a reviewed change. Every other check
passes. Each finding below carries its reason in the template (`Metadata.checkov.skip`), where a reviewer
reads it next to the resource; the reasons are defined in `src/hyperpod_cdk/constructs/scanners.py` (and,
for the Service Catalog launch role, `examples/service_catalog.py`).

| Check | Resource type | Templates | Reason |
| --- | --- | --- | --- |
"""


def _kind(file_path: str) -> str:
    if file_path.endswith(".product.template.json"):
        return "Service Catalog product"
    return "published" if "-published." in file_path else "cdk deploy"


def findings_table(report: dict[str, Any]) -> str:
    rows: dict[tuple[str, str, str], set[str]] = {}
    for skip in report.get("results", {}).get("skipped_checks", []):
        kind = skip["resource"].split(".")[0]
        reason = " ".join(skip["check_result"]["suppress_comment"].split()).replace("|", "\\|")
        rows.setdefault((skip["check_id"], kind, reason), set()).add(_kind(skip["file_path"]))
    lines = [
        f"| {check} | `{kind}` | {', '.join(sorted(kinds))} | {reason} |"
        for (check, kind, reason), kinds in sorted(rows.items())
    ]
    return FINDINGS_HEADER + "\n".join(lines) + "\n"


def test_the_kept_findings_table_is_current(report: dict[str, Any]) -> None:
    check_reviewed(FINDINGS_DOC, findings_table(report), "UPDATE_SNAPSHOTS")
