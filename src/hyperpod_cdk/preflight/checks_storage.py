"""Online rules on storage the stack adopts: FSx for Lustre and OpenZFS file systems, and existing buckets."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from hyperpod_cdk.preflight import lookups
from hyperpod_cdk.preflight.account import Account
from hyperpod_cdk.preflight.checks_access import key_problems
from hyperpod_cdk.preflight.checks_network import nodes_az
from hyperpod_cdk.preflight.online import account_of, guarded, online_rule
from hyperpod_cdk.preflight.resource_checks import each_resource
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import ERROR, WARNING, Problem

FSX_API = "https://docs.aws.amazon.com/fsx/latest/APIReference/API_DescribeFileSystems.html"
FSX_SG_DOC = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html"
DRA_REGION_DOC = (
    "https://docs.aws.amazon.com/fsx/latest/LustreGuide/create-dra-linked-data-repo.html "
    "(the bucket is in the file system's Region)"
)
ACCESS_LOGS_DOC = (
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html "
    "(the destination bucket is in the same Region and account)"
)
READS = {"s3:GetObject", "s3:ListBucket", "s3:Get*", "s3:List*", "s3:*", "*"}
HARMLESS_CONDITIONS = {"aws:SecureTransport"}
"""Deny conditions the nodes always satisfy (they use TLS)."""


def file_system_problems(
    account: Account, view: ClusterView, section: str, kind: str, existing: Any, checks: dict[str, str]
) -> Iterator[Problem]:
    """The adopted file system exists, is of ``kind``, available, matches ``checks`` (field -> the file system's
    value), carries the given security group, and sits in the nodes' AZ."""
    where = view.path(section, "existing.file_system_id")
    found = lookups.file_system(account, existing.file_system_id)
    if found is None:
        yield Problem(where, f"no such file system in {account.region}", got=existing.file_system_id)
        return
    if found.get("FileSystemType") != kind:
        yield Problem(
            where, f"the file system is {found.get('FileSystemType')}, not {kind}", got=existing.file_system_id
        )
        return
    if found.get("Lifecycle", "AVAILABLE") != "AVAILABLE":
        yield Problem(where, f"the file system is {found.get('Lifecycle')}, not AVAILABLE", got=existing.file_system_id)
    for field, actual in checks.items():
        given = getattr(existing, field)
        if given is not None and actual and given != actual:
            yield Problem(
                view.path(section, f"existing.{field}"),
                f"the file system's is {actual!r}: the nodes' mount fails",
                got=given,
                fix=f"set it to {actual!r}",
            )
    groups = lookups.interface_groups(account, found.get("NetworkInterfaceIds", []))
    if groups and existing.security_group_id not in groups:
        yield Problem(
            view.path(section, "existing.security_group_id"),
            f"not a security group of the file system (its interfaces have {', '.join(sorted(groups))}): the rules "
            "the stack adds to it do not admit the nodes",
            got=existing.security_group_id,
            fix="give one of the file system's own security groups",
        )
    subnets = found.get("SubnetIds", [])
    az = nodes_az(view)
    fs_subnet = lookups.subnet(account, subnets[0]) if subnets else None
    if az and fs_subnet and fs_subnet["AvailabilityZone"] != az and not _multi_az(found):
        yield Problem(
            where,
            f"the file system is in {fs_subnet['AvailabilityZone']}, the nodes in {az}: every read crosses AZs "
            "(slower, and charged)",
            got=existing.file_system_id,
            fix="put the nodes in the file system's AZ, or use a file system in theirs",
            level=WARNING,
        )


def _multi_az(found: dict[str, Any]) -> bool:
    return str((found.get("OpenZFSConfiguration") or {}).get("DeploymentType", "")).startswith("MULTI_AZ")


