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

from support import EXAMPLES, ROOT, build_example, fast_app, template_of

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


def _templates(tmp_path: Path) -> Path:
    out = tmp_path / "templates"
    out.mkdir()
    for example in EXAMPLES:
        for stack in build_example(example, fast_app(outdir=str(tmp_path / example.stem))):
            (out / f"{example.stem}-{stack.stack_name}.template.json").write_text(json.dumps(template_of(stack)))
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return checkov(_templates(tmp_path_factory.mktemp("scan")))


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
