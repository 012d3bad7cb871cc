"""LustreStorage: FSx for Lustre for the cluster, linked to S3 by data repository associations."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import jsii
from aws_cdk import Aws, RemovalPolicy, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_cdk.constructs.network import ClusterNetwork
from hyperpod_cdk.errors import raise_if_any

LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
"""LNet's ports: clients and servers need both (988 alone lets creation succeed and mounts hang)."""

MAX_DATA_REPOSITORIES = 8
PERSISTENT_2_THROUGHPUTS = (125, 250, 500, 1000)
PERSISTENT_1_THROUGHPUTS = (50, 100, 200)
METADATA_IOPS = (1500, 3000, 6000, 12000, *range(24000, 192001, 12000))
_FS_PATH = re.compile(r"^/[^\x00\r\n]*$")
_PREFIX = re.compile(r"^[a-zA-Z0-9!_.*'()/-]*$")


class DataRepositoryEvent(enum.StrEnum):
    """Changes that a data repository association imports from or exports to S3 automatically."""

    NEW = "NEW"
    CHANGED = "CHANGED"
    DELETED = "DELETED"


ALL_EVENTS: tuple[DataRepositoryEvent, ...] = tuple(DataRepositoryEvent)


@dataclass(frozen=True, kw_only=True)
class S3DataRepository:
    """A directory of the file system linked to an S3 bucket (prefix).

    :param name: stable name; the association's logical ID derives from it.
    :param bucket: the S3 bucket.
    :param file_system_path: directory in the file system, e.g. ``/datasets``.
    :param bucket_prefix: key prefix in the bucket. Default: the whole bucket.
    :param auto_import_events: S3 changes imported automatically. Default: new, changed and deleted.
    :param auto_export_events: file-system changes exported automatically. Default: new, changed, deleted.
    :param batch_import_metadata_on_create: import the bucket's metadata once the association exists.
        Default: False.
    :param imported_file_chunk_size_mib: stripe size for imported files. Default: FSx's (1,024 MiB).
    """

    name: str
    bucket: s3.IBucket
    file_system_path: str
    bucket_prefix: str = ""
    auto_import_events: Sequence[DataRepositoryEvent] = ALL_EVENTS
    auto_export_events: Sequence[DataRepositoryEvent] = ALL_EVENTS
    batch_import_metadata_on_create: bool = False
    imported_file_chunk_size_mib: int | None = None

    @property
    def data_repository_path(self) -> str:
        prefix = self.bucket_prefix.strip("/")
        return f"s3://{self.bucket.bucket_name}/{prefix + '/' if prefix else ''}"


@dataclass(frozen=True, kw_only=True)
class ExistingLustreFileSystem:
    """An FSx for Lustre file system created elsewhere.

    :param file_system_id: e.g. ``fs-0123456789abcdef0``.
    :param mount_name: the file system's Lustre mount name (8 characters).
    :param security_group: the file system's security group; Lustre rules from the cluster are added to it.
    :param dns_name: Default: ``<file_system_id>.fsx.<region>.amazonaws.com``.
    """

    file_system_id: str
    mount_name: str
    security_group: ec2.ISecurityGroup
    dns_name: str | None = None


