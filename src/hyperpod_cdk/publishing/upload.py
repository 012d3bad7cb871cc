"""What a cloud assembly publishes, and the content-addressed upload of it.

Three kinds of objects: the lifecycle prefixes the constructs wrote into the assembly
(:class:`~hyperpod_cdk.core.published_layout.LifecycleTree`), the file assets of ``<stack>.assets.json`` (a
``file`` as is, a ``zip`` directory zipped deterministically), and each stack's template under
``<prefix>templates/<stack>/<sha256>.template.json``. Every key names its content, so a key that exists with the
same bytes is skipped: a re-publish of unchanged input uploads nothing, and nothing published is ever overwritten.
A key that exists with other bytes was changed after it was published (the lifecycle files run as root on every
node): the upload is refused before anything is written, naming each such key. Every call names the bucket's
expected owner (``ExpectedBucketOwner``), so a bucket name that another account holds is never written to. S3's
"Verifying bucket ownership with bucket owner condition": "We recommend using bucket owner condition whenever you
perform a supported S3 operation and know the account ID of the expected bucket owner."
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_cdk.core.published_layout import LifecycleTree, PublishTarget, template_key, tree_hash

STACK_ARTIFACT = "aws:cloudformation:stack"
ASSET_MANIFEST_ARTIFACT = "cdk:asset-manifest"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
"""Every zip entry's timestamp: the zip of a directory depends on its content only."""


class PublishError(Exception):
    """Publishing cannot go on; the message is one line saying what to do."""


@dataclass(frozen=True)
class Item:
    """One object to publish: where it goes, what it is (for people), its bytes, and the prefix it is
    reported under (a lifecycle prefix's files are one row)."""

    bucket: str
    key: str
    what: str
    body: bytes
    group: str = ""


@dataclass(frozen=True)
class Template:
    """A stack's template as published."""

    stack: str
    bucket: str
    key: str


@dataclass
class Plan:
    items: list[Item]
    templates: list[Template]


