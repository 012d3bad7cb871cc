"""``hyperpod-cdk publish`` against a moto S3 server on 127.0.0.1 (real HTTP, real botocore): content-addressed
uploads, an idempotent re-publish, a template that points at what was uploaded, and one-line errors."""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from hyperpod_cdk.cli import main
from hyperpod_cdk.core.published_layout import PublishTarget
from ops_support import REGION, Run, aws_env, moto_url  # noqa: F401
from support import ROOT
from training_runtime.params import ProvisioningParameters

BUCKET = "platform-templates"
CONFIG: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "cpu-cluster.yaml").read_text())


def s3() -> Any:
    return boto3.client("s3", region_name=REGION)


def keys() -> set[str]:
    pages = s3().get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return {o["Key"] for page in pages for o in page.get("Contents", [])}


def cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> Run:
    code = main(list(argv))
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


@pytest.fixture
def bucket(aws_env: str) -> str:  # noqa: F811
    s3().create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    # Versioned, as a platform bucket should be: a second write of a key would show as a second version.
    s3().put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    return BUCKET


def writes() -> int:
    """Every object version in the bucket: one per put."""
    pages = s3().get_paginator("list_object_versions").paginate(Bucket=BUCKET)
    return sum(len(page.get("Versions", [])) for page in pages)


def write_config(path: Path, **changes: Any) -> Path:
    path.write_text(yaml.safe_dump({**CONFIG, **changes}))
    return path


