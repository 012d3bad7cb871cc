"""Which nodes a local cluster has and what HyperPod would tell them (pure: no side effects).

A local cluster is a capped-down copy of a :class:`~hyperpod_cdk.config.ClusterConfig`: the controller,
the login node (if any) and a few nodes of each compute group, named as HyperPod names instances
(``<group>-<n>``, n from 1), on one private subnet. A flexible group's nodes take its instance types in turn
(HyperPod fills by priority and capacity; in turn, a job across the group meets every type).
:func:`resource_config` and :func:`local_parameters` give
the two files HyperPod puts on a node: ``/opt/ml/config/resource_config.json`` and the parameters file
in the lifecycle prefix (the deployed one, :func:`hyperpod_cdk.deployment.deployment`, with
:func:`emulated`'s overlays).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_cdk.config import ClusterConfig
from hyperpod_cdk.deployment import deployment
from hyperpod_cdk.errors import ConfigurationError
from training_runtime.emulation import Emulation
from training_runtime.hardware import hardware_for
from training_runtime.option_types import MIN_CRED_EXPIRE
from training_runtime.options import options_problems
from training_runtime.params import (
    COMPUTE,
    CONTROLLER,
    LOGIN,
    MAX_NAME_LENGTH,
    NAME_PATTERN,
    GroupSpec,
    ProvisioningParameters,
)
from training_runtime.resources import hyperpod_hostname

DEFAULT_SUBNET = "10.250.0.0/24"
DEFAULT_MAX_PER_GROUP = 2
DEFAULT_MAX_WORKERS = 4
FIRST_HOST_INDEX = 9
"""Nodes get addresses from the subnet's 10th host on (``.10`` in a /24), HyperPod-VPC style."""
LOCAL_ACCOUNT = "000000000000"
LOCAL_REGION = "local"

EMULATION_SLURM_OPTIONS: dict[str, int] = {
    "slurmd_timeout": 10,
    "message_timeout": 5,
    "sched_interval": 2,
    "cred_expire": MIN_CRED_EXPIRE,
    "slurmctld_timeout": 10,
}
"""Fast failure detection for fault tests (docs/research/local-slurm.md §6.6): a crashed node is DOWN
within ~15 s, a requeued job may restart after cred_expire + 1 s; cred_expire below 70 lets a stale signal
kill the restarted job (§6.3 there). With a backup controller, it takes over ~10 s after the primary stops."""
EMULATED_MEMORY_MIB = 2000
"""RealMemory every node registers with; below the machine's memory so slurmd never reports less."""


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
        )


def plan_layout(
    config: ClusterConfig,
    *,
    max_per_group: int = DEFAULT_MAX_PER_GROUP,
    max_workers: int = DEFAULT_MAX_WORKERS,
    subnet: str = DEFAULT_SUBNET,
) -> LocalLayout:
    """The local nodes of ``config``: the controllers (up to ``max_per_group``: with two, the second is the
    backup slurmctld), 1 login node if the config has a login group, and per
    compute group ``min(count, max_per_group)`` nodes while the cluster has at most ``max_workers`` workers
    (groups in config order). Addresses are consecutive from the subnet's 10th host."""
    return plan_nodes(
        config.cluster_name,
        tuple(g.spec() for g in config.instance_groups),
        {g.name: g.count for g in config.instance_groups},
        max_per_group=max_per_group,
        max_workers=max_workers,
        subnet=subnet,
    )


def plan_nodes(
    cluster_name: str,
    specs: Sequence[GroupSpec],
    counts: Mapping[str, int],
    *,
    max_per_group: int = DEFAULT_MAX_PER_GROUP,
    max_workers: int = DEFAULT_MAX_WORKERS,
    subnet: str = DEFAULT_SUBNET,
) -> LocalLayout:
    """:func:`plan_layout` from the groups (every type known) and their instance counts."""
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
    # Every controller up to max_per_group (a primary and its backups: multi-head); one login node.
    planned += [(g, min(counts[g.name], max_per_group)) for g in specs if g.role == CONTROLLER]
    planned += [(g, min(counts[g.name], 1)) for g in specs if g.role == LOGIN]
    workers_left = max_workers
    for spec in (g for g in specs if g.role == COMPUTE):
        take = min(counts[spec.name], max_per_group, workers_left)
        workers_left -= take
        planned.append((spec, take))
    names = [(spec, f"{spec.name}-{n}") for spec, take in planned for n in range(1, take + 1)]
    types = [_local_type(spec, int(name.rsplit("-", 1)[1]) - 1) for spec, name in names]
    for spec, name in names:
        if len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.match(name):
            problems.append(
                f"instance_groups[{spec.name}]: node name {name!r} is not a valid hostname (at most "
                f"{MAX_NAME_LENGTH} letters, digits and hyphens). Fix: shorten the group name"
            )
    assert network is not None
    hosts = network.num_addresses - 2 if network.prefixlen < 31 else 0
    if FIRST_HOST_INDEX + len(names) > hosts:
        problems.append(
            f"subnet: {subnet} has {hosts} host addresses; {len(names)} nodes need {FIRST_HOST_INDEX + len(names)} "
            "(addresses start at the 10th host). Fix: use a larger subnet, e.g. a /24"
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


def resource_config(layout: LocalLayout) -> dict[str, Any]:
    """HyperPod's ``/opt/ml/config/resource_config.json`` for this cluster (the same on every node).

    Every group of the config is listed; a group without local nodes has an empty ``Instances`` list, as
    HyperPod shows a compute group of count 0.
    """
    return {
        "ClusterConfig": {"ClusterArn": cluster_arn(layout.cluster_name), "ClusterName": layout.cluster_name},
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
                    }
                    for node in layout.nodes
                    if node.group == group.name
                ],
            }
            for group in layout.groups
        ],
    }


