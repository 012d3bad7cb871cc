"""Which nodes a local cluster has and what HyperPod would tell them (pure: no side effects).

A local cluster is a capped-down copy of a :class:`~hyperpod_cdk.core.config.ClusterConfig`: the controller,
the login node (if any) and a few nodes of each compute group, named as HyperPod names instances
(``<group>-<n>``, n from 1), on one private subnet. A flexible group's nodes take its instance types in turn
(HyperPod fills by priority and capacity; in turn, a job across the group meets every type).
:func:`resource_config` gives ``/opt/ml/config/resource_config.json``, and :func:`hosts_file` the nodes'
``/etc/hosts``; the parameters file is the deployed one with the overlays of :mod:`hyperpod_local.overlay`.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperpod_cdk.core.config import ClusterConfig
from hyperpod_cdk.core.errors import ConfigurationError
from hyperpod_local.bridge import FIRST_NODE_HOST
from training_runtime.groups import COMPUTE, CONTROLLER, LOGIN, MAX_NAME_LENGTH, NAME_PATTERN, GroupSpec
from training_runtime.node_names import INSTANCE_NAMES, ip_name

DEFAULT_SUBNET = "10.250.0.0/24"
DEFAULT_MAX_PER_GROUP = 2
DEFAULT_MAX_WORKERS = 4
LOGIN_POOL_NODES = 2
"""Login nodes a config with ``login_pool`` gets locally (the group's count permitting): two show that the pool's
nodes share host keys and spread sessions."""
FIRST_HOST_INDEX = FIRST_NODE_HOST - 1
"""The first node's index in the subnet's host addresses (the plan: :mod:`hyperpod_local.bridge`)."""
LOCAL_ACCOUNT = "000000000000"
LOCAL_REGION = "local"


class LayoutError(ConfigurationError):
    """The config cannot become a local cluster (names, subnet, caps); ``problems`` lists every reason."""


@dataclass(frozen=True)
class LocalNode:
    """One emulated instance."""

    name: str
    """HyperPod's ``InstanceName`` (``<group>-<n>``); also the node's hostname and Slurm node name."""
    group: str
    role: str
    instance_type: str
    ip: str

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "group": self.group,
            "role": self.role,
            "instance_type": self.instance_type,
            "ip": self.ip,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LocalNode:
        return cls(
            name=str(data["name"]),
            group=str(data["group"]),
            role=str(data["role"]),
            instance_type=str(data["instance_type"]),
            ip=str(data["ip"]),
        )


@dataclass(frozen=True)
class LocalLayout:
    """The nodes of a local cluster, and every group of its config (including groups with no local node)."""

    cluster_name: str
    subnet: str
    groups: tuple[GroupSpec, ...]
    nodes: tuple[LocalNode, ...]
    requested: Mapping[str, int]
    """Instance count per group in the config (before the caps)."""
    launched: Mapping[str, int] = field(default_factory=dict)
    """Per group, the highest node number it ever had when nodes were added while running
    (:mod:`hyperpod_local.membership`): names, and so instance ids, are not reused."""

    @property
    def prefixlen(self) -> int:
        return ipaddress.IPv4Network(self.subnet).prefixlen

    @property
    def controllers(self) -> tuple[LocalNode, ...]:
        """The controller group's nodes: the primary slurmctld first, then its backups."""
        return tuple(n for n in self.nodes if n.role == CONTROLLER)

    @property
    def controller(self) -> LocalNode:
        """The primary controller."""
        return self.controllers[0]

    @property
    def login(self) -> LocalNode | None:
        return next((n for n in self.nodes if n.role == LOGIN), None)

    @property
    def workers(self) -> tuple[LocalNode, ...]:
        return tuple(n for n in self.nodes if n.role == COMPUTE)

    def node(self, name: str) -> LocalNode:
        for node in self.nodes:
            if node.name == name:
                return node
        known = ", ".join(n.name for n in self.nodes)
        raise LayoutError("local cluster", [f"node {name!r}: no such node; this cluster has {known}"])

    def capped(self) -> dict[str, tuple[int, int]]:
        """Groups that got fewer local nodes than the config asks for: name -> (requested, local)."""
        local = {g.name: sum(1 for n in self.nodes if n.group == g.name) for g in self.groups}
        return {name: (count, local[name]) for name, count in self.requested.items() if local[name] < count}

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster_name": self.cluster_name,
            "subnet": self.subnet,
            "groups": [
                {
                    "name": g.name,
                    "role": g.role,
                    "instance_type": g.instance_type,
                    "partition": g.partition,
                    "instance_types": list(g.instance_types),
                }
                for g in self.groups
            ],
            "nodes": [n.to_json() for n in self.nodes],
            "requested": dict(self.requested),
            **({"launched": dict(self.launched)} if self.launched else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LocalLayout:
        return cls(
            cluster_name=str(data["cluster_name"]),
            subnet=str(data["subnet"]),
            groups=tuple(
                GroupSpec(
                    str(g["name"]),
                    str(g["role"]),
                    None if g["instance_type"] is None else str(g["instance_type"]),
                    g.get("partition"),
                    instance_types=tuple(str(t) for t in g.get("instance_types", ())),
                )
                for g in data["groups"]
            ),
            nodes=tuple(LocalNode.from_json(n) for n in data["nodes"]),
            requested={str(k): int(v) for k, v in data["requested"].items()},
            launched={str(k): int(v) for k, v in data.get("launched", {}).items()},
        )


def plan_layout(
    config: ClusterConfig,
    *,
    max_per_group: int = DEFAULT_MAX_PER_GROUP,
    max_workers: int = DEFAULT_MAX_WORKERS,
    subnet: str = DEFAULT_SUBNET,
) -> LocalLayout:
    """The local nodes of ``config``: the controllers (up to ``max_per_group``: with two, the second is the
    backup slurmctld), 1 login node if the config has a login group (2 with ``login_pool``: the pool behind one
    name, docs/login-pool-node.md), and per
    compute group ``min(count, max_per_group)`` nodes while the cluster has at most ``max_workers`` workers
    (groups in config order). Addresses are consecutive from the subnet's 10th host."""
    return plan_nodes(
        config.cluster_name,
        tuple(g.spec() for g in config.instance_groups),
        {g.name: g.count for g in config.instance_groups},
        max_per_group=max_per_group,
        max_workers=max_workers,
        subnet=subnet,
        login_nodes=LOGIN_POOL_NODES if config.login_pool is not None else 1,
    )


def plan_nodes(
    cluster_name: str,
    specs: Sequence[GroupSpec],
    counts: Mapping[str, int],
    *,
    max_per_group: int = DEFAULT_MAX_PER_GROUP,
    max_workers: int = DEFAULT_MAX_WORKERS,
    subnet: str = DEFAULT_SUBNET,
    login_nodes: int = 1,
) -> LocalLayout:
    """:func:`plan_layout` from the groups (every type known) and their instance counts; at most ``login_nodes``
    nodes of the login group."""
    specs = tuple(specs)
    problems: list[str] = []
    if max_per_group < 1:
        problems.append(f"max_per_group: got {max_per_group}; expected 1 or more")
    if max_workers < 1:
        problems.append(f"max_workers: got {max_workers}; expected 1 or more")
    network = _network(subnet, problems)
    if problems:
        raise LayoutError("local cluster", problems)
    planned: list[tuple[GroupSpec, int]] = []
    # Every controller up to max_per_group (a primary and its backups: multi-head); one login node (a pool: two).
    planned += [(g, min(counts[g.name], max_per_group)) for g in specs if g.role == CONTROLLER]
    planned += [(g, min(counts[g.name], login_nodes)) for g in specs if g.role == LOGIN]
    workers_left = max_workers
    for spec in (g for g in specs if g.role == COMPUTE):
        take = min(counts[spec.name], max_per_group, workers_left)
        workers_left -= take
        planned.append((spec, take))
    names = [(spec, f"{spec.name}-{n}") for spec, take in planned for n in range(1, take + 1)]
    types = [_local_type(spec, int(name.rsplit("-", 1)[1]) - 1) for spec, name in names]
    for spec, name in names:
        if len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(name):
            problems.append(
                f"instance_groups[{spec.name}]: node name {name!r} is not a valid hostname (at most "
                f"{MAX_NAME_LENGTH} letters, digits and hyphens). Fix: shorten the group name"
            )
    assert network is not None
    hosts = network.num_addresses - 2 if network.prefixlen < 31 else 0
    if FIRST_HOST_INDEX + len(names) > hosts:
        problems.append(
            f"subnet: {subnet} has {hosts} host addresses; {len(names)} nodes need {FIRST_HOST_INDEX + len(names)} "
            f"(addresses start at host {FIRST_NODE_HOST}). Fix: use a larger subnet, e.g. a /24"
        )
    if problems:
        raise LayoutError("local cluster", problems)
    first = int(network.network_address) + 1 + FIRST_HOST_INDEX
    nodes = tuple(
        LocalNode(
            name=name,
            group=spec.name,
            role=spec.role,
            instance_type=instance_type,
            ip=str(ipaddress.IPv4Address(first + index)),
        )
        for index, ((spec, name), instance_type) in enumerate(zip(names, types, strict=True))
    )
    return LocalLayout(
        cluster_name=cluster_name,
        subnet=str(network),
        groups=specs,
        nodes=nodes,
        requested=dict(counts),
    )


def _local_type(spec: GroupSpec, index: int) -> str:
    """The type of a group's ``index``-th local node (from 0): a flexible group's types in turn."""
    if spec.instance_types:
        return spec.instance_types[index % len(spec.instance_types)]
    return spec.resolved_type


def _network(subnet: str, problems: list[str]) -> ipaddress.IPv4Network | None:
    try:
        network = ipaddress.IPv4Network(subnet, strict=True)
    except ValueError as error:
        problems.append(f"subnet: got {subnet!r}; expected an IPv4 network such as {DEFAULT_SUBNET} ({error})")
        return None
    if not network.is_private:
        problems.append(f"subnet: got {subnet}; use a private range (RFC 1918), e.g. {DEFAULT_SUBNET}")
    return network


def cluster_arn(cluster_name: str) -> str:
    """A fake, stable HyperPod cluster ARN (its 12-character ID derives from the name)."""
    cluster_id = hashlib.sha256(cluster_name.encode()).hexdigest()[:12]
    return f"arn:aws:sagemaker:{LOCAL_REGION}:{LOCAL_ACCOUNT}:cluster/{cluster_id}"


def instance_id(cluster_name: str, node_name: str) -> str:
    return "i-" + hashlib.sha256(f"{cluster_name}/{node_name}".encode()).hexdigest()[:17]


NETWORK_LAYERS = ("network-node-layer-1", "network-node-layer-2", "network-node-layer-3")
"""``InstanceLabel``'s topology keys in HyperPod's resource_config.json, top of the hierarchy first."""


def network_layers(layout: LocalLayout) -> dict[str, tuple[str, str, str]]:
    """Each compute and login instance's network nodes (``InstanceLabel.network-node-layer-{1,2,3}``), top
    first: the emulator's one definition of the cluster's network. One spine and one aggregation switch for the
    cluster, one leaf switch per instance group, named like EC2's network nodes (``nn-`` and 17 hex digits) and
    derived from the names only, so every node and every run agrees. Controllers are not Slurm nodes: none."""

    def network_node(*key: str) -> str:
        return "nn-" + hashlib.sha256("/".join((layout.cluster_name, *key)).encode()).hexdigest()[:17]

    spine, aggregation = network_node("layer-1"), network_node("layer-2")
    return {
        node.name: (spine, aggregation, network_node("layer-3", node.group))
        for node in layout.nodes
        if node.role in (COMPUTE, LOGIN)
    }


def resource_config(layout: LocalLayout, *, stale: bool = False) -> dict[str, Any]:
    """HyperPod's ``/opt/ml/config/resource_config.json`` for this cluster, in the shape AWS's scripts and notes show
    (tests/fixtures/resource_config/README.md cites each key): the controller's copy, or with ``stale`` a worker's
    stale one (:func:`stale_instances`).

    Every group of the config is listed; a group without local nodes has an empty ``Instances`` list, as
    HyperPod shows a compute group of count 0. ``InstanceLabel`` holds a Slurm node's network layers
    (:func:`network_layers`, the same tree the emulated agent writes to ``topology.conf``) and is null on
    controllers (AWS's notes: null on instances without topology labels). ``AgentIpAddress`` is the node's one
    address.
    """
    ghosts = stale_instances(layout) if stale else {}
    layers = network_layers(layout)
    return {
        "ClusterConfig": {"ClusterArn": cluster_arn(layout.cluster_name), "ClusterName": layout.cluster_name},
        "ClusterType": "Slurm",
        "SlurmConfig": {
            "PrimaryControllerIp": layout.controller.ip,
            "SecondaryControllerIps": [n.ip for n in layout.controllers[1:]],
        },
        "InstanceGroups": [
            {
                "Name": group.name,
                # A flexible group has no one type; each instance names its own (as every instance does).
                **({} if group.instance_type is None else {"InstanceType": group.instance_type}),
                "Instances": [
                    {
                        "InstanceName": node.name,
                        "InstanceType": node.instance_type,
                        "AgentIpAddress": node.ip,
                        "CustomerIpAddress": node.ip,
                        "InstanceId": instance_id(layout.cluster_name, node.name),
                        "InstanceLabel": (
                            dict(zip(NETWORK_LAYERS, layers[node.name], strict=True)) if node.name in layers else None
                        ),
                    }
                    for node in (*layout.nodes, *ghosts.get(group.name, ()))
                    if node.group == group.name
                ],
            }
            for group in layout.groups
        ],
    }


def stale_instances(layout: LocalLayout) -> dict[str, tuple[LocalNode, ...]]:
    """What a stale worker copy still lists: one instance in each group the current copy shows with none, at an
    address no node has (the group was scaled to 0 after the worker got its copy). AWS's field notes
    (hyperpod-mental-model.md): "the on-node copy can be stale - workers may show instance groups that have since
    been scaled to 0. The controller's view is the most current." Raises when no group is empty."""
    empty = [g for g in layout.groups if not any(n.group == g.name for n in layout.nodes)]
    if not empty:
        raise LayoutError(
            "local cluster",
            [
                "stale worker copies: every group has local nodes, so no group can have been scaled to 0. Fix: "
                "give a group count 0 in the config (or cap it away with max_workers)"
            ],
        )
    last = ipaddress.IPv4Address(max(ipaddress.IPv4Address(n.ip) for n in layout.nodes))
    return {
        g.name: (LocalNode(f"{g.name}-1", g.name, g.role, _local_type(g, 0), str(last + 1 + index)),)
        for index, g in enumerate(empty)
    }


def cluster_agent_config(naming: str) -> dict[str, Any]:
    """HyperPod's ``/opt/ml/config/cluster_agent.json`` (the controller's only, AWS's field notes): the key the
    node runtime reads, ``SlurmConfiguration.UseInstanceNames``."""
    return {"SlurmConfiguration": {"UseInstanceNames": naming == INSTANCE_NAMES}}


def hosts_file(layout: LocalLayout) -> str:
    """``/etc/hosts`` of every node as it boots: localhost, and every node by its host name and by what the
    VPC's DNS would answer (``ip-a-b-c-d``), each name once (the runtime's ``hosts`` step then adds none of
    them again), so ``hostname --ip-address`` prints one address."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{n.ip}\t{' '.join(dict.fromkeys([n.name, ip_name(n.ip)]))}" for n in layout.nodes]
    return "\n".join(lines) + "\n"
