"""Rules on FSx for OpenZFS (``storage_openzfs``): a new or adopted file system that HyperPod mounts over NFS."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING

from hyperpod_cdk.rules.cluster import mount_path_problems
from hyperpod_cdk.rules.network import ID_PATTERNS, aws_id_pattern, id_format_problem
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import ViewValues, given_fields, needs, within
from hyperpod_cdk.rules.storage import DNS_NAME, FILE_SYSTEM_ID, SECURITY_GROUP_ID
from hyperpod_cdk.rules.view import ClusterView

if TYPE_CHECKING:
    from hyperpod_cdk.core.config import OpenZfsConfig
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.problems import WARNING, Problem

OPENZFS_CONFIG = "AWS::SageMaker::Cluster ClusterFsxOpenZfsConfig (DnsName 16-275 characters; MountPath pattern)"
CREATE_DOC = "FSx CreateFileSystemOpenZFSConfiguration"
"""https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystemOpenZFSConfiguration.html"""
MAX_DNS_NAME = 275
THROUGHPUTS_1 = (64, 128, 256, 512, 1024, 2048, 3072, 4096)
THROUGHPUTS_2 = (160, 320, 640, 1280, 2560, 3840, 5120, 7680, 10240)
THROUGHPUTS = {
    "SINGLE_AZ_1": THROUGHPUTS_1,
    "SINGLE_AZ_HA_1": THROUGHPUTS_1,
    "SINGLE_AZ_2": THROUGHPUTS_2,
    "SINGLE_AZ_HA_2": THROUGHPUTS_2,
    "MULTI_AZ_1": THROUGHPUTS_2,
}
"""ThroughputCapacity (MB/s) by deployment type (CreateFileSystemOpenZFSConfiguration: ThroughputCapacity)."""
CAPACITY_GIB = (64, 524288)
"""StorageCapacity of an OpenZFS file system, GiB (FSx CreateFileSystem: StorageCapacity)."""
BACKUP_DAYS = (0, 90)
MULTI_AZ = "MULTI_AZ_1"
NEW_FILE_SYSTEM_FIELDS = (
    "storage_capacity_gib",
    "deployment_type",
    "throughput_capacity_mbps",
    "data_compression",
    "automatic_backup_retention_days",
    "copy_tags_to_backups",
    "standby_subnet_id",
    "route_table_ids",
    "client_cidrs",
    "removal_policy",
)
"""What only a new OpenZFS file system takes; an adopted one keeps its own."""
ROUTE_TABLE_ID = aws_id_pattern("rtb")


def default_throughput(deployment_type: str) -> int:
    """The deployment type's smallest throughput tier: what a new file system gets unless the config says."""
    return THROUGHPUTS[deployment_type][0]


rule = REGISTRY.rule


def _at(view: ClusterView, field: str) -> str:
    return view.path("storage_openzfs", field)


openzfs_mode = rule(
    "ZFS-MODE",
    "storage_openzfs",
    "storage_openzfs",
    needs=("cluster",),
    source=f"{OPENZFS_CONFIG}; hyperpod-cdk (the node runtime does not mount NFS yet)",
)(
    needs(
        "OpenZFS needs api-driven mode: HyperPod mounts it; the node runtime cannot mount NFS yet.",
        lambda view: [] if view.openzfs is None else [(view.path("storage_openzfs"), None)],
        lambda view: view.mode != LIFECYCLE_DRIVEN,
        "in lifecycle-driven mode HyperPod mounts no file system, and the node runtime does not mount NFS yet",
        fix="use mode: api-driven, or remove storage_openzfs",
        show_value=False,
    )
)


@rule(
    "ZFS-EXISTING-IDS",
    "storage_openzfs",
    "storage_openzfs.existing.{file_system_id,dns_name,security_group_id}",
    source=f"{OPENZFS_CONFIG}; FSx resource IDs",
)
def openzfs_ids(view: ClusterView) -> Iterator[Problem]:
    """An adopted OpenZFS file system is named by its fs- ID, its FSx DNS name (16-275 characters) and its sg- group."""
    if view.openzfs is None or view.openzfs.existing is None:
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
        if too_long or not pattern.fullmatch(value):
            yield Problem(_at(view, f"existing.{field}"), expected, got=value)


@rule("ZFS-MOUNT-PATH", "storage_openzfs", "storage_openzfs.mount_path", source=OPENZFS_CONFIG)
def openzfs_mount_path(view: ClusterView) -> Iterator[Problem]:
    """The OpenZFS mount path is absolute, has no trailing slash, and is not at, in or above a reserved directory."""
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


