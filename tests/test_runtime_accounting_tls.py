"""slurmdbd reaches an external accounting database over TLS (security review L5): slurmdbd.conf names the CA bundle
(``StorageParameters=SSL_CA=...``), and the controller puts a bundle there only after checking its sha256 against
the config's; a local database, reached over its socket, gets no StorageParameters."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hyperpod_cdk.core.config import parse_model
from runtime_fakes import RecordingRunner, fake_node
from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.option_types import RDS_CA_BUNDLE_URL
from training_runtime.options import options_problems
from training_runtime.render import render_slurmdbd_conf
from training_runtime.render.slurm_conf import RenderError
from training_runtime.steps.accounting import CA_BUNDLE_DOWNLOAD, SlurmdbdConfig, ca_bundle_path
from training_runtime.steps.slurm import conf_path

SECRET = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:slurmdb-AbCdEf"
BUNDLE = b"-----BEGIN CERTIFICATE-----\nMIIB (a test CA)\n-----END CERTIFICATE-----\n"
SUM = hashlib.sha256(BUNDLE).hexdigest()
EXTERNAL = {"enabled": True, "database": "external", "host": "db.example", "password_secret_arn": SECRET}


def controller(root: Path, served: bytes, **accounting: object) -> tuple[Node, RecordingRunner]:
    """The controller of a cluster with an external database; ``curl --output`` writes ``served``."""
    runner = RecordingRunner({("aws", "secretsmanager"): (0, json.dumps({"password": "s3cr3t-value"}))})

    def serve(argv: list[str]) -> None:
        if argv[0] == "curl":
            Path(argv[argv.index("--output") + 1]).write_bytes(served)

    runner.hooks.append(serve)
    options = {"accounting": {**EXTERNAL, **accounting}}
    return fake_node(root, instance="controller-1", options=options, runner=runner), runner


def test_slurmdbd_reaches_an_external_database_over_tls_with_the_checked_bundle(tmp_path: Path) -> None:
    node, runner = controller(tmp_path, BUNDLE, ca_bundle_sha256=SUM)
    assert SlurmdbdConfig().needed(node)
    SlurmdbdConfig().apply(node)
    bundle = conf_path(node, "accounting-ca-bundle.pem")
    text = (tmp_path / conf_path(node, "slurmdbd.conf").lstrip("/")).read_text()
    assert f"\nStorageParameters=SSL_CA={bundle}\n" in text
    assert (tmp_path / bundle.lstrip("/")).read_bytes() == BUNDLE
    [curl] = runner.ran("curl")
    assert curl[-1] == RDS_CA_BUNDLE_URL and curl[curl.index("--proto") + 1] == "=https"
    assert not (tmp_path / CA_BUNDLE_DOWNLOAD.lstrip("/")).exists()  # the download is not left behind
    assert not SlurmdbdConfig().needed(node)
    (tmp_path / bundle.lstrip("/")).write_bytes(BUNDLE + b"tampered\n")
    assert SlurmdbdConfig().needed(node)  # a changed bundle is fetched and checked again


def test_a_bundle_with_another_sum_never_reaches_slurmdbd(tmp_path: Path) -> None:
    other = b"<html>a proxy's page</html>\n"
    node, _ = controller(tmp_path, other, ca_bundle_sha256=SUM)
    with pytest.raises(StepFailed, match=f"sha256 {hashlib.sha256(other).hexdigest()} but .* refusing it"):
        SlurmdbdConfig().apply(node)
    assert not (tmp_path / conf_path(node, "accounting-ca-bundle.pem").lstrip("/")).exists()
    assert not (tmp_path / conf_path(node, "slurmdbd.conf").lstrip("/")).exists()
    assert not (tmp_path / CA_BUNDLE_DOWNLOAD.lstrip("/")).exists()


def test_without_a_sum_nothing_is_downloaded(tmp_path: Path) -> None:
    node, runner = controller(tmp_path, BUNDLE)
    with pytest.raises(StepFailed, match="ca_bundle_sha256 is not set"):
        SlurmdbdConfig().apply(node)
    assert runner.ran("curl") == [] and runner.ran("aws") == []


def test_a_local_database_gets_no_storage_parameters(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1", options={"accounting": {"enabled": True}})
    assert ca_bundle_path(node) is None
    text = render_slurmdbd_conf(
        dbd_host="controller-1", storage_host="localhost", storage_port=3306, storage_user="slurm", storage_pass="pw"
    )
    assert "StorageParameters" not in text


@pytest.mark.parametrize("path", ["/etc/slurm/ca,SSL_KEY=/x.pem", "/etc/slurm/c a.pem", "relative.pem", "/a#b"])
def test_the_bundle_path_cannot_carry_another_storage_parameter(path: str) -> None:
    with pytest.raises(RenderError, match="ssl_ca"):
        render_slurmdbd_conf(
            dbd_host="c-1", storage_host="db", storage_port=3306, storage_user="slurm", storage_pass="pw", ssl_ca=path
        )


def test_the_bundle_url_is_https_and_the_sum_is_a_sha256() -> None:
    problems = options_problems(
        {"accounting": {**EXTERNAL, "ca_bundle_url": "http://example.com/b.pem", "ca_bundle_sha256": "abc"}}
    )
    assert {p.path for p in problems} == {"options.accounting.ca_bundle_url", "options.accounting.ca_bundle_sha256"}


def _tls_problems(data: dict[str, object]) -> list[str]:
    return [str(p) for p in parse_model(data).problems() if p.rule == "CL-ACCOUNTING-TLS"]


def test_validate_requires_the_sum_where_the_runtime_runs_slurmdbd_and_not_where_hyperpod_does() -> None:
    runtime_runs = {"mode": "lifecycle-driven", "runtime": {"accounting": EXTERNAL}}
    [problem] = _tls_problems(runtime_runs)
    assert problem.startswith("runtime.accounting.ca_bundle_sha256:") and "over TLS" in problem
    assert _tls_problems({**runtime_runs, "runtime": {"accounting": {**EXTERNAL, "ca_bundle_sha256": SUM}}}) == []
    hyperpod_runs = {"mode": "api-driven", "node_provisioning_mode": "continuous", "runtime": {"accounting": EXTERNAL}}
    assert _tls_problems(hyperpod_runs) == []
