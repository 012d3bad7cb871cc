"""Rules on the data repository associations that link file-system directories to S3."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from hyperpod_cdk.model import pascal_case
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import within
from hyperpod_cdk.rules.view import ClusterView
from hyperpod_cdk.rules.view import has_new_storage as _new
from hyperpod_cdk.rules.view import storage_path as _at
from training_runtime.paths import RUNTIME_DIR_ON_SHARED
from training_runtime.problems import WARNING, Problem

MAX_DATA_REPOSITORIES = 8
MAX_CHUNK_MIB = 512000
FS_PATH = re.compile(r"^/[^\x00\r\n]*$")
S3_KEY_CHARACTERS = "a-zA-Z0-9!_.*'()-"
"""The S3-safe characters of a key (a regular-expression character class without its brackets)."""
S3_PREFIX = re.compile(f"^[/{S3_KEY_CHARACTERS}]*$")
S3_PREFIX_PARAMETER = re.compile(f"^([{S3_KEY_CHARACTERS}]+/)*$")
"""A prefix given as a template parameter: empty, or S3-safe segments each ending in '/' (no leading '/')."""
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
BUCKET_NAME_START = re.compile(r"^[a-z0-9][a-z0-9.-]{0,39}\Z")
"""The start of a bucket name a launch may choose (``parameters.data_repositories.<name>.bucket_name_prefix``):
1-40 characters, leaving a name room of its own."""
IP_ADDRESS = r"\d+\.\d+\.\d+\.\d+"
RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", "--x-s3")
REPOSITORY_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{0,62}$")

rule = REGISTRY.rule


def _repositories(view: ClusterView) -> list:  # type: ignore[type-arg]
    return list(view.storage.data_repositories) if view.storage is not None else []


def _dra(view: ClusterView, index: int, field: str = "") -> str:
    return _at(view, f"data_repositories[{index}]" + (f".{field}" if field else ""))


@rule("DRA-SUPPORTED", "storage", "storage.data_repositories", source="FSx CreateDataRepositoryAssociation")
def dra_supported(view: ClusterView) -> Iterator[Problem]:
    """Associations need Lustre 2.12 or 2.15, not SCRATCH_1, and a file system holds at most 8."""
    storage = view.storage
    repositories = _repositories(view)
    if storage is None or not repositories:
        return
    if len(repositories) > MAX_DATA_REPOSITORIES:
        yield Problem(
            _at(view, "data_repositories"),
            f"a file system has at most {MAX_DATA_REPOSITORIES} associations",
            got=len(repositories),
        )
    if _new(view) and (storage.deployment_type == "SCRATCH_1" or storage.file_system_type_version == "2.10"):
        yield Problem(
            _at(view, "data_repositories"),
            f"data repository associations need Lustre 2.12 or 2.15 and not SCRATCH_1 (got "
            f"{storage.deployment_type}, {storage.file_system_type_version})",
        )


@rule("DRA-NAME", "storage", "storage.data_repositories[*].name", source="hyperpod-cdk (logical IDs)")
def dra_names(view: ClusterView) -> Iterator[Problem]:
    """An association's name is a letter then letters, digits or hyphens, unique (its logical ID derives from it)."""
    seen: dict[str, int] = {}
    for index, repository in enumerate(_repositories(view)):
        name = repository.name
        key = pascal_case(str(name))
        if not REPOSITORY_NAME.fullmatch(str(name)):
            yield Problem(_dra(view, index, "name"), "use a letter then letters, digits or hyphens", got=name)
        elif key in seen:
            yield Problem(
                _dra(view, index, "name"),
                f"repeats data_repositories[{seen[key]}].name (logical IDs would collide)",
                got=name,
            )
        seen.setdefault(key, index)


@rule(
    "DRA-PATH",
    "storage",
    "storage.data_repositories[*].file_system_path",
    source="FSx CreateDataRepositoryAssociation: FileSystemPath",
)
def dra_paths(view: ClusterView) -> Iterator[Problem]:
    """File-system paths are absolute, disjoint, and '/' only when it is the sole association."""
    repositories = _repositories(view)
    paths: list[tuple[int, str]] = []
    for index, repository in enumerate(repositories):
        path = repository.file_system_path
        if not view.concrete(path):
            continue
        if not FS_PATH.fullmatch(path):
            yield Problem(_dra(view, index, "file_system_path"), "expected an absolute path like /datasets", got=path)
        else:
            paths.append((index, path.rstrip("/") + "/"))
    for i, (a_index, a) in enumerate(paths):
        for b_index, b in paths[i + 1 :]:
            if a.startswith(b) or b.startswith(a):
                yield Problem(
                    _dra(view, b_index, "file_system_path"),
                    f"{b.rstrip('/') or '/'} overlaps data_repositories[{a_index}].file_system_path "
                    f"{a.rstrip('/') or '/'}; associations need disjoint directories",
                )


