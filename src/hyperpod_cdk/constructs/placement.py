"""Where ``HyperPodCluster``'s nodes live and how they reach the file systems it is given (its props on CDK's terms:
a :class:`~hyperpod_cdk.constructs.interfaces.NodeNetwork`, or a VPC with subnets and security groups)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from aws_cdk import Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from constructs import Construct, IConstruct

from hyperpod_cdk.constructs.interfaces import LustreTarget, NodeNetwork, OpenZfsTarget
from hyperpod_cdk.constructs.lifecycle import LifecycleSource
from hyperpod_cdk.constructs.network import ClusterNetwork, efa_security_group, network_view
from hyperpod_cdk.constructs.openzfs import ImportedOpenZfsFileSystem, OpenZfsStorage
from hyperpod_cdk.constructs.storage import ImportedLustreFileSystem, LustreStorage
from hyperpod_cdk.core.config import ExistingOpenZfsConfig, NetworkConfig, OpenZfsConfig
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.model import InstanceGroup, SlurmMode


@dataclass(frozen=True)
class NodePlacement:
    """The nodes' VPC, subnets and security groups, as the cluster's ``VpcConfig`` names them."""

    vpc: ec2.IVpc
    subnets: tuple[ec2.ISubnet, ...]
    security_groups: tuple[ec2.ISecurityGroup, ...]
    connections: ec2.Connections
    given_vpc: bool
    """Whether the props named a VPC (``vpc=``) rather than a ``network``: the cluster then runs the network's
    rules itself (a ``ClusterNetwork`` ran them already)."""

    @property
    def subnet_ids(self) -> list[str]:
        return [s.subnet_id for s in self.subnets]

    @property
    def security_group_ids(self) -> list[str]:
        return [g.security_group_id for g in self.security_groups]

    def view(self) -> NetworkConfig:
        """The network section for the rules (its first subnet and group; a token is skipped by the rules)."""
        return network_view(vpc=self.vpc, subnet=self.subnets[0], security_group=self.security_groups[0])


def node_placement(
    scope: Construct,
    *,
    network: NodeNetwork | None,
    vpc: ec2.IVpc | None,
    subnets: ec2.SubnetSelection | ec2.ISubnet | None,
    security_groups: Sequence[ec2.ISecurityGroup],
) -> NodePlacement:
    """``network``, or ``vpc`` with ``subnets`` (default: the VPC's private subnets) and ``security_groups``
    (default: a new EFA-ready ``NodeSecurityGroup`` in ``scope``; groups you give are used as they are)."""
    where = f"HyperPodCluster {scope.node.path}"
    if network is not None:
        extra = [n for n, v in (("vpc", vpc), ("subnets", subnets), ("security_groups", security_groups or None)) if v]
        if extra:
            raise_if_any(where, [f"{n}: given with network. Fix: pass network, or vpc with subnets" for n in extra])
        return NodePlacement(
            network.vpc, (network.subnet,), (network.security_group,), network.connections, given_vpc=False
        )
    if vpc is None:
        raise_if_any(where, ["network: required (or vpc, with subnets). Fix: pass network=ClusterNetwork(...) or vpc"])
        raise AssertionError  # unreachable: raise_if_any raised
    if subnets is None or isinstance(subnets, ec2.SubnetSelection):
        # jsii's Python takes the selection's fields as keywords (a struct keeps them in _values).
        selection: dict[str, Any] = dict(subnets._values) if subnets is not None else {}
        chosen = tuple(vpc.select_subnets(**selection).subnets)
    else:
        chosen = (subnets,)
    if not chosen:
        raise_if_any(where, ["subnets: selects no subnet of the VPC. Fix: name the nodes' subnets"])
    groups = tuple(security_groups) or (efa_security_group(scope, vpc, allow_internet_egress=True),)
    return NodePlacement(vpc, chosen, groups, ec2.Connections(security_groups=list(groups)), given_vpc=True)


def admit(target: LustreTarget | OpenZfsTarget, clients: ec2.IConnectable) -> None:
    """Let ``clients`` mount ``target``: our constructs know their ports (and an unowned import adds nothing); any
    other file system (``fsx.LustreFileSystem``) admits them on its connections' default port."""
    allow_clients = getattr(target, "allow_clients", None)
    if allow_clients is not None:
        allow_clients(clients)
    else:
        target.connections.allow_default_port_from(clients, "HyperPod nodes")


def storage_dependencies(target: LustreTarget, *, lifecycle_driven: bool) -> list[IConstruct]:
    """What the cluster waits for of a Lustre file system: its security groups (with the rules that admit the
    nodes), its data repository associations, and, lifecycle-driven, the file system itself (the runtime mounts
    it; no storage config names it). An import's groups hold no rule of ours, and it needs no creating."""
    found: list[IConstruct] = list(target.connections.security_groups)
    if isinstance(target, LustreStorage):
        found += target.data_repository_associations
        if lifecycle_driven:
            found.append(target.file_system)
    elif lifecycle_driven and isinstance(target, Construct):  # an fsx.LustreFileSystem of yours, whole
        found.append(target)
    return found


def openzfs_view(target: OpenZfsTarget) -> OpenZfsConfig:
    """The OpenZFS file system as the rules read it: ours carries its config; any other is read as an existing one."""
    if isinstance(target, (OpenZfsStorage, ImportedOpenZfsFileSystem)):
        return target.config
    groups = target.connections.security_groups
    existing = ExistingOpenZfsConfig.model_construct(
        file_system_id=target.file_system_id,
        dns_name=target.dns_name,
        security_group_id=groups[0].security_group_id if groups else "",
    )
    given = {"mount_path": target.mount_path, "existing": existing}
    return OpenZfsConfig.model_construct(_fields_set=set(given), **{**OpenZfsConfig().model_dump(), **given})


def admit_group_security_groups(
    scope: Construct, instance_groups: Sequence[InstanceGroup], file_systems: Sequence[LustreTarget | OpenZfsTarget]
) -> None:
    """A group in its own security groups (override_vpc) mounts the file systems too: its groups may reach them
    (imported into ``scope`` as ``GroupSecurityGroup<n>``, unchanged themselves)."""
    ids = dict.fromkeys(g for i in instance_groups if i.override_vpc for g in i.override_vpc.security_group_ids)
    if not file_systems:
        return
    for number, group_id in enumerate(ids):
        imported = ec2.SecurityGroup.from_security_group_id(
            scope, f"GroupSecurityGroup{number}", group_id, mutable=False
        )
        for file_system in file_systems:
            admit(file_system, imported)


def override_security_groups(cluster: Construct) -> list[ec2.ISecurityGroup]:
    """The groups' own security groups (override_vpc) that :func:`admit_group_security_groups` imported into
    ``cluster`` (none when the cluster has no file system)."""
    return [
        cast(ec2.ISecurityGroup, c)
        for c in cluster.node.children
        if c.node.id.startswith("GroupSecurityGroup") and ec2.SecurityGroup.is_security_group(c)
    ]


def fsx_keys(
    where: str, mode: SlurmMode, lifecycle: LifecycleSource, storage: LustreTarget | None
) -> tuple[str | None, str | None, bool | None]:
    """The parameters file's FSx DNS name, mount name and explicit flag.

    A prefix uploaded at deploy gets the names (CloudFormation values resolved then) and no flag, as
    always. A published prefix is fixed at synth: it says whether FSx is there and carries the names only
    when they are known at synth; lifecycle-driven mode cannot do without them (the runtime mounts FSx).
    """
    if lifecycle.resolves_at_deploy:
        return (storage.dns_name, storage.mount_name, None) if storage else (None, None, None)
    if storage is None:
        return None, None, False
    if not Token.is_unresolved(storage.dns_name) and not Token.is_unresolved(storage.mount_name):
        return storage.dns_name, storage.mount_name, True
    if mode == SlurmMode.LIFECYCLE_DRIVEN:
        raise_if_any(
            where,
            [
                "storage: lifecycle-driven mode writes the file system's DNS and mount names into the "
                "lifecycle prefix, but a published prefix is fixed at synth and this file system's names "
                "are only known at deploy. Fix: adopt an existing file system with both names (config: "
                "storage.existing with dns_name and mount_name), or use API-driven mode (config: mode: "
                "api-driven), where HyperPod mounts the file system itself"
            ],
        )
    return None, None, True


if TYPE_CHECKING:  # mypy proves that ours, the imports and aws-cdk-lib's file system satisfy the protocols as they are

    def _conforms(
        network: ClusterNetwork,
        lustre: LustreStorage,
        cdk_lustre: fsx.LustreFileSystem,
        imported_lustre: ImportedLustreFileSystem,
        openzfs: OpenZfsStorage,
        imported_openzfs: ImportedOpenZfsFileSystem,
    ) -> tuple[NodeNetwork, LustreTarget, LustreTarget, LustreTarget, OpenZfsTarget, OpenZfsTarget]:
        return network, lustre, cdk_lustre, imported_lustre, openzfs, imported_openzfs
