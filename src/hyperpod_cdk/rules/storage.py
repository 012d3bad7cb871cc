"""Rules on FSx for Lustre and its data repository associations (S3 links)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_cdk.model import DEFAULT_THROUGHPUT_MB_PER_TIB as DEFAULT_THROUGHPUT
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import given_fields, needs
from hyperpod_cdk.rules.view import ClusterView
from hyperpod_cdk.rules.view import has_new_storage as _new
from hyperpod_cdk.rules.view import storage_path as _at
from training_runtime.instance_facts import facts_for
from training_runtime.instance_table import GPUDIRECT_STORAGE_SOURCE
from training_runtime.problems import WARNING, Problem

PERSISTENT_THROUGHPUTS = {"PERSISTENT_2": (125, 250, 500, 1000), "PERSISTENT_1": (50, 100, 200)}
"""Per-unit storage throughput (MB/s/TiB) on SSD, by deployment type (FSx CreateFileSystem API)."""
METADATA_IOPS = (1500, 3000, 6000, 12000, *range(24000, 192001, 12000))
NEW_FILE_SYSTEM_FIELDS = (
    "storage_capacity_gib",
    "deployment_type",
    "throughput_mb_per_tib",
    "data_compression",
    "file_system_type_version",
    "efa_enabled",
    "metadata_iops",
)
"""What only a new file system takes; an adopted one keeps its own."""
FILE_SYSTEM_ID = re.compile(r"^fs-[0-9a-f]{8,}$")
MOUNT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,8}$")
SECURITY_GROUP_ID = re.compile(r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")
DNS_NAME = re.compile(r"^(fs|fc)i?-[0-9a-f]{8,}\..{4,253}$")

rule = REGISTRY.rule


def capacity_step(deployment_type: str) -> int:
    return 3600 if deployment_type == "SCRATCH_1" else 2400


@rule("FSX-CAPACITY", "storage", "storage.storage_capacity_gib", source="FSx CreateFileSystem: StorageCapacity")
def capacity(view: ClusterView) -> Iterator[Problem]:
    """Capacity is 1200, 2400 or a multiple of 2400 GiB (3600 for SCRATCH_1)."""
    storage = view.storage
    if not _new(view) or not view.concrete(storage.storage_capacity_gib):  # type: ignore[union-attr]
        return
    assert storage is not None
    size, kind = storage.storage_capacity_gib, storage.deployment_type
    step = capacity_step(kind)
    if size not in (1200, 2400) and (size <= 0 or size % step):
        yield Problem(
            _at(view, "storage_capacity_gib"),
            f"{kind} takes 1200, 2400 or a multiple of {step} GiB",
            got=size,
            fix="use " + " or ".join(str(v) for v in _nearest_capacities(size, step)),
        )


def _nearest_capacities(size: int, step: int) -> list[int]:
    """The allowed capacities just below and just above ``size``."""
    allowed = sorted({1200, 2400, *range(step, max(size, 0) + 2 * step, step)})
    below = [v for v in allowed if v < size][-1:]
    above = [v for v in allowed if v > size][:1]
    return below + above


@rule(
    "FSX-THROUGHPUT",
    "storage",
    "storage.throughput_mb_per_tib",
    source="FSx CreateFileSystem: PerUnitStorageThroughput",
)
def throughput(view: ClusterView) -> Iterator[Problem]:
    """Persistent types take one of their throughput tiers (PERSISTENT_2 defaults to 250); scratch types none."""
    storage = view.storage
    if not _new(view):
        return
    assert storage is not None
    value, kind = storage.throughput_mb_per_tib, storage.deployment_type
    allowed = PERSISTENT_THROUGHPUTS.get(kind)
    if allowed is None and value is not None:
        yield Problem(
            _at(view, "throughput_mb_per_tib"),
            f"{kind} has no per-unit throughput setting (scratch throughput follows capacity)",
            got=value,
            fix="remove it",
        )
    elif allowed is not None and value is None and kind != "PERSISTENT_2":
        yield Problem(
            _at(view, "throughput_mb_per_tib"),
            f"{kind} needs a per-unit throughput: one of {', '.join(map(str, allowed))} MB/s/TiB (only "
            f"PERSISTENT_2 has a default, {DEFAULT_THROUGHPUT})",
            fix=f"set throughput_mb_per_tib to one of {', '.join(map(str, allowed))}",
        )
    elif allowed is not None and value is not None and view.concrete(value) and value not in allowed:
        yield Problem(
            _at(view, "throughput_mb_per_tib"),
            f"{kind} takes one of {', '.join(map(str, allowed))} MB/s/TiB",
            got=value,
        )


@rule(
    "FSX-VERSION", "storage", "storage.file_system_type_version", source="FSx CreateFileSystem: FileSystemTypeVersion"
)
def version(view: ClusterView) -> Iterator[Problem]:
    """PERSISTENT_2 with a metadata configuration (always set here) needs Lustre 2.15."""
    storage = view.storage
    if (
        _new(view)
        and storage is not None
        and storage.deployment_type == "PERSISTENT_2"
        and storage.file_system_type_version != "2.15"
    ):
        yield Problem(
            _at(view, "file_system_type_version"),
            "PERSISTENT_2 with a metadata configuration (always set here) needs Lustre 2.15",
            got=storage.file_system_type_version,
            fix="use 2.15",
        )


@rule("FSX-EFA", "storage", "storage.efa_enabled", source="FSx for Lustre user guide: EFA-enabled file systems")
def efa(view: ClusterView) -> Iterator[Problem]:
    """Lustre over EFA needs PERSISTENT_2."""
    storage = view.storage
    if _new(view) and storage is not None and storage.efa_enabled and storage.deployment_type != "PERSISTENT_2":
        yield Problem(
            _at(view, "efa_enabled"),
            f"needs deployment_type PERSISTENT_2, got {storage.deployment_type}",
            fix="use PERSISTENT_2 or turn EFA off",
        )


@rule("FSX-METADATA-IOPS", "storage", "storage.metadata_iops", source="FSx CreateFileSystem: MetadataConfiguration")
def metadata_iops(view: ClusterView) -> Iterator[Problem]:
    """Provisioned metadata IOPS exist only on PERSISTENT_2: 1500, 3000, 6000, 12000 or a multiple of 12000."""
    storage = view.storage
    if not _new(view) or storage is None or storage.metadata_iops is None:
        return
    if storage.deployment_type != "PERSISTENT_2":
        yield Problem(
            _at(view, "metadata_iops"),
            "only PERSISTENT_2 has a metadata configuration",
            got=storage.metadata_iops,
            fix="remove it",
        )
    elif view.concrete(storage.metadata_iops) and storage.metadata_iops not in METADATA_IOPS:
        yield Problem(
            _at(view, "metadata_iops"),
            "allowed: 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000",
            got=storage.metadata_iops,
        )


existing_only = rule("FSX-EXISTING-ONLY", "storage", "storage.existing", source="hyperpod-cdk")(
    needs(
        "An adopted file system keeps its own settings: the new-file-system fields cannot be given with it.",
        given_fields("storage", lambda view: view.storage, NEW_FILE_SYSTEM_FIELDS),
        lambda view: view.storage is None or view.storage.existing is None,
        "applies only to a new file system; storage.existing adopts one with its own settings",
        fix="remove it",
        show_value=False,
    )
)


@rule(
    "FSX-EXISTING-IDS",
    "storage",
    "storage.existing.{file_system_id,mount_name,security_group_id,dns_name}",
    source="AWS::SageMaker::Cluster ClusterFsxLustreConfig; FSx resource IDs",
)
def existing_ids(view: ClusterView) -> Iterator[Problem]:
    """An adopted file system is named by its fs- ID, 1-8 character mount name, sg- group and FSx DNS name."""
    storage = view.storage
    if storage is None or storage.existing is None:
        return
    existing = storage.existing
    checks = (
        ("file_system_id", FILE_SYSTEM_ID, "expected fs- followed by at least 8 lower-case hex digits"),
        ("mount_name", MOUNT_NAME, "expected the file system's 1-8 character Lustre mount name"),
        ("security_group_id", SECURITY_GROUP_ID, "expected sg- followed by 8 or 17 lower-case hex digits"),
        ("dns_name", DNS_NAME, "expected the file system's DNS name, fs-<id>.fsx.<region>.amazonaws.com"),
    )
    for field, pattern, expected in checks:
        value = getattr(existing, field)
        if view.concrete(value) and not pattern.fullmatch(value):
            yield Problem(_at(view, f"existing.{field}"), expected, got=value)


@rule("FSX-REMOVAL", "storage", "storage.removal_policy", level=WARNING, source="hyperpod-cdk (nothing is lost)")
def removal(view: ClusterView) -> Iterator[Problem]:
    """removal_policy destroy deletes the file system, and its data, with the stack."""
    if view.storage is not None and view.storage.removal_policy == "destroy":
        yield Problem(
            _at(view, "removal_policy"),
            "the file system and the stack's new data buckets are deleted with the stack, with their data",
            got="destroy",
            fix="keep retain for anything but throw-away clusters",
        )


@rule(
    "FSX-EFA-CLIENTS",
    "storage",
    "storage.efa_enabled",
    needs=("instance_groups",),
    level=WARNING,
    source=f"{GPUDIRECT_STORAGE_SOURCE} (GPUDirect Storage clients, per type: docs/instance-types.md)",
)
def efa_clients(view: ClusterView) -> Iterator[Problem]:
    """Instances that can read Lustre over EFA (GPUDirect Storage) get their full bandwidth only from EFA storage."""
    storage = view.storage
    if not _new(view) or storage is None or storage.efa_enabled:
        return
    types = sorted(
        {t for g in view.groups for t in view.types_of(g) if (f := facts_for(t)) is not None and f.gpudirect_storage}
    )
    if types:
        yield Problem(
            _at(view, "efa_enabled"),
            f"{', '.join(types)} can read Lustre over EFA with GPUDirect Storage, but the file system is not "
            "EFA-enabled",
            got=False,
            fix="set efa_enabled: true (PERSISTENT_2, chosen at creation only)",
        )


@rule("FSX-REPLACES", "storage", "storage", level=WARNING, source="AWS::FSx::FileSystem (replacing properties)")
def storage_replaces(view: ClusterView) -> Iterator[Problem]:
    """Changing the deployment type, Lustre version or EFA of a deployed file system replaces it (a new, empty one)."""
    previous = view.previous
    if previous is None or previous.storage is None or not _new(view) or previous.storage.existing is not None:
        return
    assert view.storage is not None
    changed = [
        f
        for f in ("deployment_type", "file_system_type_version", "efa_enabled")
        if getattr(previous.storage, f) != getattr(view.storage, f)
    ]
    if changed:
        yield Problem(
            view.path("storage"),
            f"{', '.join(changed)} changed: CloudFormation creates a new, empty file system (the old one is "
            "retained or deleted by removal_policy)",
            fix="copy the data first, or keep the deployed settings",
        )


def _shared_field(view: ClusterView) -> tuple[str, bool]:
    """The ``existing.shared`` field that decides (Lustre's, else OpenZFS's) and the config's answer."""
    config = view.config
    if config is None:
        return view.path("storage", "existing.shared"), False
    zfs = config.storage_openzfs.existing if config.storage_openzfs is not None else None
    if (
        zfs is not None
        and zfs.shared
        and not (config.storage and config.storage.existing and config.storage.existing.shared)
    ):
        return view.path("storage_openzfs", "existing.shared"), True
    return view.path("storage", "existing.shared"), config.shares_file_system