def plan(outdir: Path, target: PublishTarget) -> Plan:
    """Everything the cloud assembly at ``outdir`` publishes, lifecycle files first and templates last (a
    template is only uploaded once what it points at is there)."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    artifacts: dict[str, Any] = manifest.get("artifacts", {})
    stacks = {name: a for name, a in artifacts.items() if a.get("type") == STACK_ARTIFACT}
    template_files = {a["properties"]["templateFile"] for a in stacks.values()}
    items: list[Item] = []
    for tree in LifecycleTree.all_in(outdir):
        files = tree.files()
        if tree_hash(files) != tree.tree:
            raise PublishError(
                f"{tree.directory} does not hold the files its name says (hash {tree_hash(files)}): the cloud "
                "assembly changed after synth; publish again"
            )
        items += [
            Item(tree.bucket, tree.key_prefix + name, "lifecycle", body, group=tree.key_prefix)
            for name, body in files.items()
        ]
    for artifact in artifacts.values():
        if artifact.get("type") == ASSET_MANIFEST_ARTIFACT:
            items += _assets(outdir, outdir / artifact["properties"]["file"], skip=template_files)
    templates = []
    for name, artifact in sorted(stacks.items()):
        stack_name = artifact.get("properties", {}).get("stackName", name)
        body = (outdir / artifact["properties"]["templateFile"]).read_bytes()
        key = template_key(target.prefix, stack_name, body)
        items.append(Item(target.bucket_name, key, f"template of {stack_name}", body))
        templates.append(Template(stack_name, target.bucket_name, key))
    return Plan(items, templates)


def _assets(outdir: Path, asset_manifest: Path, *, skip: set[str]) -> Iterator[Item]:
    """The file assets of one ``<stack>.assets.json``, but the stack templates (published under
    ``templates/``); a Docker image asset cannot be published to a bucket and is refused."""
    data = json.loads(asset_manifest.read_text())
    if data.get("dockerImages"):
        raise PublishError(
            f"{asset_manifest.name} lists Docker image assets ({', '.join(data['dockerImages'])}); a published "
            "template can only use file assets"
        )
    for asset_hash, asset in sorted(data.get("files", {}).items()):
        source = asset["source"]
        if source.get("path") in skip:
            continue
        if "path" not in source:
            raise PublishError(f"file asset {asset_hash} in {asset_manifest.name} has no path (an executable source)")
        path = outdir / source["path"]
        body = _zip(path) if source.get("packaging") == "zip" and path.is_dir() else path.read_bytes()
        for destination in asset["destinations"].values():
            yield Item(destination["bucketName"], destination["objectKey"], asset.get("displayName", "asset"), body)


def _zip(directory: Path) -> bytes:
    """The directory as a zip that depends only on its files' paths, bytes and executable bits."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(directory).as_posix(), date_time=_ZIP_DATE)
            info.external_attr = (0o755 if path.stat().st_mode & 0o111 else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


@dataclass(frozen=True)
class Result:
    item: Item
    uploaded: bool


def upload(s3: Any, items: list[Item], *, owner: str, kms_key_id: str | None = None) -> list[Result]:
    """Uploads each item whose key does not exist yet, encrypted (SSE-S3, or SSE-KMS with ``kms_key_id``) and with
    its SHA-256 (S3 refuses a body that does not match it), to buckets of ``owner`` only. Every destination bucket
    is checked first, then every existing key's bytes, so a missing bucket or a changed object uploads nothing."""
    for bucket in sorted({item.bucket for item in items}):
        check_bucket(s3, bucket, owner)
    encryption: dict[str, str] = (
        {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_id}
        if kms_key_id
        else {"ServerSideEncryption": "AES256"}
    )
    existing = {id(item): _stored(s3, item, owner) for item in items}
    changed = [
        f"s3://{item.bucket}/{item.key} (sha256 {found}, published as {_sha256(item.body)})"
        for item in items
        if (found := existing[id(item)]) is not None and found != _sha256(item.body)
    ]
    if changed:
        raise PublishError(
            f"{len(changed)} published object(s) hold other bytes than their key names, so someone changed them "
            f"after publishing: {'; '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}. Nothing was uploaded. "
            "Fix: find who wrote them (S3 server access logs or CloudTrail data events), then delete those "
            "versions or publish under another --prefix"
        )
    results = []
    written: set[tuple[str, str]] = set()
    for item in items:
        exists = existing[id(item)] is not None or (item.bucket, item.key) in written
        if not exists:
            written.add((item.bucket, item.key))
            s3.put_object(
                Bucket=item.bucket,
                Key=item.key,
                Body=item.body,
                ExpectedBucketOwner=owner,
                ChecksumSHA256=base64.b64encode(hashlib.sha256(item.body).digest()).decode(),
                **encryption,
            )
        results.append(Result(item, uploaded=not exists))
    return results


def _sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def check_bucket(s3: Any, bucket: str, owner: str) -> None:
    """Raises :class:`PublishError` when ``bucket`` is missing, is not ``owner``'s, or the caller may not use it."""
    from botocore.exceptions import ClientError

    from hyperpod_cdk.aws.clients import ACCESS_DENIED, error_code

    try:
        s3.head_bucket(Bucket=bucket, ExpectedBucketOwner=owner)
    except ClientError as error:
        code = error_code(error)
        if code in ("404", "NoSuchBucket"):
            raise PublishError(
                f"bucket {bucket} does not exist: create the platform bucket first, or pass its name to --bucket"
            ) from None
        if code == "403" or code in ACCESS_DENIED:  # HEAD answers with the status alone
            raise PublishError(
                f"access denied to bucket {bucket}: it is not owned by account {owner} (--bucket-owner; default: "
                "the caller's account), or the caller needs s3:ListBucket and s3:GetBucketLocation on it and "
                "s3:GetObject and s3:PutObject on the publishing prefix"
            ) from None
        raise


def _stored(s3: Any, item: Item, owner: str) -> str | None:
    """The sha256 of the object at ``item``'s key, or None when there is none."""
    from botocore.exceptions import ClientError

    from hyperpod_cdk.aws.clients import error_code

    try:
        response = s3.get_object(Bucket=item.bucket, Key=item.key, ExpectedBucketOwner=owner)
    except ClientError as error:
        if error_code(error) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    return _sha256(response["Body"].read())