def host_hardware(cpus: int | None = None) -> dict[str, int]:
    """This machine as one emulated node: what ``slurmd -C`` reports here, with a fixed, small memory."""
    count = cpus if cpus is not None else (os.cpu_count() or 1)
    return {
        "cpus": count,
        "sockets": 1,
        "cores_per_socket": count,
        "threads_per_core": 1,
        "memory_mib": EMULATED_MEMORY_MIB,
    }


def local_options(
    runtime: Mapping[str, Any],
    instance_types: Sequence[str],
    *,
    cpus: int | None = None,
    own_size: Sequence[str] = (),
) -> dict[str, Any]:
    """The config's runtime options with the emulation's values on top: fast Slurm failure detection,
    every instance type sized as this machine, no accelerator software.

    The types in ``own_size`` (a flexible group's) keep their own CPU count where this machine has that many
    (else the machine's), so the nodes of one group differ as the types do on AWS."""
    options = copy.deepcopy(dict(runtime))
    slurm = options.get("slurm")
    options["slurm"] = {**(dict(slurm) if isinstance(slurm, Mapping) else {}), **EMULATION_SLURM_OPTIONS}
    hardware = options.get("node_hardware")
    merged_hardware = dict(hardware) if isinstance(hardware, Mapping) else {}
    figures = host_hardware(cpus)
    for instance_type in instance_types:
        merged_hardware[instance_type] = dict(figures)
    for instance_type in own_size:
        try:
            own = hardware_for(instance_type, hardware if isinstance(hardware, Mapping) else {})
        except ValueError:  # invalid node_hardware: the options check below reports it
            own = None
        merged_hardware[instance_type] = host_hardware(min(figures["cpus"], own.cpus) if own else figures["cpus"])
    options["node_hardware"] = merged_hardware
    options["install_accelerator_software"] = False
    accounting = options.get("accounting")
    if isinstance(accounting, Mapping) and accounting.get("database") == "external":
        # No RDS or Secrets Manager here: the controller's own MariaDB plays the external database.
        kept = {k: v for k, v in accounting.items() if k in ("enabled", "user")}
        options["accounting"] = {**kept, "database": "local"}
    return options


def local_parameters(config: ClusterConfig, *, cpus: int | None = None) -> ProvisioningParameters:
    """The parameters file of the local cluster of ``config``: what a deployment puts on the nodes
    (:func:`hyperpod_cdk.deployment.deployment`) with :func:`emulated`'s overlays, launched at the defaults."""
    deployed = deployment(config)
    chosen = [g.instance_type for g in deployed.groups_as_launched if g.instance_type]
    return emulated(deployed.parameters, cpus=cpus, instance_types=chosen)


def emulated(
    deployed: ProvisioningParameters,
    *,
    cpus: int | None = None,
    instance_types: Sequence[str] = (),
    imds_url: str | None = None,
) -> ProvisioningParameters:
    """``deployed`` as the local cluster runs it. The overlays, and nothing else:

    * ``fsx_dns_name``, ``fsx_mountname`` and the ``fsx`` flag become null: no Lustre, the shared directory
      is bind-mounted at ``fsx_mount_path`` instead;
    * ``openzfs_mount_path`` becomes null: no OpenZFS either, so the homes live on the shared directory;
    * ``options.slurm``: the keys of :data:`EMULATION_SLURM_OPTIONS` (fast failure detection);
    * ``options.node_hardware``: every instance type of the groups (and ``instance_types``: the types a template
      leaves to a parameter, as chosen locally) sized as this machine
      (:func:`host_hardware`), a flexible group's types at their own CPU count up to the machine's;
    * ``options.install_accelerator_software``: false;
    * ``options.accounting``: an ``external`` database becomes ``local`` (MariaDB on the controller; its
      host, port and password secret dropped): there is no RDS or Secrets Manager here;
    * ``emulation`` (``hyperpod_cdk.emulation``, a key only the local cluster writes): ``hardware`` true, the
      types' GPUs, Neuron devices and EFA interfaces are declared, not present (the health checks skip them and
      say so, the launcher runs CPU processes); ``imds_url``, where given: the Spot watcher reads the cluster's
      fake metadata service (:mod:`hyperpod_local.imds`);
    * ``metrics`` becomes null: no remote write, the local Prometheus scrapes the nodes itself.
    """
    fixed = sorted(
        {g.resolved_type for g in deployed.groups if not g.flexible and g.instance_type} | set(instance_types)
    )
    flexible = sorted({t for g in deployed.groups for t in g.instance_types})
    options = local_options(deployed.options, fixed, cpus=cpus, own_size=flexible)
    problems = options_problems(options, "runtime")
    if problems:
        raise LayoutError("local cluster runtime options", problems)
    local = dataclasses.replace(
        deployed,
        fsx_dns_name=None,
        fsx_mountname=None,
        fsx=None,
        metrics=None,
        options=options,
        emulation=Emulation(hardware=True, imds_url=imds_url),
    )
    return dataclasses.replace(local, openzfs_mount_path=None)


def hosts_file(layout: LocalLayout) -> str:
    """``/etc/hosts`` of every node as it boots: localhost, and every node by its host name and by what the
    VPC's DNS would answer (``ip-a-b-c-d``), each name once (the runtime's ``hosts`` step then adds none of
    them again), so ``hostname --ip-address`` prints one address."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{n.ip}\t{' '.join(dict.fromkeys([n.name, hyperpod_hostname(n.ip)]))}" for n in layout.nodes]
    return "\n".join(lines) + "\n"