def _new(view: ClusterView) -> OpenZfsConfig | None:
    """The new (not adopted) OpenZFS file system to judge, if any."""
    return view.openzfs if view.openzfs is not None and view.openzfs.existing is None else None


def _new_field(field: str) -> ViewValues:
    """A new file system's ``field``, with its path (nothing for an adopted one)."""
    return lambda view: [] if (zfs := _new(view)) is None else [(_at(view, field), getattr(zfs, field))]


openzfs_existing_only = rule("ZFS-EXISTING-ONLY", "storage_openzfs", "storage_openzfs.existing", source="hyperpod-cdk")(
    needs(
        "An adopted OpenZFS file system keeps its own settings: only mount_path may be given with existing.",
        given_fields("storage_openzfs", lambda view: view.openzfs, NEW_FILE_SYSTEM_FIELDS),
        lambda view: view.openzfs is None or view.openzfs.existing is None,
        "applies only to a new file system; storage_openzfs.existing adopts one with its own settings",
        fix="remove it, or remove existing to create a file system",
        show_value=False,
    )
)


openzfs_capacity = rule(
    "ZFS-CAPACITY",
    "storage_openzfs",
    "storage_openzfs.storage_capacity_gib",
    source="FSx CreateFileSystem: StorageCapacity (FSx for OpenZFS: 64-524288 GiB)",
)(
    within(
        "A new OpenZFS file system holds 64 to 524288 GiB (512 TiB).",
        _new_field("storage_capacity_gib"),
        *CAPACITY_GIB,
        "allowed: {low} to {high} GiB",
    )
)


@rule(
    "ZFS-THROUGHPUT",
    "storage_openzfs",
    "storage_openzfs.throughput_capacity_mbps",
    source=f"{CREATE_DOC}: ThroughputCapacity",
)
def openzfs_throughput(view: ClusterView) -> Iterator[Problem]:
    """Throughput is one of the deployment type's tiers: 64-4096 MB/s (*_1 types) or 160-10240 MB/s (the others)."""
    zfs = _new(view)
    if zfs is None:
        return
    value, kind = zfs.throughput_capacity_mbps, zfs.deployment_type
    allowed = THROUGHPUTS[kind]
    if view.concrete(value) and value not in allowed:
        yield Problem(
            _at(view, "throughput_capacity_mbps"),
            f"{kind} takes one of {', '.join(map(str, allowed))} MB/s",
            got=value,
            fix=f"use one of them, or leave it out for {allowed[0]}",
        )


openzfs_backups = rule(
    "ZFS-BACKUPS",
    "storage_openzfs",
    "storage_openzfs.automatic_backup_retention_days",
    source=f"{CREATE_DOC}: AutomaticBackupRetentionDays",
)(
    within(
        "Automatic backups are kept 0 (off) to 90 days.",
        _new_field("automatic_backup_retention_days"),
        *BACKUP_DAYS,
        "allowed: {low} to {high} days",
    )
)


@rule(
    "ZFS-MULTI-AZ",
    "storage_openzfs",
    "storage_openzfs.{standby_subnet_id,route_table_ids}",
    source=f"{CREATE_DOC}: PreferredSubnetId, RouteTableIds (MULTI_AZ_1 only); FSx CreateFileSystem: SubnetIds",
)
def openzfs_multi_az(view: ClusterView) -> Iterator[Problem]:
    """MULTI_AZ_1 needs a standby subnet (in a second AZ); other types take neither it nor route tables."""
    zfs = _new(view)
    if zfs is None:
        return
    if zfs.deployment_type == MULTI_AZ and zfs.standby_subnet_id is None:
        yield Problem(
            _at(view, "standby_subnet_id"),
            "MULTI_AZ_1 places a standby file server in a second subnet, in another Availability Zone",
            fix="give that subnet's ID, or use a single-AZ deployment type (SINGLE_AZ_HA_2 keeps a standby in one AZ)",
        )
    if zfs.deployment_type != MULTI_AZ:
        for field, value in (("standby_subnet_id", zfs.standby_subnet_id), ("route_table_ids", zfs.route_table_ids)):
            if value:
                yield Problem(
                    _at(view, field),
                    f"applies only to MULTI_AZ_1, not {zfs.deployment_type}",
                    got=value,
                    fix="remove it",
                )
    if view.concrete(zfs.standby_subnet_id):
        problem = id_format_problem(
            _at(view, "standby_subnet_id"), ID_PATTERNS["subnet_id"], str(zfs.standby_subnet_id)
        )
        if problem is not None:
            yield problem
    for index, table in enumerate(zfs.route_table_ids):
        if view.concrete(table):
            problem = id_format_problem(_at(view, f"route_table_ids[{index}]"), ROUTE_TABLE_ID, table)
            if problem is not None:
                yield problem


