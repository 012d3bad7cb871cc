"""``hyperpod-cdk publish CONFIG --bucket B``: synthesize the published template and upload it, content-addressed.

Exit status: 0 published; 1 the config has problems (each listed); 2 publishing failed (bad arguments, no
credentials, missing bucket, access denied: one line saying what to do).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (`hyperpod-cdk --help` stays light)
if TYPE_CHECKING:  # `hyperpod-cdk --help` builds this command's parser: it loads only what the parser needs
    from typing import Any, TextIO

    from hyperpod_cdk.core.published_layout import PublishTarget
    from hyperpod_cdk.publishing.synth import BuildApp

EXIT_CONFIG = 1
EXIT_FAILED = 2


def register(commands: Any) -> None:
    publish = commands.add_parser(
        "publish",
        help="publish a config as a CloudFormation template that needs no CDK bootstrap (S3, content-addressed)",
        description="Synthesizes the config's cluster as a published template (no CDK bootstrap, assets or "
        "Lambda functions) and uploads its lifecycle files, file assets and template under --prefix in --bucket; "
        "keys name their content, so what exists with the same bytes is skipped and an object changed since it was "
        "published stops the upload. Prints the template URL and the console's "
        "launch URL. Exit status: 0 published, 1 config problems, 2 publishing failed. See docs/publishing.md.",
    )
    publish.add_argument(
        "config",
        help="cluster config file (YAML or JSON), or a Python app file with build(app) that reads the bucket and "
        "prefix from the context keys publish_bucket and publish_prefix (e.g. examples/service_catalog.py)",
    )
    publish.add_argument("--bucket", required=True, help="the platform bucket (it must exist)")
    publish.add_argument("--prefix", default="", help="key prefix in the bucket, e.g. platform/hyperpod/")
    publish.add_argument("--region", help="Region of the template's checks and the launch URL (default: the bucket's)")
    publish.add_argument("--stack-name", help="stack name in the launch URL (default: hyperpod-<cluster_name>)")
    publish.add_argument("--profile", help="AWS profile (default: the standard chain)")
    publish.add_argument("--endpoint-url", help="S3 endpoint (e.g. a local S3-compatible server)")
    publish.add_argument("--kms-key-id", help="encrypt the uploaded objects with this KMS key (default: SSE-S3)")
    publish.add_argument(
        "--bucket-owner",
        help="the account ID that owns --bucket: every S3 call checks it (ExpectedBucketOwner) and the template's "
        "nodes read their lifecycle files only from a bucket of that account (default: the caller's account)",
    )
    publish.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``hyperpod-cdk publish`` for a config file."""
    from hyperpod_cdk.core.errors import ConfigurationError
    from hyperpod_cdk.core.published_layout import ACCOUNT_ID, PublishTarget, prefix_problem
    from hyperpod_cdk.publishing.synth import app_stacks, config_stacks
    from hyperpod_cdk.rules.repositories import bucket_name_problem

    err = stderr or sys.stderr
    target = PublishTarget(args.bucket, args.prefix, args.bucket_owner)
    bucket_problem = bucket_name_problem(target.bucket_name)
    problem = f"--bucket: got {target.bucket_name!r}; {bucket_problem}" if bucket_problem else None
    problem = problem or prefix_problem(target.prefix, "--prefix")
    if not problem and target.bucket_owner is not None and not ACCOUNT_ID.match(target.bucket_owner):
        problem = f"--bucket-owner: got {target.bucket_owner!r}; expected a 12-digit AWS account ID"
    if problem:
        print(f"error: {problem}", file=err)
        return EXIT_FAILED
    try:
        if args.config.endswith(".py"):
            build = app_stacks(args.config, target)
        else:
            build = config_stacks(args.config, target, stack_name=args.stack_name, region=args.region)
    except ConfigurationError as error:
        print(f"error: {error}", file=err)
        return EXIT_CONFIG
    return publish(
        build,
        target,
        source=args.config,
        region=args.region,
        profile=args.profile,
        endpoint_url=args.endpoint_url,
        kms_key_id=args.kms_key_id,
        as_json=args.json,
        stdout=stdout,
        stderr=stderr,
    )


