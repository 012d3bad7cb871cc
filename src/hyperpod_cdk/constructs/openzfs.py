"""OpenZfsStorage: FSx for OpenZFS, new or imported unowned, that HyperPod mounts on the nodes over NFS."""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_kms as kms
from constructs import Construct

from hyperpod_cdk.constructs.checks import check_props
from hyperpod_cdk.constructs.interfaces import NodeNetwork
from hyperpod_cdk.constructs.nag import RULE_ORDER, lint_accepts
from hyperpod_cdk.core.config import ExistingOpenZfsConfig, OpenZfsConfig, OpenZfsDeploymentType
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.rules.openzfs import MULTI_AZ, default_throughput

_DEFAULTS = OpenZfsConfig()
"""The config file's defaults are the props' defaults (one definition)."""
NFS_EXPORT_OPTIONS = ("rw", "crossmnt", "no_root_squash")
"""Read-write, child volumes visible, and root on a node stays root: the node runtime creates and chowns each
user's home as root (FSx for OpenZFS user guide, "NFS exports")."""


def nfs_ports() -> tuple[ec2.Port, ...]:
    """The ports NFS clients of FSx for OpenZFS use, TCP and UDP: rpcbind (111), nfsd (2049) and the file server's
    mountd, lockd and statd (20001-20003) (FSx for OpenZFS user guide, "File system access control with Amazon
    VPC")."""
    return tuple(
        port
        for tcp, udp in (
            (ec2.Port.tcp(111), ec2.Port.udp(111)),
            (ec2.Port.tcp(2049), ec2.Port.udp(2049)),
            (ec2.Port.tcp_range(20001, 20003), ec2.Port.udp_range(20001, 20003)),
        )
        for port in (tcp, udp)
    )


def admit_nfs_clients(connections: ec2.Connections, clients: ec2.IConnectable) -> None:
    """Let ``clients`` reach the file system's groups in ``connections`` on the NFS ports."""
    for port in nfs_ports():
        connections.allow_from(clients, port, "NFS clients of FSx for OpenZFS")