@jsii.implements(ec2.IConnectable)
class LustreStorage(Construct):
    """FSx for Lustre shared by the cluster's nodes, optionally linked to S3.

    The file system gets its own security group that admits Lustre (TCP 988 and 1018-1023) from itself and
    from the cluster's nodes, and it is created only after those rules exist (FSx checks them at creation).

    :param network: where the file system lives and whose nodes mount it.
    :param storage_capacity_gib: Default: 1200.
    :param deployment_type: Default: PERSISTENT_2.
    :param throughput_mb_per_tib: per-unit storage throughput (persistent types). Default: 250.
    :param data_compression: Default: LZ4.
    :param file_system_type_version: Lustre version. Default: 2.15.
    :param efa_enabled: serve clients over EFA (PERSISTENT_2 only; all-traffic security-group rules).
        Default: False.
    :param metadata_iops: provisioned metadata IOPS (PERSISTENT_2). Default: automatic metadata scaling.
    :param data_repositories: S3 links. Default: none.
    :param removal_policy: what happens to the file system when it leaves the stack. Default: RETAIN.
    :param existing: adopt this file system instead of creating one (see :meth:`from_existing`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        network: ClusterNetwork,
        storage_capacity_gib: int = 1200,
        deployment_type: fsx.LustreDeploymentType = fsx.LustreDeploymentType.PERSISTENT_2,
        throughput_mb_per_tib: int | None = 250,
        data_compression: fsx.LustreDataCompressionType = fsx.LustreDataCompressionType.LZ4,
        file_system_type_version: fsx.FileSystemTypeVersion = fsx.FileSystemTypeVersion.V_2_15,
        efa_enabled: bool = False,
        metadata_iops: int | None = None,
        data_repositories: Sequence[S3DataRepository] = (),
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        existing: ExistingLustreFileSystem | None = None,
    ) -> None:
        super().__init__(scope, id)
        subject = f"LustreStorage {self.node.path}"
        problems = data_repository_problems(data_repositories, "data_repositories")
        if existing is None:
            problems += lustre_problems(
                storage_capacity_gib=storage_capacity_gib,
                deployment_type=deployment_type.name,
                throughput_mb_per_tib=throughput_mb_per_tib,
                file_system_type_version=lustre_version(file_system_type_version),
                efa_enabled=efa_enabled,
                metadata_iops=metadata_iops,
                has_data_repositories=bool(data_repositories),
            )
        raise_if_any(subject, problems)

        self._efa_enabled = efa_enabled and existing is None
        self.file_system: fsx.IFileSystem
        self.security_group: ec2.ISecurityGroup
        if existing is None:
            self.security_group = self._storage_security_group(network.vpc)
            new_file_system = self._new_file_system(
                network,
                storage_capacity_gib,
                deployment_type,
                throughput_mb_per_tib,
                data_compression,
                file_system_type_version,
                metadata_iops,
                removal_policy,
            )
            self.file_system = new_file_system
            self.dns_name: str = new_file_system.dns_name
            self.mount_name: str = new_file_system.mount_name
        else:
            self.security_group = existing.security_group
            self.dns_name = existing.dns_name or f"{existing.file_system_id}.fsx.{Aws.REGION}.{Aws.URL_SUFFIX}"
            self.file_system = fsx.LustreFileSystem.from_lustre_file_system_attributes(
                self,
                "FileSystem",
                file_system_id=existing.file_system_id,
                dns_name=self.dns_name,
                security_group=existing.security_group,
            )
            self.mount_name = existing.mount_name
        self._connections = ec2.Connections(security_groups=[self.security_group], default_port=LUSTRE_PORTS[0])
        self.allow_clients(network)
        self.data_repository_associations = [self._associate(r) for r in data_repositories]

    @classmethod
    def from_existing(
        cls,
        scope: Construct,
        id: str,
        *,
        network: ClusterNetwork,
        file_system_id: str,
        mount_name: str,
        security_group: ec2.ISecurityGroup,
        dns_name: str | None = None,
        data_repositories: Sequence[S3DataRepository] = (),
    ) -> LustreStorage:
        """Adopt a file system created elsewhere; the cluster's Lustre rules are added to its group."""
        return cls(
            scope,
            id,
            network=network,
            data_repositories=data_repositories,
            existing=ExistingLustreFileSystem(
                file_system_id=file_system_id,
                mount_name=mount_name,
                security_group=security_group,
                dns_name=dns_name,
            ),
        )

    @property
    def connections(self) -> ec2.Connections:
        return self._connections

    @property
    def file_system_id(self) -> str:
        return self.file_system.file_system_id

    def allow_clients(self, clients: ec2.IConnectable) -> None:
        """Let ``clients`` mount the file system (Lustre ports, or all traffic when EFA is on)."""
        ports = [ec2.Port.all_traffic()] if self._efa_enabled else list(LUSTRE_PORTS)
        for port in ports:
            self.connections.allow_from(clients, port, "Lustre clients")
            if self._efa_enabled:
                self.connections.allow_to(clients, port, "Lustre over EFA")

    def _storage_security_group(self, vpc: ec2.IVpc) -> ec2.ISecurityGroup:
        group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="FSx for Lustre: LNet from itself and from the cluster nodes",
            # An EFA-enabled file system needs egress rules that name security groups.
            allow_all_outbound=not self._efa_enabled,
        )
        # fsx.LustreFileSystem adds the Lustre self-rule (TCP 988-1023) to the group it is given.
        if self._efa_enabled:
            group.add_ingress_rule(group, ec2.Port.all_traffic(), "Lustre over EFA between file servers")
            group.add_egress_rule(group, ec2.Port.all_traffic(), "Lustre over EFA between file servers")
        return group

    def _new_file_system(
        self,
        network: ClusterNetwork,
        storage_capacity_gib: int,
        deployment_type: fsx.LustreDeploymentType,
        throughput_mb_per_tib: int | None,
        data_compression: fsx.LustreDataCompressionType,
        file_system_type_version: fsx.FileSystemTypeVersion,
        metadata_iops: int | None,
        removal_policy: RemovalPolicy,
    ) -> fsx.LustreFileSystem:
        persistent = deployment_type.name.startswith("PERSISTENT")
        file_system = fsx.LustreFileSystem(
            self,
            "FileSystem",
            vpc=network.vpc,
            vpc_subnet=network.subnet,
            security_group=self.security_group,
            storage_capacity_gib=storage_capacity_gib,
            file_system_type_version=file_system_type_version,
            removal_policy=removal_policy,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=deployment_type,
                per_unit_storage_throughput=throughput_mb_per_tib if persistent else None,
                data_compression_type=data_compression,
            ),
        )
        cfn = file_system.node.default_child
        assert isinstance(cfn, fsx.CfnFileSystem)
        if deployment_type == fsx.LustreDeploymentType.PERSISTENT_2:
            metadata = (
                {"Mode": "AUTOMATIC"}
                if metadata_iops is None
                else {
                    "Mode": "USER_PROVISIONED",
                    "Iops": metadata_iops,
                }
            )
            cfn.add_property_override("LustreConfiguration.MetadataConfiguration", metadata)
        if self._efa_enabled:
            cfn.add_property_override("LustreConfiguration.EfaEnabled", True)
        # FSx checks the group's Lustre rules when it creates the file system: create them first.
        file_system.node.add_dependency(self.security_group)
        return file_system

    def _associate(self, repository: S3DataRepository) -> fsx.CfnDataRepositoryAssociation:
        s3_policy = fsx.CfnDataRepositoryAssociation.S3Property(
            auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                events=[str(e) for e in repository.auto_import_events]
            )
            if repository.auto_import_events
            else None,
            auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(
                events=[str(e) for e in repository.auto_export_events]
            )
            if repository.auto_export_events
            else None,
        )
        return fsx.CfnDataRepositoryAssociation(
            self,
            f"Repository{pascal_case(repository.name)}",
            file_system_id=self.file_system_id,
            file_system_path=repository.file_system_path,
            data_repository_path=repository.data_repository_path,
            batch_import_meta_data_on_create=repository.batch_import_metadata_on_create,
            imported_file_chunk_size=repository.imported_file_chunk_size_mib,
            s3=s3_policy,
        )


