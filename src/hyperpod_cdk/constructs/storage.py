"""LustreStorage: FSx for Lustre for the cluster, linked to S3 by data repository associations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import jsii
from aws_cdk import Aws, RemovalPolicy, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_cdk.constructs.checks import check_props
from hyperpod_cdk.constructs.interfaces import NodeNetwork
from hyperpod_cdk.constructs.nag import RULE_ORDER, lint_accepts
from hyperpod_cdk.core.config import DataRepositoryConfig, ExistingFileSystemConfig, StorageConfig
from hyperpod_cdk.model import ALL_EVENTS, DEFAULT_THROUGHPUT_MB_PER_TIB, DataRepositoryEvent, pascal_case
from hyperpod_cdk.rules.repositories import prefix_default

_DEFAULTS = StorageConfig()
"""The config file's defaults are the props' defaults (one definition)."""


def lustre_version(version: fsx.FileSystemTypeVersion) -> str:
    """``FileSystemTypeVersion.V_2_15`` as FSx spells it: ``2.15``."""
    return version.name.removeprefix("V_").replace("_", ".")


def fsx_version(version: str) -> fsx.FileSystemTypeVersion:
    """``2.15`` as CDK's enum: the inverse of :func:`lustre_version`."""
    return fsx.FileSystemTypeVersion["V_" + version.replace(".", "_")]


_DEFAULT_VERSION = fsx_version(_DEFAULTS.file_system_type_version)


def lustre_ports() -> tuple[ec2.Port, ec2.Port]:
    """LNet's ports: clients and servers need both (988 alone lets creation succeed and mounts hang)."""
    return (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))