@pytest.mark.slow  # 5 s or more: make test, not make test-fast
def test_publish_uploads_once_points_the_template_at_its_files_and_keeps_old_versions(
    bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "cluster.yaml")
    first = cli("publish", str(config), "--bucket", bucket, "--prefix", "teams/ml", "--json", capsys=capsys)
    assert first.code == 0, first.err
    report = first.json()
    assert report["skipped"] == []
    assert {f"s3://{bucket}/{k}" for k in keys()} == set(report["uploaded"])
    assert not [k for k in keys() if "/assets/" in k]  # the stack's own template goes to templates/ only
    [template] = report["templates"]
    assert re.fullmatch(r"teams/ml/templates/hyperpod-cpu-cluster/[0-9a-f]{64}\.template\.json", template["key"])
    assert template["template_url"] == f"https://{bucket}.s3.{REGION}.amazonaws.com/{template['key']}"
    assert "/stacks/quickcreate?templateURL=https%3A%2F%2F" in template["launch_url"]
    assert template["launch_url"].endswith("&stackName=hyperpod-cpu-cluster")

    # The template in the bucket points every group at a prefix whose files publish uploaded, SSE-encrypted.
    body = s3().get_object(Bucket=bucket, Key=template["key"])["Body"].read()
    [cluster] = [r for r in json.loads(body)["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    [uri] = {g["LifeCycleConfig"]["SourceS3Uri"] for g in cluster["Properties"]["InstanceGroups"]}
    lifecycle = uri.removeprefix(f"s3://{bucket}/")
    assert re.fullmatch(r"teams/ml/lifecycle/[0-9a-f]{64}/", lifecycle)
    under = {k.removeprefix(lifecycle) for k in keys() if k.startswith(lifecycle)}
    assert {
        "on_init_complete.sh",
        "training_runtime/__main__.py",
        "users.json",
        "hyperpod_cdk_parameters.json",
    } <= under
    parameters = s3().get_object(Bucket=bucket, Key=lifecycle + "hyperpod_cdk_parameters.json")
    assert parameters["ServerSideEncryption"] == "AES256"
    params = ProvisioningParameters.loads(parameters["Body"].read().decode())
    assert params.cluster_name == "cpu-cluster" and params.has_fsx and params.options == CONFIG["runtime"]

    again = cli("publish", str(config), "--bucket", bucket, "--prefix", "teams/ml/", "--json", capsys=capsys)
    assert again.code == 0, again.err
    assert again.json()["uploaded"] == []
    assert writes() == len(report["uploaded"])
    assert sorted(again.json()["skipped"]) == sorted(report["uploaded"])

    # A runtime option changes only the parameters file: a new lifecycle prefix and a new template; old ones stay.
    changed = write_config(tmp_path / "cluster.yaml", runtime={"accounting": {"enabled": False}})
    before = keys()
    third = cli("publish", str(changed), "--bucket", bucket, "--prefix", "teams/ml", "--json", capsys=capsys)
    assert third.code == 0, third.err
    new = keys() - before
    assert before <= keys()
    new_prefixes = {k.split("/")[3] for k in new if k.startswith("teams/ml/lifecycle/")}
    assert len(new_prefixes) == 1 and new_prefixes != {lifecycle.split("/")[3]}
    assert [k for k in new if "/templates/" in k] == [third.json()["templates"][0]["key"]]
    assert third.json()["templates"][0]["key"] != template["key"]


def test_the_text_report_names_what_was_uploaded_and_the_urls(
    bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = cli("publish", str(write_config(tmp_path / "c.yaml")), "--bucket", bucket, capsys=capsys)
    assert run.code == 0, run.err
    assert re.search(r"lifecycle\s+│ s3://platform-templates/lifecycle/[0-9a-f]{64}/", run.out)
    assert "object(s) uploaded, 0 already there" in run.out
    assert "launch URL: https://us-west-2.console.aws.amazon.com/cloudformation/home?region=us-west-2#" in run.out


def test_a_missing_bucket_is_one_line_and_exit_2(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    run = cli("publish", str(ROOT / "examples" / "cpu-cluster.yaml"), "--bucket", "no-such-bucket", capsys=capsys)
    assert run.code == 2
    assert run.err == (
        "error: bucket no-such-bucket does not exist: create the platform bucket first, or pass its name to --bucket\n"
    )


def test_no_credentials_is_one_line_and_exit_2(
    aws_env: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    run = cli("publish", str(ROOT / "examples" / "cpu-cluster.yaml"), "--bucket", BUCKET, capsys=capsys)
    assert run.code == 2
    assert run.err.startswith("error: no AWS credentials") and run.err.count("\n") == 1


def test_a_bad_prefix_and_a_bad_config_are_refused_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = cli("publish", "x.yaml", "--bucket", BUCKET, "--prefix", "/abs", capsys=capsys)
    assert (run.code, run.err.startswith("error: --prefix: got '/abs/'")) == (2, True)
    run = cli("publish", "x.yaml", "--bucket", "Bad_Bucket!", capsys=capsys)  # botocore would refuse it raw
    assert (run.code, run.err.startswith("error: --bucket: got 'Bad_Bucket!'"), run.err.count("\n")) == (2, True, 1)
    bad = write_config(tmp_path / "bad.yaml", cluster_name="not_valid!")
    run = cli("publish", str(bad), "--bucket", BUCKET, capsys=capsys)
    assert run.code == 1 and "cluster_name" in run.err
    no_build = tmp_path / "app.py"
    no_build.write_text("STACKS = []\n")
    run = cli("publish", str(no_build), "--bucket", BUCKET, capsys=capsys)
    assert run.code == 1 and "has no build(app) function" in run.err


def test_the_service_catalog_example_publishes_its_product_template_and_lifecycle_files(
    bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``publish APP.py``: the app's build(app) learns the bucket and prefix from the context."""
    app_file = str(ROOT / "examples" / "service_catalog.py")
    run = cli("publish", app_file, "--bucket", bucket, "--prefix", "catalog/", "--json", capsys=capsys)
    assert run.code == 0, run.err
    report = run.json()
    [portfolio] = report["templates"]
    assert portfolio["stack"] == "hyperpod-catalog"
    body = json.loads(s3().get_object(Bucket=bucket, Key=portfolio["key"])["Body"].read())
    [product] = [r for r in body["Resources"].values() if r["Type"] == "AWS::ServiceCatalog::CloudFormationProduct"]
    url = product["Properties"]["ProvisioningArtifactParameters"][0]["Info"]["LoadTemplateFromURL"]["Fn::Sub"]
    product_key = url.split(f"/{bucket}/", 1)[1]
    assert product_key.startswith("catalog/assets/") and product_key in keys()
    product_template = json.loads(s3().get_object(Bucket=bucket, Key=product_key)["Body"].read())
    [cluster] = [r for r in product_template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    uri = cluster["Properties"]["InstanceGroups"][0]["LifeCycleConfig"]["SourceS3Uri"]
    assert f"{uri.removeprefix(f's3://{bucket}/')}hyperpod_cdk_parameters.json" in keys()
    assert not [r for r in product_template["Resources"].values() if r["Type"].startswith(("AWS::Lambda", "Custom::"))]


def test_kms_key_encrypts_the_objects(bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key_id = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["KeyId"]
    config = str(write_config(tmp_path / "c.yaml"))
    run = cli("publish", config, "--bucket", bucket, "--kms-key-id", key_id, "--json", capsys=capsys)
    assert run.code == 0, run.err
    head = s3().head_object(Bucket=bucket, Key=run.json()["templates"][0]["key"])
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"].split("/")[-1]) == ("aws:kms", key_id)


def test_a_directory_asset_is_zipped_from_its_content_alone(tmp_path: Path) -> None:
    """ZIP_DIRECTORY assets: the same files give the same bytes (a content-addressed key never changes)."""
    from hyperpod_cdk.publishing.upload import plan

    def assembly(root: Path, mtime: int) -> Path:
        (root / "asset.abc").mkdir(parents=True)
        for name, body in (("index.py", "print(1)\n"), ("lib/util.py", "X = 2\n")):
            path = root / "asset.abc" / name
            path.parent.mkdir(exist_ok=True)
            path.write_text(body)
            os.utime(path, (mtime, mtime))
        asset = {
            "source": {"path": "asset.abc", "packaging": "zip"},
            "destinations": {"d": {"bucketName": "b", "objectKey": "p/assets/abc.zip"}},
        }
        (root / "s.assets.json").write_text(json.dumps({"version": "55.0.0", "files": {"abc": asset}}))
        artifacts = {"s.assets": {"type": "cdk:asset-manifest", "properties": {"file": "s.assets.json"}}}
        (root / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))
        return root

    first = plan(assembly(tmp_path / "one", 1_000_000), PublishTarget("b", "p/")).items
    second = plan(assembly(tmp_path / "two", 2_000_000), PublishTarget("b", "p/")).items
    [item] = first
    assert (item.bucket, item.key) == ("b", "p/assets/abc.zip")
    assert item.body == second[0].body
    assert sorted(zipfile.ZipFile(io.BytesIO(item.body)).namelist()) == ["index.py", "lib/util.py"]


@pytest.mark.slow  # 5 s or more: make test, not make test-fast
def test_the_command_prints_no_node_end_of_life_banner(bucket: str, tmp_path: Path) -> None:
    """Run as a user runs it (a new process, nothing silencing jsii in the environment): the publish synth
    loads aws_cdk, and jsii's Node 20 end-of-life banner must not reach the user's terminal."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"}
    argv = [sys.executable, "-m", "hyperpod_cdk.cli", "publish", str(write_config(tmp_path / "c.yaml"))]
    result = subprocess.run(
        [*argv, "--bucket", bucket, "--json"], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "end-of-life" not in result.stdout + result.stderr
    assert json.loads(result.stdout)["templates"]  # it did synthesize (and so loaded aws_cdk)