RUNTIME_STATE_PATH = "/" + RUNTIME_DIR_ON_SHARED
"""The runtime's state on the Lustre file system (the munge key, PyTorch environments, every sharing cluster's)."""
HOMES_PATH = "/home"
"""The users' homes on the Lustre file system (``<fsx_mount_path>/home``; a sharing cluster's below it)."""


def private_paths(view: ClusterView) -> list[tuple[str, str]]:
    """The Lustre directories no association may cover, with what they hold. The homes are there unless FSx for
    OpenZFS holds them and the Lustre file system is the cluster's own (an adopted one may hold another cluster's);
    a view without the ``storage_openzfs`` section (a construct's) assumes they are there."""
    found = [(RUNTIME_STATE_PATH, "the runtime's state (the munge key, the PyTorch environments)")]
    zfs_homes = "storage_openzfs" in view.sections and view.openzfs is not None
    if not zfs_homes or (view.storage is not None and view.storage.existing is not None):
        found.append((HOMES_PATH, "the users' homes (their private SSH keys)"))
    return found


def _normalised(path: str) -> str:
    """``path`` as the directory it names: '.', '..' and repeated slashes resolved, one leading slash."""
    return "/" + posixpath.normpath(path).lstrip("/")


@rule(
    "DRA-PRIVATE",
    "storage",
    "storage.data_repositories[*].file_system_path",
    source="FSx API AutoExportPolicy, CreateDataRepositoryTask (EXPORT_TO_REPOSITORY); the runtime's layout",
)
def dra_private(view: ClusterView) -> Iterator[Problem]:
    """An association neither covers nor lies in the users' homes (/home) or the runtime's state (/.hyperpod-cdk).

    FSx would export the private keys and the munge key to S3, and import whatever the bucket holds into them."""
    reserved = private_paths(view)
    for index, repository in enumerate(_repositories(view)):
        path = repository.file_system_path
        if not view.concrete(path) or not FS_PATH.fullmatch(path):
            continue  # DRA-PATH reports a malformed path
        directory = _normalised(path)
        inside, above = directory.rstrip("/") + "/", ""
        for private, holds in reserved:
            if inside.startswith(private + "/"):
                above = "is" if directory == private else "lies inside"
            elif (private + "/").startswith(inside):
                above = "covers"
            if above:
                yield Problem(
                    _dra(view, index, "file_system_path"),
                    f"{directory} {above} {private}, which holds {holds}: an association exports what is written "
                    "below it to S3 (auto_export_events, on by default, and any export task) and imports what the "
                    f"bucket holds into it; allowed: a directory outside {' and '.join(p for p, _ in reserved)}",
                    got=path,
                    fix="link a directory of its own, e.g. /datasets",
                )
                break


@rule(
    "DRA-BUCKET",
    "storage",
    "storage.data_repositories[*].{bucket_name,bucket_prefix}",
    source="Amazon S3 bucket naming rules; FSx DataRepositoryPath",
)
def dra_buckets(view: ClusterView) -> Iterator[Problem]:
    """Bucket names follow S3's naming rules, prefixes use S3-safe characters, and each bucket/prefix is linked once."""
    seen: dict[tuple[str, str], int] = {}
    for index, repository in enumerate(_repositories(view)):
        bucket, prefix = repository.bucket_name, repository.bucket_prefix
        if view.concrete(bucket):
            problem = bucket_name_problem(bucket)
            if problem:
                yield Problem(_dra(view, index, "bucket_name"), problem, got=bucket)
        if view.concrete(prefix) and not S3_PREFIX.fullmatch(prefix):
            yield Problem(
                _dra(view, index, "bucket_prefix"),
                "use S3-safe characters (letters, digits, ! _ . * ' ( ) / -)",
                got=prefix,
            )
        if view.concrete(bucket) and view.concrete(prefix):
            key = (bucket, prefix.strip("/"))
            if key in seen:
                yield Problem(
                    _dra(view, index, "bucket_prefix"),
                    f"s3://{bucket}/{key[1]} is already linked by data_repositories[{seen[key]}]; each association "
                    "needs its own bucket or prefix",
                )
            seen.setdefault(key, index)