def publish(
    build: BuildApp,
    target: PublishTarget,
    *,
    source: str,
    region: str | None = None,
    profile: str | None = None,
    endpoint_url: str | None = None,
    kms_key_id: str | None = None,
    as_json: bool = False,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    session_factory: Callable[[str | None, str | None], Any] | None = None,
) -> int:
    """Synthesizes ``build``'s app into a temporary directory and publishes what it holds to ``target``, in a bucket
    of ``target.bucket_owner`` (default: the caller's account, from STS)."""
    import dataclasses
    import tempfile
    from pathlib import Path

    from hyperpod_cdk.aws.clients import aws_errors
    from hyperpod_cdk.aws.errors import OpsError
    from hyperpod_cdk.aws.session import make_session
    from hyperpod_cdk.core.errors import ConfigurationError
    from hyperpod_cdk.publishing.synth import PUBLISH_CONTEXT, synthesize
    from hyperpod_cdk.publishing.upload import PublishError, plan, upload

    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        with aws_errors():
            session = (session_factory or make_session)(profile, region)
            s3 = session.client("s3", endpoint_url=endpoint_url)
            owner = target.bucket_owner or str(session.client("sts").get_caller_identity()["Account"])
            target = dataclasses.replace(target, bucket_owner=owner)
            bucket_region = _bucket_region(s3, target.bucket_name, owner)
            with tempfile.TemporaryDirectory(prefix="hyperpod-cdk-publish-") as outdir:
                assembly = synthesize(build, Path(outdir), source=source, context={PUBLISH_CONTEXT[2]: owner})
                work = plan(assembly, target)
                results = upload(s3, work.items, owner=owner, kms_key_id=kms_key_id)
    except ConfigurationError as error:
        print(f"error: {error}", file=err)
        return EXIT_CONFIG
    except (OpsError, PublishError) as error:
        print(f"error: {error}", file=err)
        return EXIT_FAILED
    from hyperpod_cdk.publishing.urls import launch_url, template_url

    console_region = region or bucket_region
    report: dict[str, Any] = {
        "bucket": target.bucket_name,
        "bucket_owner": target.bucket_owner,
        "prefix": target.prefix,
        "uploaded": [f"s3://{r.item.bucket}/{r.item.key}" for r in results if r.uploaded],
        "skipped": [f"s3://{r.item.bucket}/{r.item.key}" for r in results if not r.uploaded],
        "templates": [],
    }
    for template in work.templates:
        url = template_url(template.bucket, template.key, bucket_region)
        report["templates"].append(
            {
                "stack": template.stack,
                "key": template.key,
                "template_url": url,
                "launch_url": launch_url(url, template.stack, console_region),
            }
        )
    if as_json:
        import json

        json.dump(report, out, indent=2)
        out.write("\n")
    else:
        _print(report, results, out)
    return 0


def _bucket_region(s3: Any, bucket: str, owner: str) -> str:
    """The bucket's Region (its template URL is in it); checks that the bucket exists and is ``owner``'s before any
    synth."""
    from hyperpod_cdk.publishing.upload import check_bucket

    check_bucket(s3, bucket, owner)
    location = s3.get_bucket_location(Bucket=bucket, ExpectedBucketOwner=owner).get("LocationConstraint")
    return str(location or "us-east-1")


def _print(report: dict[str, Any], results: list[Any], out: TextIO) -> None:
    """A table with a row per lifecycle prefix, asset and template, then the URLs."""
    from rich.console import Console
    from rich.table import Table

    rows: dict[tuple[str, str], list[bool]] = {}
    for result in results:
        item = result.item
        rows.setdefault((item.what, f"s3://{item.bucket}/{item.group or item.key}"), []).append(result.uploaded)
    table = Table(title=f"published to s3://{report['bucket']}/{report['prefix']}")
    for column in ("what", "object", "uploaded", "skipped"):
        table.add_column(column)
    for (what, where), uploaded in rows.items():
        table.add_row(what, where, str(sum(uploaded)), str(len(uploaded) - sum(uploaded)))
    console = Console(file=out, width=200, soft_wrap=True)
    console.print(table)
    console.print(f"{len(report['uploaded'])} object(s) uploaded, {len(report['skipped'])} already there")
    for template in report["templates"]:
        console.print(f"template URL ({template['stack']}): {template['template_url']}", highlight=False)
        console.print(f"launch URL: {template['launch_url']}", highlight=False)
