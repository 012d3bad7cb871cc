"""OpenZfsStorage: an existing FSx for OpenZFS file system that HyperPod mounts on the nodes over NFS."""

from __future__ import annotations

import jsii
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from hyperpod_cdk.constructs.checks import check_props
from hyperpod_cdk.constructs.network import ClusterNetwork


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


@jsii.implements(ec2.IConnectable)
class OpenZfsStorage(Construct):
    """An FSx for OpenZFS file system created elsewhere, adopted for the cluster's nodes.

    The file system's security group admits the cluster's nodes on the NFS ports; ``HyperPodCluster`` gives
    HyperPod its DNS name and mount path (``FsxOpenZfsConfig``, API-driven mode only). Creating a file system is
    not supported yet.

    :param network: whose nodes mount it.
    :param file_system_id: the ``fs-`` ID.
    :param dns_name: the file system's DNS name, by which HyperPod mounts it.
    :param security_group: the file system's security group; the NFS rules are added to it.
    :param mount_path: where the nodes mount it, e.g. ``/home``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        network: ClusterNetwork,
        file_system_id: str,
        dns_name: str,
        security_group: ec2.ISecurityGroup,
        mount_path: str,
    ) -> None:
        super().__init__(scope, id)
        from hyperpod_cdk.config import ExistingOpenZfsConfig, OpenZfsConfig

        config = OpenZfsConfig(
            existing=ExistingOpenZfsConfig(
                file_system_id=file_system_id, dns_name=dns_name, security_group_id=security_group.security_group_id
            ),
            mount_path=mount_path,
        )
        check_props(self, "OpenZfsStorage", {"storage_openzfs"}, openzfs=config, paths={"storage_openzfs": ""})
        self.config = config
        """The file system as the rules see it (``storage_openzfs``)."""
        self.file_system_id = file_system_id
        self.dns_name = dns_name
        self.mount_path = mount_path
        self.security_group = security_group
        self._connections = ec2.Connections(security_groups=[security_group], default_port=ec2.Port.tcp(2049))
        self.allow_clients(network)

    @property
    def connections(self) -> ec2.Connections:
        return self._connections

    def allow_clients(self, clients: ec2.IConnectable) -> None:
        """Let ``clients`` mount the file system (the NFS ports)."""
        for port in nfs_ports():
            self.connections.allow_from(clients, port, "NFS clients of FSx for OpenZFS")