@dataclass(frozen=True, kw_only=True)
class S3DataRepository:
    """A directory of the file system linked to an S3 bucket (prefix).

    :param name: stable name; the association's logical ID derives from it.
    :param bucket: the S3 bucket.
    :param file_system_path: directory in the file system, e.g. ``/datasets``.
    :param bucket_prefix: key prefix in the bucket. Default: the whole bucket. A token (a template
        parameter) is used as given: empty, or ending in '/'.
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
        if Token.is_unresolved(self.bucket_prefix):
            return f"s3://{self.bucket.bucket_name}/{self.bucket_prefix}"
        return f"s3://{self.bucket.bucket_name}/{prefix_default(self.bucket_prefix)}"


@jsii.implements(ec2.IConnectable)
class LustreStorage(Construct):
    """FSx for Lustre shared by the cluster's nodes, optionally linked to S3.

    The file system gets its own security group that admits Lustre (TCP 988 and 1018-1023) from itself and
    from the cluster's nodes, and it is created only after those rules exist (FSx checks them at creation).

    :param network: where the file system lives and whose nodes mount it.
    :param storage_capacity_gib: Default: 1200.
    :param deployment_type: Default: PERSISTENT_2.
    :param throughput_mb_per_tib: per-unit storage throughput (persistent types only). Default: 250 on
        persistent types.
    :param data_compression: Default: LZ4.
    :param file_system_type_version: Lustre version. Default: 2.15.
    :param efa_enabled: serve clients over EFA (PERSISTENT_2 only; all-traffic security-group rules).
        Default: False.
    :param metadata_iops: provisioned metadata IOPS (PERSISTENT_2). Default: automatic metadata scaling.
    :param data_repositories: S3 links. Default: none.
    :param removal_policy: what happens to the file system when it leaves the stack. Default: RETAIN.

    A file system created elsewhere is imported, unowned, with :meth:`from_lustre_attributes`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        network: NodeNetwork,
        storage_capacity_gib: int = _DEFAULTS.storage_capacity_gib,
        deployment_type: fsx.LustreDeploymentType = fsx.LustreDeploymentType[_DEFAULTS.deployment_type],
        throughput_mb_per_tib: int | None = _DEFAULTS.throughput_mb_per_tib,
        data_compression: fsx.LustreDataCompressionType = fsx.LustreDataCompressionType[_DEFAULTS.data_compression],
        file_system_type_version: fsx.FileSystemTypeVersion = _DEFAULT_VERSION,
        efa_enabled: bool = _DEFAULTS.efa_enabled,
        metadata_iops: int | None = _DEFAULTS.metadata_iops,
        data_repositories: Sequence[S3DataRepository] = (),
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        given: dict[str, object] = {
            "data_repositories": [_repository_fields(r) for r in data_repositories],
            "storage_capacity_gib": storage_capacity_gib,
            "deployment_type": deployment_type.name,
            "throughput_mb_per_tib": throughput_mb_per_tib,
            "data_compression": data_compression.name,
            "file_system_type_version": lustre_version(file_system_type_version),
            "efa_enabled": efa_enabled,
            "metadata_iops": metadata_iops,
        }
        removal = "retain" if removal_policy == RemovalPolicy.RETAIN else "destroy"
        check_props(
            self,
            "LustreStorage",
            {"storage"},
            storage=StorageConfig.model_construct(_fields_set=set(given), removal_policy=removal, **given),
            paths={"storage": ""},
        )
        if throughput_mb_per_tib is None and deployment_type.name == "PERSISTENT_2":
            throughput_mb_per_tib = DEFAULT_THROUGHPUT_MB_PER_TIB

        self._efa_enabled = efa_enabled
        self.security_group: ec2.ISecurityGroup = self._storage_security_group(network.vpc)
        self.file_system: fsx.LustreFileSystem = self._new_file_system(
            network,
            storage_capacity_gib,
            deployment_type,
            throughput_mb_per_tib,
            data_compression,
            file_system_type_version,
            metadata_iops,
            removal_policy,
        )
        self.dns_name: str = self.file_system.dns_name
        self.mount_name: str = self.file_system.mount_name
        self._connections = ec2.Connections(security_groups=[self.security_group], default_port=lustre_ports()[0])
        self.allow_clients(network)
        self.data_repository_associations = [associate(self, r, self.file_system_id) for r in data_repositories]

    @classmethod
    def from_lustre_attributes(
        cls,
        scope: Construct,
        id: str,
        *,
        file_system_id: str,
        dns_name: str,
        mount_name: str,
        security_group: ec2.ISecurityGroup,
    ) -> ImportedLustreFileSystem:
        """A file system created elsewhere, unowned: nothing is created, changed or deleted for it (see
        :class:`ImportedLustreFileSystem`)."""
        return ImportedLustreFileSystem(
            scope,
            id,
            file_system_id=file_system_id,
            dns_name=dns_name,
            mount_name=mount_name,
            security_group=security_group,
        )

    @property
    def connections(self) -> ec2.Connections:
        return self._connections

    @property
    def file_system_id(self) -> str:
        return self.file_system.file_system_id

    def allow_clients(self, clients: ec2.IConnectable) -> None:
        """Let ``clients`` mount the file system (Lustre ports, or all traffic when EFA is on)."""
        admit_lustre_clients(self.connections, clients, efa=self._efa_enabled)

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
        network: NodeNetwork,
        storage_capacity_gib: int,
        deployment_type: fsx.LustreDeploymentType,
        throughput_mb_per_tib: int | None,
        data_compression: fsx.LustreDataCompressionType,
        file_system_type_version: fsx.FileSystemTypeVersion,
        metadata_iops: int | None,
        removal_policy: RemovalPolicy,
    ) -> fsx.LustreFileSystem:
        persistent = deployment_type.name.startswith("PERSISTENT")
        # CDK's L2 checks the capacity even when it is a token (a template parameter); CloudFormation's
        # constraints judge that one, so the L2 gets a capacity every type accepts and the token goes to the L1.
        capacity_token = Token.is_unresolved(storage_capacity_gib)
        file_system = fsx.LustreFileSystem(
            self,
            "FileSystem",
            vpc=network.vpc,
            vpc_subnet=network.subnet,
            security_group=self.security_group,
            storage_capacity_gib=_DEFAULTS.storage_capacity_gib if capacity_token else storage_capacity_gib,
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
        if capacity_token:
            cfn.storage_capacity = storage_capacity_gib
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
        lint_accepts(cfn, RULE_ORDER)
        return file_system


def _repository_fields(repository: S3DataRepository) -> DataRepositoryConfig:
    """An S3DataRepository as the rules read it (the config file's shape)."""
    return DataRepositoryConfig.model_construct(
        name=repository.name,
        file_system_path=repository.file_system_path,
        bucket_name=repository.bucket.bucket_name,
        bucket_prefix=repository.bucket_prefix,
        auto_import_events=list(repository.auto_import_events),
        auto_export_events=list(repository.auto_export_events),
        batch_import_metadata_on_create=repository.batch_import_metadata_on_create,
        imported_file_chunk_size_mib=repository.imported_file_chunk_size_mib,
    )


def associate(scope: Construct, repository: S3DataRepository, file_system_id: str) -> fsx.CfnDataRepositoryAssociation:
    """``Repository<Name>`` in ``scope``: the link between a directory of the file system and an S3 prefix."""
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
        scope,
        f"Repository{pascal_case(repository.name)}",
        file_system_id=file_system_id,
        file_system_path=repository.file_system_path,
        data_repository_path=repository.data_repository_path,
        batch_import_meta_data_on_create=repository.batch_import_metadata_on_create,
        imported_file_chunk_size=repository.imported_file_chunk_size_mib,
        s3=s3_policy,
    )