def _adopted(
    view: ClusterView, section: str, kind: str, existing: Any, names: Callable[[dict[str, Any]], dict[str, str]]
) -> Iterator[Problem]:
    """An adopted file system's problems (:func:`file_system_problems`), its look-ups guarded; ``names`` reads the
    names to compare with the config's from the file system's description."""

    def judge(account: Account, where: str, file_system_id: str) -> Iterator[Problem]:
        found = lookups.file_system(account, file_system_id) or {}
        yield from file_system_problems(account, view, section, kind, existing, names(found))

    yield from each_resource(view, [(view.path(section, "existing"), existing.file_system_id)], judge)


@online_rule(
    "AWS-FSX-LUSTRE",
    "storage",
    "storage.existing",
    actions=("fsx:DescribeFileSystems", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"),
    needs=("network",),
    source=f"{FSX_API}; {FSX_SG_DOC}",
)
def lustre_exists(view: ClusterView) -> Iterator[Problem]:
    """An adopted Lustre file system exists, is available, has the given mount name, DNS name and security group."""
    storage = view.storage
    if storage is None or storage.existing is None:
        return
    yield from _adopted(
        view,
        "storage",
        "LUSTRE",
        storage.existing,
        lambda found: {
            "mount_name": str((found.get("LustreConfiguration") or {}).get("MountName", "")),
            "dns_name": str(found.get("DNSName", "")),
        },
    )


@online_rule(
    "AWS-FSX-OPENZFS",
    "storage_openzfs",
    "storage_openzfs.existing",
    actions=("fsx:DescribeFileSystems", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets"),
    needs=("network",),
    source=f"{FSX_API}; https://docs.aws.amazon.com/fsx/latest/OpenZFSGuide/limit-access-security-groups.html",
)
def openzfs_exists(view: ClusterView) -> Iterator[Problem]:
    """An adopted OpenZFS file system exists, is available, has the given DNS name and security group, in the AZ."""
    openzfs = view.openzfs
    if openzfs is None or openzfs.existing is None:
        return
    yield from _adopted(
        view, "storage_openzfs", "OPENZFS", openzfs.existing, lambda found: {"dns_name": str(found.get("DNSName", ""))}
    )


@online_rule(
    "AWS-STANDBY-SUBNET",
    "storage_openzfs",
    "storage_openzfs.standby_subnet_id",
    actions=("ec2:DescribeSubnets",),
    needs=("network",),
    source="https://docs.aws.amazon.com/fsx/latest/OpenZFSGuide/availability-durability.html (Multi-AZ: a standby "
    "file server in another AZ); Amazon EC2 API DescribeSubnets",
)
def standby_subnet(view: ClusterView) -> Iterator[Problem]:
    """A new Multi-AZ OpenZFS file system's standby subnet exists in the VPC, in another AZ than the nodes'."""
    openzfs, net = view.openzfs, view.network
    if openzfs is None or openzfs.existing is not None or not openzfs.standby_subnet_id or net is None:
        return
    if openzfs.deployment_type != "MULTI_AZ_1" or net.vpc_id is None:
        return
    listed = [(view.path("storage_openzfs", "standby_subnet_id"), openzfs.standby_subnet_id)]
    yield from each_resource(view, listed, functools.partial(_standby_problems, view, net.vpc_id))


def _standby_problems(
    view: ClusterView, vpc_id: str, account: Account, where: str, subnet_id: str
) -> Iterator[Problem]:
    found = lookups.subnet(account, subnet_id)
    if found is None:
        yield Problem(where, f"no such subnet in {account.region}", got=subnet_id, fix="check the ID and the Region")
        return
    if found["VpcId"] != vpc_id:
        yield Problem(where, f"the subnet is in {found['VpcId']}, not in {vpc_id}", got=subnet_id)
    if found["AvailabilityZone"] == nodes_az(view):
        yield Problem(
            where,
            f"the standby subnet is in the nodes' AZ {found['AvailabilityZone']}: Multi-AZ needs the standby "
            "file server in another AZ",
            got=subnet_id,
            fix="pick a subnet of the VPC in another AZ",
        )


def buckets(view: ClusterView) -> list[tuple[str, str, str]]:
    """(field path, bucket, use) of every existing bucket the config names."""
    found = []
    if view.lifecycle is not None and view.lifecycle.bucket_name:
        found.append((view.path("lifecycle", "bucket_name"), view.lifecycle.bucket_name, "lifecycle"))
    if view.storage is not None:
        for index, repository in enumerate(view.storage.data_repositories):
            if repository.bucket_name and view.concrete(repository.bucket_name):
                path = view.path("storage", f"data_repositories[{index}].bucket_name")
                found.append((path, repository.bucket_name, "data"))
    if view.organization is not None and view.organization.access_logs_bucket:
        found.append((view.path("organization", "access_logs_bucket"), view.organization.access_logs_bucket, "logs"))
    return found


@online_rule(
    "AWS-BUCKET",
    "lifecycle",
    "lifecycle.bucket_name, storage.data_repositories[*].bucket_name, organization.access_logs_bucket",
    actions=(
        "s3:ListBucket",
        "s3:GetBucketLocation",
        "s3:GetBucketPolicy",
        "s3:GetEncryptionConfiguration",
        "kms:DescribeKey",
        "kms:GetKeyPolicy",
    ),
    needs=("storage", "organization"),
    source=f"Amazon S3 API HeadBucket, GetBucketLocation, GetBucketPolicy, GetBucketEncryption; {DRA_REGION_DOC}; "
    f"{ACCESS_LOGS_DOC}",
)
def existing_buckets(view: ClusterView) -> Iterator[Problem]:
    """Existing buckets exist in the cluster's Region, and neither a bucket policy nor a KMS key denies the reads."""
    account = account_of(view)
    for where, name, use in buckets(view):

        def check(where: str = where, name: str = name, use: str = use) -> Iterator[Problem]:
            if not lookups.bucket_exists(account, name):
                yield Problem(where, "no such bucket", got=name, fix="create it, or fix the name")
                return
            region = lookups.bucket_region(account, name)
            if region != account.region:
                yield Problem(
                    where,
                    f"the bucket is in {region}, the cluster in {account.region}"
                    + ("; the nodes read their scripts across Regions" if use == "lifecycle" else ""),
                    got=name,
                    fix=f"use a bucket in {account.region}",
                    level=WARNING if use == "lifecycle" else ERROR,
                )
            if use == "logs":
                return  # S3's logging service writes there; the cluster does not read it
            yield from _policy_problems(where, name, lookups.bucket_policy(account, name))
            key = lookups.bucket_kms_key(account, name)
            if key is not None:
                yield from key_problems(account, where, key)

        yield from guarded(where, check, got=name)


def _policy_problems(where: str, name: str, policy: dict[str, Any] | None) -> Iterator[Problem]:
    for statement in (policy or {}).get("Statement", []):
        if statement.get("Effect") != "Deny":
            continue
        actions = statement.get("Action", [])
        actions = {actions} if isinstance(actions, str) else set(actions)
        principal = statement.get("Principal")
        everyone = principal == "*" or (isinstance(principal, dict) and principal.get("AWS") in ("*", ["*"]))
        if not (actions & READS and everyone):
            continue
        conditions = {key for tests in (statement.get("Condition") or {}).values() for key in tests}
        if conditions and conditions <= HARMLESS_CONDITIONS:
            continue
        sid = statement.get("Sid", "")
        if not conditions:
            yield Problem(
                where,
                f"the bucket policy denies reads to every principal (statement {sid!r})",
                got=name,
                fix="remove the statement, or narrow it so the cluster's execution role may read",
            )
        else:
            yield Problem(
                where,
                f"the bucket policy denies reads unless {', '.join(sorted(conditions))} (statement {sid!r}); the "
                "cluster's execution role may not meet it",
                got=name,
                fix="check that the execution role and the nodes' network meet the condition",
                level=WARNING,
            )
