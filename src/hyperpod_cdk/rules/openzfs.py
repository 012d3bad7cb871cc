"""Rules on FSx for OpenZFS (``storage_openzfs``): an adopted file system that HyperPod mounts over NFS."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.rules.cluster import mount_path_problems
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.storage import DNS_NAME, FILE_SYSTEM_ID, SECURITY_GROUP_ID
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.problems import Problem

OPENZFS_CONFIG = "AWS::SageMaker::Cluster ClusterFsxOpenZfsConfig (DnsName 16-275 characters; MountPath pattern)"
MAX_DNS_NAME = 275

rule = REGISTRY.rule


def _at(view: ClusterView, field: str) -> str:
    return view.path("storage_openzfs", field)


@rule(
    "ZFS-MODE",
    "storage_openzfs",
    "storage_openzfs",
    needs=("cluster",),
    source=f"{OPENZFS_CONFIG}; hyperpod-cdk (the node runtime does not mount NFS yet)",
)
def openzfs_mode(view: ClusterView) -> Iterator[Problem]:
    """OpenZFS needs api-driven mode: HyperPod mounts it; the node runtime cannot mount NFS yet."""
    if view.openzfs is not None and view.mode == LIFECYCLE_DRIVEN:
        yield Problem(
            view.path("storage_openzfs"),
            "in lifecycle-driven mode HyperPod mounts no file system, and the node runtime does not mount NFS yet",
            fix="use mode: api-driven, or remove storage_openzfs",
        )


@rule(
    "ZFS-EXISTING-IDS",
    "storage_openzfs",
    "storage_openzfs.existing.{file_system_id,dns_name,security_group_id}",
    source=f"{OPENZFS_CONFIG}; FSx resource IDs",
)
def openzfs_ids(view: ClusterView) -> Iterator[Problem]:
    """An adopted OpenZFS file system is named by its fs- ID, its FSx DNS name (16-275 characters) and its sg- group."""
    if view.openzfs is None:
        return
    existing = view.openzfs.existing
    checks = (
        ("file_system_id", FILE_SYSTEM_ID, "expected fs- followed by at least 8 lower-case hex digits"),
        ("dns_name", DNS_NAME, "expected the file system's DNS name, fs-<id>.fsx.<region>.amazonaws.com"),
        ("security_group_id", SECURITY_GROUP_ID, "expected sg- followed by 8 or 17 lower-case hex digits"),
    )
    for field, pattern, expected in checks:
        value = getattr(existing, field)
        if not view.concrete(value):
            continue
        too_long = field == "dns_name" and len(value) > MAX_DNS_NAME  # the pattern already needs 16 or more
        if too_long or not pattern.match(value):
            yield Problem(_at(view, f"existing.{field}"), expected, got=value)


@rule("ZFS-MOUNT-PATH", "storage_openzfs", "storage_openzfs.mount_path", source=OPENZFS_CONFIG)
def openzfs_mount_path(view: ClusterView) -> Iterator[Problem]:
    """The OpenZFS mount path is absolute, without a trailing slash, outside system directories."""
    if view.openzfs is not None and view.concrete(view.openzfs.mount_path):
        yield from mount_path_problems(_at(view, "mount_path"), view.openzfs.mount_path, "/home")


@rule(
    "ZFS-LUSTRE-PATH",
    "storage_openzfs",
    "storage_openzfs.mount_path",
    needs=("storage", "cluster"),
    source="hyperpod-cdk (two file systems cannot be mounted at one path)",
)
def openzfs_beside_lustre(view: ClusterView) -> Iterator[Problem]:
    """OpenZFS and Lustre are mounted at different paths."""
    if view.openzfs is None or view.storage is None:
        return
    if view.concrete(view.openzfs.mount_path) and view.openzfs.mount_path == view.fsx_mount_path:
        yield Problem(
            _at(view, "mount_path"),
            "FSx for Lustre is mounted there (fsx_mount_path); the second mount would hide the first",
            got=view.openzfs.mount_path,
            fix="use another directory, e.g. /home for OpenZFS and /fsx for Lustre",
        )