def bucket_name_problem(name: str) -> str:
    """What is wrong with an S3 bucket name, or ''."""
    if not BUCKET_NAME.fullmatch(name):
        return (
            "a bucket name is 3-63 lower-case letters, digits, dots and hyphens, starting and ending with a letter "
            "or digit"
        )
    if ".." in name or re.fullmatch(f"^{IP_ADDRESS}$", name):
        return "a bucket name has no two adjacent dots and is not an IP address"
    if name.startswith(RESERVED_BUCKET_PREFIXES) or name.endswith(RESERVED_BUCKET_SUFFIXES):
        return "a bucket name may not use S3's reserved prefixes (xn--, sthree-) or suffixes (-s3alias, --ol-s3)"
    return ""


def prefix_default(prefix: str) -> str:
    """A config's ``bucket_prefix`` in a parameter's form: empty, or ending in one '/' (``data`` -> ``data/``)."""
    stripped = prefix.strip("/")
    return stripped + "/" if stripped else ""


def bucket_name_pattern(start: str = "") -> str:
    """Every check of :func:`bucket_name_problem` as one regular expression (a template parameter's
    AllowedPattern): a name matches it exactly when that function finds nothing wrong and it starts with ``start``
    (a :data:`BUCKET_NAME_START`)."""
    prefixes = "|".join(re.escape(p) for p in RESERVED_BUCKET_PREFIXES)
    suffixes = "|".join(re.escape(s) for s in RESERVED_BUCKET_SUFFIXES)
    escaped = start.replace(".", "\\.")  # the only character of a BUCKET_NAME_START a regex reads specially
    starts = f"(?={escaped})" if start else ""
    return f"^{starts}(?!.*\\.\\.)(?!{IP_ADDRESS}$)(?!{prefixes})(?!.*({suffixes})$)" + BUCKET_NAME.pattern[1:]


@rule(
    "DRA-EVENTS",
    "storage",
    "storage.data_repositories[*].{auto_import_events,auto_export_events}",
    source="AWS::FSx::DataRepositoryAssociation AutoImportPolicy/AutoExportPolicy",
)
def dra_events(view: ClusterView) -> Iterator[Problem]:
    """Each automatic import/export list names NEW, CHANGED or DELETED at most once."""
    for index, repository in enumerate(_repositories(view)):
        for field in ("auto_import_events", "auto_export_events"):
            events = [str(e) for e in getattr(repository, field)]
            if len(set(events)) != len(events):
                yield Problem(_dra(view, index, field), "list each event once", got=events)


dra_chunk = rule(
    "DRA-CHUNK",
    "storage",
    "storage.data_repositories[*].imported_file_chunk_size_mib",
    source="FSx CreateDataRepositoryAssociation: ImportedFileChunkSize",
)(
    within(
        "The imported-file stripe size is 1 to 512000 MiB.",
        lambda view: [
            (_dra(view, index, "imported_file_chunk_size_mib"), repository.imported_file_chunk_size_mib)
            for index, repository in enumerate(_repositories(view))
        ],
        1,
        MAX_CHUNK_MIB,
        "allowed: {low} to {high}",
    )
)


@rule(
    "DRA-REPLACES",
    "storage",
    "storage.data_repositories[*]",
    level=WARNING,
    source="AWS::FSx::DataRepositoryAssociation (createOnly properties)",
)
def dra_replaces(view: ClusterView) -> Iterator[Problem]:
    """Changing an association's directory, bucket or prefix replaces the association (and re-imports)."""
    previous = view.previous
    if previous is None or previous.storage is None or view.storage is None:
        return
    before = {r.name: r for r in previous.storage.data_repositories}
    for index, repository in enumerate(_repositories(view)):
        old = before.get(repository.name)
        if old is None:
            continue
        changed = [
            f
            for f in ("file_system_path", "bucket_name", "bucket_prefix", "batch_import_metadata_on_create")
            if getattr(old, f) != getattr(repository, f)
        ]
        if changed:
            yield Problem(
                _dra(view, index),
                f"{', '.join(changed)} changed: CloudFormation replaces the association; the directory is "
                "unlinked and imported again",
            )
