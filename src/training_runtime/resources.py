"""HyperPod's ``/opt/ml/config/resource_config.json``: the cluster's instance groups and their instances.

Parsed defensively: a group may have no instances (``Instances`` missing or null), unknown keys are
ignored, and every problem is reported at once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from training_runtime.errors import InputError
from training_runtime.groups import GroupSpec
from training_runtime.params import ProvisioningParameters

HYPERPOD_HOSTNAME = re.compile(r"^ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})$")
"""An instance's host name and Slurm node name on HyperPod: the EC2 private DNS name's first label."""


def hyperpod_hostname(address: str) -> str:
    """The host name (and Slurm node name) HyperPod gives the instance at ``address``: ``10.1.2.3`` ->
    ``ip-10-1-2-3``, the first label of its EC2 private DNS name (:data:`HYPERPOD_HOSTNAME` is the inverse)."""
    return "ip-" + address.replace(".", "-")


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


@dataclass(frozen=True)
class ResourceConfig:
    cluster_name: Optional[str]
    groups: Dict[str, Tuple[Instance, ...]]
    """Instances per group name, in the file's order (possibly empty)."""
    instance_types: Dict[str, str] = field(default_factory=dict)
    """``InstanceGroups[].InstanceType`` per group name, where the file gives one (a non-empty string)."""

    def instances(self, group: str) -> Tuple[Instance, ...]:
        return self.groups.get(group, ())

    def all_instances(self) -> List[Instance]:
        return [i for instances in self.groups.values() for i in instances]

    def find(self, addresses: List[str]) -> Optional[Instance]:
        """The instance whose address is one of ``addresses`` (this node's own)."""
        return next((i for i in self.all_instances() if i.address in addresses), None)

    @classmethod
    def from_json(cls, data: Any) -> "ResourceConfig":
        if not isinstance(data, Mapping):
            raise ResourceConfigError(["top level: expected a JSON object, got {}".format(type(data).__name__)])
        problems: List[str] = []
        cluster = data.get("ClusterConfig")
        cluster_name = cluster.get("ClusterName") if isinstance(cluster, Mapping) else None
        raw_groups = data.get("InstanceGroups")
        if not isinstance(raw_groups, list) or not raw_groups:
            raise ResourceConfigError(
                ["InstanceGroups: got {!r}; expected a non-empty list of instance groups".format(raw_groups)]
            )
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
            cluster_name=cluster_name if isinstance(cluster_name, str) else None, groups=groups, instance_types=types
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
    if len(fields) < 2:
        return None
    own_type = raw.get("InstanceType")
    if own_type is not None and (not isinstance(own_type, str) or not own_type):
        problems.append("{}.InstanceType: got {!r}; expected an instance type or absent".format(at, own_type))
        return None
    return Instance(
        name=fields["InstanceName"], address=fields["CustomerIpAddress"], group=group, instance_type=own_type
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