def lustre_version(version: fsx.FileSystemTypeVersion) -> str:
    """``FileSystemTypeVersion.V_2_15`` as FSx spells it: ``2.15``."""
    return version.name.removeprefix("V_").replace("_", ".")


def pascal_case(name: str) -> str:
    """A user-given name as a construct-ID fragment: ``training-data`` -> ``TrainingData``."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^a-zA-Z0-9]+", name) if part)


def lustre_problems(
    *,
    storage_capacity_gib: int,
    deployment_type: str,
    throughput_mb_per_tib: int | None,
    file_system_type_version: str,
    efa_enabled: bool,
    metadata_iops: int | None,
    has_data_repositories: bool,
    path: str = "",
) -> list[str]:
    """Rules for a new FSx for Lustre file system that neither CDK nor cfn-lint checks completely."""
    problems: list[str] = []
    if Token.is_unresolved(storage_capacity_gib):
        return problems
    step = 3600 if deployment_type == "SCRATCH_1" else 2400
    if storage_capacity_gib not in (1200, 2400) and (storage_capacity_gib <= 0 or storage_capacity_gib % step):
        problems.append(
            f"{path}storage_capacity_gib: got {storage_capacity_gib}; {deployment_type} takes 1200, 2400 or a "
            f"multiple of {step} GiB"
        )
    persistent = deployment_type.startswith("PERSISTENT")
    allowed = {"PERSISTENT_2": PERSISTENT_2_THROUGHPUTS, "PERSISTENT_1": PERSISTENT_1_THROUGHPUTS}.get(
        deployment_type, ()
    )
    if persistent and throughput_mb_per_tib not in allowed:
        problems.append(
            f"{path}throughput_mb_per_tib: got {throughput_mb_per_tib}; {deployment_type} takes one of "
            f"{', '.join(map(str, allowed))} MB/s/TiB"
        )
    if deployment_type == "PERSISTENT_2" and file_system_type_version != "2.15":
        problems.append(
            f"{path}file_system_type_version: got {file_system_type_version}; PERSISTENT_2 with a metadata "
            "configuration (always set here) needs Lustre 2.15"
        )
    if efa_enabled and deployment_type != "PERSISTENT_2":
        problems.append(f"{path}efa_enabled: needs deployment_type PERSISTENT_2, got {deployment_type}")
    if metadata_iops is not None and deployment_type != "PERSISTENT_2":
        problems.append(f"{path}metadata_iops: only PERSISTENT_2 has a metadata configuration. Fix: remove it")
    elif metadata_iops is not None and metadata_iops not in METADATA_IOPS:
        problems.append(
            f"{path}metadata_iops: got {metadata_iops}; allowed: 1500, 3000, 6000, 12000 or a multiple of "
            "12000 up to 192000"
        )
    if has_data_repositories and (deployment_type == "SCRATCH_1" or file_system_type_version == "2.10"):
        problems.append(
            f"{path}data_repositories: data repository associations need Lustre 2.12 or 2.15 and not "
            f"SCRATCH_1 (got {deployment_type}, {file_system_type_version})"
        )
    return problems


class DataRepositoryFields(Protocol):
    """What the association rules read; S3DataRepository and the config's entries both have it."""

    @property
    def name(self) -> str: ...
    @property
    def file_system_path(self) -> str: ...
    @property
    def bucket_prefix(self) -> str: ...
    @property
    def imported_file_chunk_size_mib(self) -> int | None: ...