def admit_lustre_clients(connections: ec2.Connections, clients: ec2.IConnectable, *, efa: bool) -> None:
    """Let ``clients`` reach the file system's groups in ``connections``: LNet's ports, or all traffic both ways
    when the file system serves EFA."""
    ports = [ec2.Port.all_traffic()] if efa else list(lustre_ports())
    for port in ports:
        connections.allow_from(clients, port, "Lustre clients")
        if efa:
            connections.allow_to(clients, port, "Lustre over EFA")


def default_dns_name(file_system_id: str) -> str:
    """FSx for Lustre's DNS name of a file system: ``<file_system_id>.fsx.<region>.<url suffix>``."""
    return f"{file_system_id}.fsx.{Aws.REGION}.{Aws.URL_SUFFIX}"


@jsii.implements(ec2.IConnectable)
class ImportedLustreFileSystem(Construct):
    """An FSx for Lustre file system created elsewhere, unowned (aws-cdk's ``fromLustreFileSystemAttributes``):
    it adds no resource to the template, and nothing is ever changed or deleted for it. Its attributes are
    checked like the config's ``storage.existing`` (rule FSX-EXISTING-IDS; tokens are skipped).

    Its security group must already admit the nodes' security group on TCP 988 and 1018-1023 (LNet; all traffic
    both ways for a file system that serves EFA): :meth:`allow_clients` adds nothing, and ``HyperPodCluster``
    adds no rule to it. ``connections`` is there for rules you choose to add yourself.

    :param file_system_id: e.g. ``fs-0123456789abcdef0``.
    :param dns_name: e.g. ``fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com``
        (:func:`default_dns_name` builds it in the stack's Region).
    :param mount_name: the file system's Lustre mount name (1-8 characters).
    :param security_group: the file system's security group.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        file_system_id: str,
        dns_name: str,
        mount_name: str,
        security_group: ec2.ISecurityGroup,
    ) -> None:
        super().__init__(scope, id)
        existing = ExistingFileSystemConfig.model_construct(
            file_system_id=file_system_id,
            mount_name=mount_name,
            security_group_id=security_group.security_group_id,
            dns_name=dns_name,
        )
        check_props(
            self,
            "LustreStorage.from_lustre_attributes",
            {"storage"},
            storage=StorageConfig.model_construct(_fields_set={"existing"}, existing=existing),
            paths={"storage": ""},
        )
        self.file_system_id = file_system_id
        self.dns_name = dns_name
        self.mount_name = mount_name
        self.security_group = security_group
        self._connections = ec2.Connections(security_groups=[security_group], default_port=lustre_ports()[0])

    @property
    def connections(self) -> ec2.Connections:
        return self._connections

    def allow_clients(self, clients: ec2.IConnectable) -> None:
        """Nothing: the file system is not ours, so neither is its security group (see the class)."""
