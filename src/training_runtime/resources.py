"""HyperPod's ``/opt/ml/config/resource_config.json``: the cluster's instance groups and their instances.

The shape, pieced together from AWS's own code and notes (tests/fixtures/resource_config/README.md cites each):
``ClusterConfig{ClusterArn, ClusterName}``, ``ClusterType`` ("Slurm"), ``SlurmConfig{PrimaryControllerIp,
SecondaryControllerIps}`` (its nesting is inferred), and ``InstanceGroups[]`` with ``Name``, ``InstanceType`` and
``Instances`` (missing or null for an empty group), each instance with ``InstanceName`` (``<group>-<n>``),
``InstanceId``, ``AgentIpAddress``, ``CustomerIpAddress`` and ``InstanceLabel`` (topology labels, or null).

Parsed defensively: only ``Name``, ``InstanceName`` and ``CustomerIpAddress`` are required, unknown keys are
ignored, and every problem is reported at once. A worker's copy can be stale (groups since scaled to 0 still
listed): :meth:`ResourceConfig.find_self` and ``__main__.load_node`` are written for that
(docs/node-runtime.md, "Stale copies on workers").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from training_runtime.errors import InputError
from training_runtime.groups import GroupSpec
from training_runtime.node_names import ip_name
from training_runtime.params import ProvisioningParameters

SLURM_CLUSTER_TYPE = "Slurm"


class ResourceConfigError(InputError):
    subject = "resource config"


@dataclass(frozen=True)
class Instance:
    name: str
    """HyperPod's ``InstanceName`` (``<group>-<n>``); the Slurm node name on the generic platform."""
    address: str
    """``CustomerIpAddress``: the node's primary address in the cluster's VPC."""
    group: str
    instance_type: Optional[str] = None
    """``Instances[].InstanceType`` where the file gives one: the instance's own type, which in a flexible group
    (several types at once) may differ from its neighbours'. The local cluster always writes it."""
    instance_id: Optional[str] = None
    """``InstanceId`` (``i-...``)."""
    agent_address: Optional[str] = None
    """``AgentIpAddress``: the address on HyperPod's agent network (not the cluster's VPC)."""
    labels: Tuple[Tuple[str, str], ...] = ()
    """``InstanceLabel``'s (label, value) pairs (``network-node-layer-{1,2,3}`` on accelerator instances), sorted;
    empty when null or absent."""