def data_repository_problems(repositories: Sequence[DataRepositoryFields], path: str) -> list[str]:
    """Rules for data repository associations, each problem with its field path."""
    problems: list[str] = []
    if len(repositories) > MAX_DATA_REPOSITORIES:
        problems.append(f"{path}: got {len(repositories)}; a file system has at most {MAX_DATA_REPOSITORIES}")
    names: dict[str, int] = {}
    paths: list[tuple[int, str]] = []
    for index, repository in enumerate(repositories):
        where = f"{path}[{index}]"
        name, fs_path, prefix = repository.name, repository.file_system_path, repository.bucket_prefix
        chunk = repository.imported_file_chunk_size_mib
        if not re.fullmatch(r"[a-zA-Z][a-zA-Z0-9-]{0,62}", name):
            problems.append(f"{where}.name: got {name!r}; use a letter then letters, digits or hyphens")
        elif pascal_case(name) in names:
            problems.append(f"{where}.name: {name!r} repeats {path}[{names[pascal_case(name)]}].name")
        names.setdefault(pascal_case(name), index)
        if not Token.is_unresolved(fs_path):
            if not _FS_PATH.match(fs_path):
                problems.append(f"{where}.file_system_path: got {fs_path!r}; expected an absolute path like /datasets")
            else:
                paths.append((index, fs_path.rstrip("/") + "/"))
        if not Token.is_unresolved(prefix) and not _PREFIX.match(prefix):
            problems.append(f"{where}.bucket_prefix: got {prefix!r}; use S3-safe characters")
        if chunk is not None and not 1 <= chunk <= 512000:
            problems.append(f"{where}.imported_file_chunk_size_mib: got {chunk}; allowed: 1 to 512000")
    for i, (a_index, a) in enumerate(paths):
        for b_index, b in paths[i + 1 :]:
            if a.startswith(b) or b.startswith(a):
                problems.append(
                    f"{path}[{b_index}].file_system_path: {b.rstrip('/') or '/'} overlaps "
                    f"{path}[{a_index}].file_system_path {a.rstrip('/') or '/'}; associations need disjoint "
                    "directories"
                )
    return problems
