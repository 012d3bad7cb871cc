"""Where a published template's pieces live: in the platform bucket and in the cloud assembly.

One definition for the constructs (which write the lifecycle files into the assembly and point the cluster at
their key prefix) and for ``hyperpod-cdk publish`` (which uploads them there). Every key is content-addressed::

    <prefix>lifecycle/<tree hash>/...                 the lifecycle scripts, runtime, parameters and users
    <prefix>assets/<asset hash>.<ext>                 CDK file assets (e.g. a Service Catalog product template)
    <prefix>templates/<stack>/<sha256>.template.json  the template a console or portal launches

so an object, once written, never changes, and a template always points at what it was built with.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ACCOUNT_ID = re.compile(r"^[0-9]{12}\Z")
"""An AWS account ID (the platform bucket's owner)."""
LIFECYCLE_ASSEMBLY_DIR = "hyperpod-cdk.lifecycle"
"""Directory of the cloud assembly holding one ``<tree hash>/`` directory (the files) and one
``<tree hash>.json`` (their destination) per published lifecycle prefix."""


def normal_prefix(prefix: str) -> str:
    """``team/hyperpod`` and ``team/hyperpod/`` as the same prefix, ``team/hyperpod/``; ``""`` stays empty."""
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"


def prefix_problem(prefix: str, field: str = "prefix") -> str | None:
    """Why ``prefix`` (already normal) cannot be a key prefix, or None."""
    from hyperpod_cdk.rules.repositories import S3_PREFIX_PARAMETER  # the rules' definition; loaded when used

    if S3_PREFIX_PARAMETER.fullmatch(prefix):
        return None
    return (
        f"{field}: got {prefix!r}; use path segments of letters, digits and !_.*'()- separated by '/', with no "
        "leading '/' and no empty segment (e.g. 'platform/hyperpod/')"
    )


def lifecycle_key_prefix(prefix: str, tree: str) -> str:
    return f"{prefix}lifecycle/{tree}/"


def assets_key_prefix(prefix: str) -> str:
    return f"{prefix}assets/"


def template_key(prefix: str, stack: str, body: bytes) -> str:
    return f"{prefix}templates/{stack}/{hashlib.sha256(body).hexdigest()}.template.json"


def read_tree(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by its relative POSIX path, in path order."""
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def tree_hash(files: Mapping[str, bytes]) -> str:
    """The sha256 of a set of files: each relative path with the sha256 of its bytes, in path order."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{hashlib.sha256(files[name]).hexdigest()}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class PublishTarget:
    """The platform team's bucket and key prefix that a published template and its files live under, and the
    account that owns the bucket (None: the account the template is launched in; ``publish`` sets the one it
    checked with ``ExpectedBucketOwner``)."""

    bucket_name: str
    prefix: str = ""
    bucket_owner: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", normal_prefix(self.prefix))


@dataclass(frozen=True)
class LifecycleTree:
    """One published lifecycle prefix in a cloud assembly: its files and where they go."""

    tree: str
    bucket: str
    key_prefix: str
    directory: Path

    def files(self) -> dict[str, bytes]:
        return read_tree(self.directory)

    def write(self, files: Mapping[str, bytes]) -> None:
        """Write the files and the destination record (idempotent: the same tree has the same bytes)."""
        for name, body in files.items():
            path = self.directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
        record = {"bucket": self.bucket, "key_prefix": self.key_prefix}
        self.directory.with_suffix(".json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")

    @classmethod
    def at(cls, outdir: Path, tree: str, bucket: str, key_prefix: str) -> LifecycleTree:
        return cls(tree, bucket, key_prefix, Path(outdir) / LIFECYCLE_ASSEMBLY_DIR / tree)

    @classmethod
    def all_in(cls, outdir: Path) -> list[LifecycleTree]:
        """Every lifecycle prefix the constructs wrote into the assembly at ``outdir``."""
        trees = []
        for record in sorted((Path(outdir) / LIFECYCLE_ASSEMBLY_DIR).glob("*.json")):
            data = json.loads(record.read_text())
            trees.append(cls(record.stem, data["bucket"], data["key_prefix"], record.with_suffix("")))
        return trees