@dataclass(frozen=True)
class ResourceConfig:
    cluster_name: Optional[str]
    groups: Dict[str, Tuple[Instance, ...]]
    """Instances per group name, in the file's order (possibly empty)."""
    instance_types: Dict[str, str] = field(default_factory=dict)
    """``InstanceGroups[].InstanceType`` per group name, where the file gives one (a non-empty string)."""
    cluster_arn: Optional[str] = None
    primary_controller_ip: Optional[str] = None
    """``SlurmConfig.PrimaryControllerIp``: HyperPod's own word on which controller is the primary."""
    secondary_controller_ips: Tuple[str, ...] = ()

    def instances(self, group: str) -> Tuple[Instance, ...]:
        return self.groups.get(group, ())

    def all_instances(self) -> List[Instance]:
        return [i for instances in self.groups.values() for i in instances]

    def find(self, addresses: Sequence[str]) -> Optional[Instance]:
        """The instance whose address is one of ``addresses`` (this node's own)."""
        return next((i for i in self.all_instances() if i.address in addresses), None)

    def find_self(self, addresses: Sequence[str], hostname: str) -> Instance:
        """This node's entry: by address (``CustomerIpAddress``, as every AWS script looks it up), else by host
        name (its ``InstanceName`` or its ``ip-a-b-c-d`` name). Raises when neither finds it, or when the two
        find different instances (the file contradicts itself about this node)."""
        by_address = self.find(addresses)
        by_name = next((i for i in self.all_instances() if hostname and hostname in (i.name, ip_name(i.address))), None)
        if by_address is not None and by_name is not None and by_address != by_name:
            raise ResourceConfigError(
                [
                    "this node's address is {!r}'s ({}) but its host name {!r} is {!r}'s; the file disagrees with "
                    "the machine. Fix: check that {} is this cluster's resource config".format(
                        by_address.name, by_address.address, hostname, by_name.name, "the file"
                    )
                ]
            )
        found = by_address or by_name
        if found is None:
            raise ResourceConfigError(
                [
                    "no instance has one of this node's addresses {} or its host name {!r} (as InstanceName or "
                    "ip-a-b-c-d). Fix: run on a node of this cluster, or pass --ip".format(list(addresses), hostname)
                ]
            )
        return found

    def without(self, groups: Sequence[str]) -> "ResourceConfig":
        """This config less ``groups`` (those a stale copy lists that the parameters file no longer has)."""
        return replace(
            self,
            groups={g: i for g, i in self.groups.items() if g not in groups},
            instance_types={g: t for g, t in self.instance_types.items() if g not in groups},
        )

    @classmethod
    def from_json(cls, data: Any) -> "ResourceConfig":
        if not isinstance(data, Mapping):
            raise ResourceConfigError(["top level: expected a JSON object, got {}".format(type(data).__name__)])
        problems: List[str] = []
        cluster = _object(data, "ClusterConfig", "ClusterConfig", problems)
        cluster_name = _text(cluster, "ClusterName", "ClusterConfig.ClusterName", problems)
        cluster_arn = _text(cluster, "ClusterArn", "ClusterConfig.ClusterArn", problems)
        cluster_type = data.get("ClusterType")
        if cluster_type is not None and cluster_type != SLURM_CLUSTER_TYPE:
            problems.append(
                "ClusterType: got {!r}; this runtime configures Slurm-orchestrated clusters ({!r})".format(
                    cluster_type, SLURM_CLUSTER_TYPE
                )
            )
        slurm = _object(data, "SlurmConfig", "SlurmConfig", problems)
        primary = _text(slurm, "PrimaryControllerIp", "SlurmConfig.PrimaryControllerIp", problems)
        secondaries = slurm.get("SecondaryControllerIps") or []
        if not isinstance(secondaries, list) or not all(isinstance(a, str) and a for a in secondaries):
            problems.append(
                "SlurmConfig.SecondaryControllerIps: got {!r}; expected a list of addresses or null".format(secondaries)
            )
            secondaries = []
        raw_groups = data.get("InstanceGroups")
        if not isinstance(raw_groups, list) or not raw_groups:
            problems.append("InstanceGroups: got {!r}; expected a non-empty list of instance groups".format(raw_groups))
            raise ResourceConfigError(problems)
        groups: Dict[str, Tuple[Instance, ...]] = {}
        types: Dict[str, str] = {}
        names: Dict[str, str] = {}
        addresses: Dict[str, str] = {}
        for gi, group in enumerate(raw_groups):
            where = "InstanceGroups[{}]".format(gi)
            if not isinstance(group, Mapping):
                problems.append("{}: got {!r}; expected an object".format(where, group))
                continue
            group_name = group.get("Name")
            if not isinstance(group_name, str) or not group_name:
                problems.append("{}.Name: got {!r}; expected the instance group's name".format(where, group_name))
                continue
            if group_name in groups:
                problems.append("{}.Name: {!r} appears twice".format(where, group_name))
            raw_instances = group.get("Instances") or []
            if not isinstance(raw_instances, list):
                problems.append("{}.Instances: got {!r}; expected a list or null".format(where, raw_instances))
                raw_instances = []
            instances: List[Instance] = []
            for ii, raw in enumerate(raw_instances):
                at = "{}.Instances[{}]".format(where, ii)
                instance = _instance(raw, at, group_name, problems)
                if instance is None:
                    continue
                for index, key, value in (
                    (names, "InstanceName", instance.name),
                    (addresses, "CustomerIpAddress", instance.address),
                ):
                    if value in index:
                        problems.append("{}.{}: {!r} is already used by {}".format(at, key, value, index[value]))
                    index.setdefault(value, at)
                instances.append(instance)
            groups[group_name] = tuple(instances)
            instance_type = group.get("InstanceType")
            if isinstance(instance_type, str) and instance_type:
                types[group_name] = instance_type
        if problems:
            raise ResourceConfigError(problems)
        return cls(
            cluster_name=cluster_name,
            groups=groups,
            instance_types=types,
            cluster_arn=cluster_arn,
            primary_controller_ip=primary,
            secondary_controller_ips=tuple(secondaries),
        )

    @classmethod
    def load(cls, path: Path) -> "ResourceConfig":
        try:
            text = path.read_text()
        except OSError as error:
            raise ResourceConfigError(
                [
                    "{}: cannot be read ({}). HyperPod writes it before running lifecycle scripts; set "
                    "SAGEMAKER_RESOURCE_CONFIG_PATH when it lives elsewhere".format(path, error.strerror)
                ]
            ) from None
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ResourceConfigError(["{}: not valid JSON: {}".format(path, error)]) from None
        return cls.from_json(data)