@rule(
    "FSX-SHARED-MOVES",
    "storage",
    "{storage,storage_openzfs}.existing.shared",
    level=WARNING,
    source="hyperpod-cdk (the runtime's layout on shared storage; nothing is moved or deleted)",
)
def shared_moves(view: ClusterView) -> Iterator[Problem]:
    """Changing existing.shared on a deployed cluster moves where nodes keep its state and homes from then on."""
    previous = view.previous
    if previous is None or previous.config is None or view.config is None:
        return
    before, after = previous.config.shares_file_system, view.config.shares_file_system
    if before == after:
        return
    path, _ = _shared_field(view if after else previous)
    name, mount = view.cluster_name, view.fsx_mount_path.rstrip("/")
    old, new = (f"{mount}/.hyperpod-cdk", f"{mount}/.hyperpod-cdk/clusters/{name}")
    base = view.openzfs.mount_path.rstrip("/") if view.openzfs is not None else f"{mount}/home"
    homes = (base, f"{base}/.clusters/{name}")
    if before:
        old, new, homes = new, old, (homes[1], homes[0])
    yield Problem(
        path,
        f"changed from {before} to {after} on a deployed cluster: nodes that bootstrap from now on keep the runtime's "
        f"state in {new} (not {old}) and the users' homes in {homes[1]} (not {homes[0]}); nothing is moved or "
        "deleted, so the users' files stay where they are and nodes bootstrapped before and after use different "
        "directories",
        fix="keep the deployed value, or move the homes (and on the generic platform the munge key) by hand and "
        "then re-bootstrap every node together (docs/configuration.md, storage.existing.shared)",
    )
