"""What ``HyperPodCluster`` needs of the resources it is given, as small protocols (aws-cdk's construct interfaces).

Any object with these attributes will do: aws-cdk-lib's own constructs (``fsx.LustreFileSystem`` is a
:class:`LustreTarget` as it is), ours (``ClusterNetwork``, ``LustreStorage``, ``OpenZfsStorage``) and the unowned
imports (``LustreStorage.from_lustre_attributes``, ``OpenZfsStorage.from_open_zfs_attributes``).
"""

from __future__ import annotations

from typing import Protocol

from aws_cdk import aws_ec2 as ec2


class NodeNetwork(Protocol):
    """Where the nodes live: a VPC, the nodes' subnet and their security group (``ClusterNetwork`` is one).

    The security group must allow all traffic to and from itself (EFA's rule): the cluster does not add it. Admitting
    the nodes to a file system adds an egress rule to it only when it does not allow all outbound traffic.
    """

    @property
    def vpc(self) -> ec2.IVpc: ...

    @property
    def subnet(self) -> ec2.ISubnet: ...

    @property
    def security_group(self) -> ec2.ISecurityGroup: ...

    @property
    def connections(self) -> ec2.Connections: ...


class LustreTarget(Protocol):
    """An FSx for Lustre file system the nodes mount: ``fsx.LustreFileSystem``, ``LustreStorage`` or an import.

    ``connections`` holds the file system's security groups: the cluster admits its nodes there (its default
    port), except on an unowned import, whose rules are yours to add.
    """

    @property
    def file_system_id(self) -> str: ...

    @property
    def dns_name(self) -> str: ...

    @property
    def mount_name(self) -> str: ...

    @property
    def connections(self) -> ec2.Connections: ...


class OpenZfsTarget(Protocol):
    """An FSx for OpenZFS file system HyperPod mounts on every node at ``mount_path``: ``OpenZfsStorage`` or an
    import (aws-cdk-lib has no OpenZFS construct of its own)."""

    @property
    def file_system_id(self) -> str: ...

    @property
    def dns_name(self) -> str: ...

    @property
    def mount_path(self) -> str: ...

    @property
    def connections(self) -> ec2.Connections: ...