@rule(
    "ZFS-MULTI-AZ-VPC",
    "storage_openzfs",
    "storage_openzfs.deployment_type",
    needs=("network",),
    source=f"{CREATE_DOC}: DeploymentType MULTI_AZ_1 (two subnets in two AZs)",
)
def openzfs_multi_az_vpc(view: ClusterView) -> Iterator[Problem]:
    """MULTI_AZ_1 needs an existing VPC: the new VPC has subnets in one Availability Zone only."""
    zfs = _new(view)
    new_vpc = view.network is not None and view.network.vpc_id is None
    if zfs is not None and zfs.deployment_type == MULTI_AZ and new_vpc:
        yield Problem(
            _at(view, "deployment_type"),
            "MULTI_AZ_1 needs subnets in two Availability Zones, and the new VPC has one",
            got=MULTI_AZ,
            fix="use network.vpc_id and subnet_id with a standby subnet in another AZ, or a single-AZ type",
        )


@rule(
    "ZFS-CLIENTS",
    "storage_openzfs",
    "storage_openzfs.client_cidrs[i]",
    source=f"{CREATE_DOC}: RootVolumeConfiguration.NfsExports.ClientConfigurations.Clients; hyperpod-cdk (never "
    "exported to the world)",
)
def openzfs_clients(view: ClusterView) -> Iterator[Problem]:
    """NFS clients are IPv4 networks (CIDRs), never the whole internet (*, /0)."""
    zfs = _new(view)
    if zfs is None or zfs.client_cidrs is None:
        return
    cidrs = zfs.client_cidrs
    if not cidrs:
        yield Problem(
            _at(view, "client_cidrs"),
            "an empty list exports the root volume to no node",
            got=[],
            fix="remove it to export to the nodes' subnet",
        )
    for index, cidr in enumerate(cidrs):
        if not view.concrete(cidr):
            continue
        where = _at(view, f"client_cidrs[{index}]")
        try:
            network = ipaddress.IPv4Network(cidr)
        except ValueError:
            yield Problem(where, "expected an IPv4 CIDR such as 10.0.0.0/17 (no host bits set)", got=cidr)
            continue
        if network.prefixlen == 0:
            yield Problem(where, "exports the file system to every address", got=cidr, fix="give the nodes' subnets")


@rule(
    "ZFS-CLIENTS-REQUIRED",
    "storage_openzfs",
    "storage_openzfs.client_cidrs",
    needs=("network", "instance_groups"),
    source="hyperpod-cdk (the export default is the new VPC's node subnet, whose CIDR the stack knows)",
)
def openzfs_clients_required(view: ClusterView) -> Iterator[Problem]:
    """With an existing VPC, or groups in other subnets (override_vpc), a new file system needs client_cidrs."""
    zfs = _new(view)
    if zfs is None or zfs.client_cidrs is not None:
        return
    reasons = []
    if view.network is not None and view.network.vpc_id is not None:
        reasons.append("the existing subnet's CIDR is not known at synth")
    if any(g.override_vpc for g in view.groups):
        reasons.append("groups with override_vpc mount it from other subnets")
    if reasons:
        yield Problem(
            _at(view, "client_cidrs"),
            f"required: the root volume is exported only to the nodes' subnets, and {'; '.join(reasons)}",
            fix="list the CIDRs of every subnet whose nodes mount it",
        )


@rule(
    "ZFS-REMOVAL",
    "storage_openzfs",
    "storage_openzfs.removal_policy",
    level=WARNING,
    source="hyperpod-cdk (nothing is lost)",
)
def openzfs_removal(view: ClusterView) -> Iterator[Problem]:
    """removal_policy destroy deletes the OpenZFS file system, and the homes on it, with the stack."""
    zfs = _new(view)
    if zfs is not None and zfs.removal_policy == "destroy":
        yield Problem(
            _at(view, "removal_policy"),
            "the file system is deleted with the stack, with its data (automatic backups are deleted too)",
            got="destroy",
            fix="keep retain for anything but throw-away clusters",
        )