def _object(data: Mapping[str, Any], key: str, at: str, problems: List[str]) -> Mapping[str, Any]:
    """``data[key]`` when an object; {} when absent or null (a problem when something else)."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append("{}: got {!r}; expected an object or null".format(at, value))
        return {}
    return value


def _text(data: Mapping[str, Any], key: str, at: str, problems: List[str]) -> Optional[str]:
    """``data[key]`` when a non-empty string; None when absent or null (a problem when something else)."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        problems.append("{}: got {!r}; expected a non-empty string or absent".format(at, value))
        return None
    return value


def _instance(raw: Any, at: str, group: str, problems: List[str]) -> Optional[Instance]:
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected an object".format(at, raw))
        return None
    fields: Dict[str, str] = {}
    for key in ("InstanceName", "CustomerIpAddress"):
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            problems.append("{}.{}: got {!r}; expected a non-empty string".format(at, key, value))
        else:
            fields[key] = value
    before = len(problems)
    own_type = _text(raw, "InstanceType", at + ".InstanceType", problems)
    instance_id = _text(raw, "InstanceId", at + ".InstanceId", problems)
    agent_address = _text(raw, "AgentIpAddress", at + ".AgentIpAddress", problems)
    labels = _object(raw, "InstanceLabel", at + ".InstanceLabel", problems)
    bad_labels = sorted(str(k) for k, v in labels.items() if not isinstance(v, str))
    if bad_labels:
        problems.append("{}.InstanceLabel: {} not strings; expected label -> value".format(at, bad_labels))
    if len(fields) < 2 or len(problems) > before:
        return None
    return Instance(
        name=fields["InstanceName"],
        address=fields["CustomerIpAddress"],
        group=group,
        instance_type=own_type,
        instance_id=instance_id,
        agent_address=agent_address,
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )


def resolve_instance_types(params: ProvisioningParameters, resources: ResourceConfig) -> ProvisioningParameters:
    """``params`` with every null instance type taken from the resource config's ``InstanceType``.

    A template published with an instance-type parameter cannot write the chosen type into the parameters
    file (it is fixed when the template is built); HyperPod's resource config names each group's type.
    Raises :class:`ResourceConfigError` naming every group whose type is in neither file.
    """
    problems: List[str] = []
    groups = []
    for group in params.groups:
        if group.flexible:
            problems.extend(_foreign_types(group, resources))
        elif group.instance_type is None:
            found = resources.instance_types.get(group.name)
            if found is None:
                problems.append(
                    "InstanceGroups: group {0!r} has no InstanceType, and the parameters file leaves its instance "
                    "type to the resource config (the template has an instance-type parameter for this group). "
                    "Fix: publish the template without that parameter (remove "
                    "parameters.instance_groups.{0}.instance_types from the config)".format(group.name)
                )
                continue
            group = replace(group, instance_type=found)
        groups.append(group)
    if problems:
        raise ResourceConfigError(problems)
    return replace(params, groups=tuple(groups))


def _foreign_types(group: GroupSpec, resources: ResourceConfig) -> List[str]:
    """An instance of a flexible group whose type is not one of the group's candidates: the files disagree."""
    return [
        "InstanceGroups: instance {!r} of flexible group {!r} has InstanceType {!r}, which is not one of the group's "
        "instance_types ({}). Fix: deploy the parameters file and the cluster from the same config".format(
            i.name, group.name, i.instance_type, ", ".join(group.instance_types)
        )
        for i in resources.instances(group.name)
        if i.instance_type is not None and i.instance_type not in group.instance_types
    ]


def instance_type_of(params: ProvisioningParameters, instance: Instance) -> Optional[str]:
    """The instance's own type: its ``InstanceType`` in the resource config, else its group's one type (from the
    parameters file, or resolved from the resource config), else the only candidate of a one-type flexible
    group. None when only the instance itself can tell (a flexible group whose resource config names no type
    per instance)."""
    if instance.instance_type is not None:
        return instance.instance_type
    group = params.group(instance.group)
    if group is None:
        return None
    if group.instance_type is not None:
        return group.instance_type
    return group.instance_types[0] if len(group.instance_types) == 1 else None