@jsii.implements(ec2.IConnectable)
class OpenZfsStorage(Construct):
    """FSx for OpenZFS for the cluster's nodes: a new file system (one created elsewhere is imported, unowned, with
    :meth:`from_open_zfs_attributes`).

    A new file system lives in the nodes' subnet (the preferred one for MULTI_AZ_1) with its own security group,
    exports its root volume over NFS only to ``client_cidrs``, keeps daily backups and is retained by default.
    Its security group admits the nodes on the NFS ports, and ``HyperPodCluster`` gives HyperPod its DNS name and
    mount path (``FsxOpenZfsConfig``, API-driven mode only).

    :param network: whose nodes mount it (and, for a new file system, where it lives).
    :param mount_path: where the nodes mount it. Default: ``/home`` (the users' homes live on it).
    :param storage_capacity_gib: Default: 256.
    :param deployment_type: Default: ``SINGLE_AZ_1``.
    :param throughput_capacity_mbps: Default: the deployment type's smallest tier (64 or 160 MB/s).
    :param data_compression: of the root volume. Default: ``LZ4``.
    :param automatic_backup_retention_days: Default: 7 (0 turns daily backups off).
    :param copy_tags_to_backups: copy tags to backups, volumes and snapshots. Default: True.
    :param standby_subnet: MULTI_AZ_1 only (required there): the standby file server's subnet in another AZ.
        Default: none.
    :param route_table_ids: MULTI_AZ_1 only: route tables of the nodes' subnets. Default: the VPC's main table.
    :param client_cidrs: who may mount the root volume over NFS. Default: the nodes' subnet's CIDR.
    :param kms_key: customer-managed key. Default: FSx's AWS-managed key (the organization's key when
        ``OrganizationRules`` set one).
    :param removal_policy: of the file system and its security group. Default: RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        network: NodeNetwork,
        mount_path: str = _DEFAULTS.mount_path,
        storage_capacity_gib: int = _DEFAULTS.storage_capacity_gib,
        deployment_type: OpenZfsDeploymentType = _DEFAULTS.deployment_type,
        throughput_capacity_mbps: int | None = _DEFAULTS.throughput_capacity_mbps,
        data_compression: str = _DEFAULTS.data_compression,
        automatic_backup_retention_days: int = _DEFAULTS.automatic_backup_retention_days,
        copy_tags_to_backups: bool = _DEFAULTS.copy_tags_to_backups,
        standby_subnet: ec2.ISubnet | None = None,
        route_table_ids: Sequence[str] = (),
        client_cidrs: Sequence[str] | None = None,
        kms_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        given: dict[str, object] = {
            "mount_path": mount_path,
            "storage_capacity_gib": storage_capacity_gib,
            "deployment_type": deployment_type,
            "throughput_capacity_mbps": throughput_capacity_mbps,
            "data_compression": data_compression,
            "automatic_backup_retention_days": automatic_backup_retention_days,
            "copy_tags_to_backups": copy_tags_to_backups,
            "standby_subnet_id": standby_subnet.subnet_id if standby_subnet is not None else None,
            "route_table_ids": list(route_table_ids),
            "client_cidrs": list(client_cidrs) if client_cidrs is not None else None,
            "removal_policy": "retain" if removal_policy == RemovalPolicy.RETAIN else "destroy",
        }
        config = OpenZfsConfig.model_construct(_fields_set=set(given), **{**_DEFAULTS.model_dump(), **given})
        check_props(self, "OpenZfsStorage", {"storage_openzfs"}, openzfs=config, paths={"storage_openzfs": ""})
        self.config = config
        """The file system as the rules see it (``storage_openzfs``)."""
        self.mount_path = mount_path
        group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=network.vpc,
            description="FSx for OpenZFS: NFS from the cluster nodes",
            allow_all_outbound=False,
        )
        group.apply_removal_policy(removal_policy)
        self.security_group: ec2.ISecurityGroup = group
        self.file_system = self._new_file_system(network, config, standby_subnet, kms_key, removal_policy)
        self.file_system_id: str = self.file_system.ref
        self.dns_name: str = self.file_system.attr_dns_name
        self._connections = ec2.Connections(security_groups=[self.security_group], default_port=ec2.Port.tcp(2049))
        self.allow_clients(network)

    @classmethod
    def from_open_zfs_attributes(
        cls,
        scope: Construct,
        id: str,
        *,
        file_system_id: str,
        dns_name: str,
        security_group: ec2.ISecurityGroup,
        mount_path: str = _DEFAULTS.mount_path,
    ) -> ImportedOpenZfsFileSystem:
        """A file system created elsewhere, unowned: nothing is created, changed or deleted for it (see
        :class:`ImportedOpenZfsFileSystem`)."""
        return ImportedOpenZfsFileSystem(
            scope,
            id,
            file_system_id=file_system_id,
            dns_name=dns_name,
            security_group=security_group,
            mount_path=mount_path,
        )

    @property
    def connections(self) -> ec2.Connections:
        return self._connections

    def allow_clients(self, clients: ec2.IConnectable) -> None:
        """Let ``clients`` mount the file system (the NFS ports)."""
        admit_nfs_clients(self.connections, clients)

    def _client_cidrs(self, network: NodeNetwork, given: Sequence[str] | None) -> list[str]:
        if given is not None:
            return list(given)
        try:
            return [network.subnet.ipv4_cidr_block]
        except RuntimeError:  # an imported subnet without its CIDR (jsii raises the CDK error as RuntimeError)
            raise_if_any(
                f"OpenZfsStorage {self.node.path}",
                [
                    "client_cidrs: required: the nodes' subnet was imported without its CIDR, and the root volume "
                    "is exported only to the nodes' subnets. Fix: give client_cidrs (every subnet whose nodes "
                    "mount it)"
                ],
            )
            raise  # unreachable: raise_if_any raised

    def _new_file_system(
        self,
        network: NodeNetwork,
        config: OpenZfsConfig,
        standby_subnet: ec2.ISubnet | None,
        kms_key: kms.IKey | None,
        removal_policy: RemovalPolicy,
    ) -> fsx.CfnFileSystem:
        multi_az = config.deployment_type == MULTI_AZ
        subnet_ids = [network.subnet.subnet_id] + ([standby_subnet.subnet_id] if standby_subnet is not None else [])
        throughput = config.throughput_capacity_mbps
        if throughput is None:
            throughput = default_throughput(config.deployment_type)
        exports = [
            fsx.CfnFileSystem.NfsExportsProperty(
                client_configurations=[
                    fsx.CfnFileSystem.ClientConfigurationsProperty(clients=cidr, options=list(NFS_EXPORT_OPTIONS))
                    for cidr in self._client_cidrs(network, config.client_cidrs)
                ]
            )
        ]
        file_system = fsx.CfnFileSystem(
            self,
            "FileSystem",
            file_system_type="OPENZFS",
            storage_capacity=config.storage_capacity_gib,
            storage_type="SSD",
            subnet_ids=subnet_ids,
            security_group_ids=[self.security_group.security_group_id],
            kms_key_id=kms_key.key_arn if kms_key is not None else None,
            open_zfs_configuration=fsx.CfnFileSystem.OpenZFSConfigurationProperty(
                deployment_type=config.deployment_type,
                throughput_capacity=throughput,
                automatic_backup_retention_days=config.automatic_backup_retention_days,
                copy_tags_to_backups=config.copy_tags_to_backups,
                copy_tags_to_volumes=config.copy_tags_to_backups,
                preferred_subnet_id=network.subnet.subnet_id if multi_az else None,
                route_table_ids=list(config.route_table_ids) or None,
                root_volume_configuration=fsx.CfnFileSystem.RootVolumeConfigurationProperty(
                    data_compression_type=config.data_compression,
                    copy_tags_to_snapshots=config.copy_tags_to_backups,
                    nfs_exports=exports,
                ),
            ),
        )
        file_system.apply_removal_policy(removal_policy)
        # FSx checks the group's NFS rules when it creates the file system: create them first.
        file_system.node.add_dependency(self.security_group)
        lint_accepts(file_system, RULE_ORDER)
        return file_system


@jsii.implements(ec2.IConnectable)
class ImportedOpenZfsFileSystem(Construct):
    """An FSx for OpenZFS file system created elsewhere, unowned: it adds no resource to the template, and nothing
    is ever changed or deleted for it. Its attributes are checked like the config's ``storage_openzfs.existing``
    (rule ZFS-EXISTING-IDS and the mount path's rules; tokens are skipped).

    Its security group must already admit the nodes' security group on the NFS ports (TCP and UDP 111, 2049 and
    20001-20003): :meth:`allow_clients` adds nothing, and ``HyperPodCluster`` adds no rule to it.

    :param file_system_id: e.g. ``fs-0123456789abcdef0``.
    :param dns_name: its DNS name, by which HyperPod mounts it.
    :param security_group: the file system's security group.
    :param mount_path: where the nodes mount it. Default: ``/home``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        file_system_id: str,
        dns_name: str,
        security_group: ec2.ISecurityGroup,
        mount_path: str = _DEFAULTS.mount_path,
    ) -> None:
        super().__init__(scope, id)
        existing = ExistingOpenZfsConfig.model_construct(
            file_system_id=file_system_id, dns_name=dns_name, security_group_id=security_group.security_group_id
        )
        given = {"mount_path": mount_path, "existing": existing}
        config = OpenZfsConfig.model_construct(_fields_set=set(given), **{**_DEFAULTS.model_dump(), **given})
        check_props(
            self,
            "OpenZfsStorage.from_open_zfs_attributes",
            {"storage_openzfs"},
            openzfs=config,
            paths={"storage_openzfs": ""},
        )
        self.config = config
        """The file system as the rules see it (``storage_openzfs``)."""
        self.file_system_id = file_system_id
        self.dns_name = dns_name
        self.mount_path = mount_path
        self.security_group = security_group
        self._connections = ec2.Connections(security_groups=[security_group], default_port=ec2.Port.tcp(2049))

    @property
    def connections(self) -> ec2.Connections:
        return self._connections

    def allow_clients(self, clients: ec2.IConnectable) -> None:
        """Nothing: the file system is not ours, so neither is its security group (see the class)."""
