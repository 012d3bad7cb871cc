"""The deployed config, rebuilt from what is deployed (:class:`hyperpod_cdk.deployed.stack.Deployed`) so that
``update_policy.changes(before, after)`` compares it with the new one.

Only the fields :data:`COMPARED` names are read back from the stack's template and parameters file; every other
field keeps the new config's value, so it shows no change (``plan --previous FILE`` compares every field). A value
the template holds as an intrinsic (a ``Ref`` to a launch choice, a ``GetAtt``) is not the config's and is not
compared either. A scaled group's count is the deployed cluster's at every synth
(:mod:`hyperpod_cdk.deployed.scaler_counts`),
not the config's, so it is not compared: the drift table shows it.

No ``aws_cdk`` import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hyperpod_cdk.aws_data.fields import field, fields, plain_group_members
from hyperpod_cdk.core.config import ClusterConfig, parse_model
from hyperpod_cdk.deployed.stack import LUSTRE_TYPE, Deployed
from hyperpod_cdk.model import DEFAULT_THROUGHPUT_MB_PER_TIB, NodeProvisioningMode, SlurmMode

GROUP_FIELDS = {
    **{member: name for member, name in plain_group_members() if field(f"instance_groups[].{name}").plan},
    "InstanceType": "instance_type",  # as it is, unless the group is flexible (InstanceRequirements, below)
}
"""A template instance group's property -> the config's group field (the value as it is): the field map's plain
group members that ``plan`` reads back (data/fields.yaml, ``plan: true``), and the instance type."""
REQUIRED = frozenset({"InstanceCount", "ThreadsPerCore"})
"""Properties whose absence does not mean the config's none (the construct always writes them)."""
LUSTRE_FIELDS = {
    tuple(f.cfn_property[1].split("/")): f.leaf
    for f in fields()
    if f.plan and f.path.startswith("storage.") and f.cfn_property and f.cfn_property[0] == LUSTRE_TYPE
}
"""The template's ``AWS::FSx::FileSystem`` (Lustre) property -> the config's ``storage`` field (the field map's)."""
COMPARED = tuple(f.path for f in fields() if f.plan)
"""The fields ``plan`` reads back from a deployed stack: the field map's ``plan: true`` ones (docs/configuration.md)."""


def _known(raw: Any) -> bool:
    """A literal the config wrote (not an intrinsic CloudFormation resolves: a launch choice, a resource's id)."""
    if isinstance(raw, dict):
        return False
    if isinstance(raw, list):
        return all(_known(v) for v in raw)
    return raw is not None


def _dig(props: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = props
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _node_type(template: Mapping[str, Any], written: Mapping[str, Any]) -> str | None:
    """A template group's Slurm role: its SlurmConfig's NodeType (api-driven), else the parameters file's."""
    slurm = template.get("SlurmConfig") or {}
    return str(slurm["NodeType"]).lower() if slurm.get("NodeType") else written.get("role")


def _execution_role(template: Mapping[str, Any], role: str | None, controller_role: Any) -> str | None:
    """``controller`` for a login or compute group whose ExecutionRole is the controller group's (the one role every
    group shared before roles per group), ``own`` for another; None where the template does not say."""
    if role in (None, "controller") or template.get("ExecutionRole") is None or controller_role is None:
        return None
    return "controller" if template.get("ExecutionRole") == controller_role else "own"


def _group(
    base: dict[str, Any],
    template: Mapping[str, Any],
    written: Mapping[str, Any],
    scaled: bool,
    controller_role: Any = None,
) -> None:
    """``base`` (the new config's group, or a bare one) with the deployed values of :data:`COMPARED`;
    ``controller_role`` is the controller group's ExecutionRole in the template."""
    for prop, name in GROUP_FIELDS.items():
        raw = template.get(prop)
        if prop == "InstanceCount" and scaled:
            continue  # the deployed count at every synth (scaler_counts), not the config's
        if raw is None and prop in REQUIRED:
            continue  # not in the template (another writer's): unknown, not "none"
        if raw is None or _known(raw):  # not an intrinsic: a launch choice or a token is not the config's
            base[name] = raw
    types = _dig(template, ("InstanceRequirements", "InstanceTypes"))
    if _known(types):
        base["instance_types"], base["instance_type"] = list(types), None
    elif _known(template.get("InstanceType")):
        base["instance_types"] = []
    volumes = [
        c.get("EbsVolumeConfig") or {}
        for c in template.get("InstanceStorageConfigs") or []
        if not (c.get("EbsVolumeConfig") or {}).get("RootVolume")
    ]
    size = volumes[0].get("VolumeSizeInGB") if volumes else None
    if size is None or _known(size):
        base["ebs_volume_gib"] = size
    base["deep_health_checks"] = list(template.get("OnStartDeepHealthChecks") or [])
    slurm = template.get("SlurmConfig") or {}
    role = _node_type(template, written)
    if role:
        base["role"] = role
    execution_role = _execution_role(template, role, controller_role)
    if execution_role is not None:
        base["execution_role"] = execution_role
    partitions = slurm.get("PartitionNames") or ([written["partition"]] if written.get("partition") else [])
    if role == "compute" and partitions and partitions[0] != (base.get("partition") or base["name"]):
        base["partition"] = partitions[0]


def _storage(data: dict[str, Any], deployed: Deployed) -> None:
    lustre = deployed.resource(LUSTRE_TYPE)
    if lustre is not None and (lustre.get("Properties") or {}).get("FileSystemType") != "LUSTRE":
        lustre = next(
            (
                r
                for r in ((deployed.template or {}).get("Resources") or {}).values()
                if r.get("Type") == LUSTRE_TYPE and (r.get("Properties") or {}).get("FileSystemType") == "LUSTRE"
            ),
            None,
        )
    if (data.get("storage") or {}).get("existing"):
        return  # an adopted file system: nothing of it in the template
    if lustre is None:
        data["storage"] = None
        return
    storage = dict(data.get("storage") or {})
    props = lustre.get("Properties") or {}
    for path, name in LUSTRE_FIELDS.items():
        raw = _dig(props, path)
        if _known(raw):
            storage[name] = raw
    if storage.get("throughput_mb_per_tib") == DEFAULT_THROUGHPUT_MB_PER_TIB and not (
        (data.get("storage") or {}).get("throughput_mb_per_tib")
    ):
        storage["throughput_mb_per_tib"] = None  # the construct's default for PERSISTENT_2 when the config has none
    storage["removal_policy"] = (
        "retain" if lustre.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate") else "destroy"
    )
    data["storage"] = storage


def deployed_config(new: ClusterConfig, deployed: Deployed) -> ClusterConfig:
    """The config as deployed, as far as :data:`COMPARED` reads it back; the new config's value elsewhere."""
    data: dict[str, Any] = new.model_dump(mode="json")
    written = (deployed.parameters_file or {}).get("hyperpod_cdk") or {}
    props = deployed.cluster_properties()
    if props:
        name = props.get("ClusterName")
        prefix = new.organization.name_prefix if new.organization else None
        if isinstance(name, str):
            data["cluster_name"] = name[len(prefix) :] if prefix and name.startswith(prefix) else name
        for prop, field in (("NodeRecovery", "node_recovery"),):
            if _known(props.get(prop)):
                data[field] = props[prop]
        mode = props.get("NodeProvisioningMode")
        data["node_provisioning_mode"] = NodeProvisioningMode(str(mode).lower()).value if mode else None
        slurm = (props.get("Orchestrator") or {}).get("Slurm")
        data["mode"] = str(SlurmMode.API_DRIVEN if slurm is not None else SlurmMode.LIFECYCLE_DRIVEN)
        if slurm and slurm.get("SlurmConfigStrategy"):
            data["slurm_config_strategy"] = slurm["SlurmConfigStrategy"]
        _storage(data, deployed)
    if written:
        data["mode"] = written.get("mode", data["mode"])
        data["fsx_mount_path"] = written.get("fsx_mount_path", data["fsx_mount_path"])
        data["runtime"] = dict(written.get("options") or {})
    template_groups = deployed.template_groups() or {
        name: {"InstanceGroupName": name, "InstanceType": g.get("InstanceType"), "InstanceCount": g.get("TargetCount")}
        for name, g in deployed.live_groups().items()
    }
    if template_groups:
        ours = {g["name"]: g for g in data["instance_groups"]}
        files = {str(g.get("name")): g for g in written.get("groups") or []}
        groups = []
        controller_role = next(
            (
                t.get("ExecutionRole")
                for n, t in template_groups.items()
                if _node_type(t, files.get(n, {})) == "controller"
            ),
            None,
        )
        for name, template in template_groups.items():
            base = dict(ours.get(name) or {"name": name, "count": 0})
            _group(base, template, files.get(name, {}), base.get("scaling") is not None, controller_role)
            groups.append(base)
        data["instance_groups"] = groups
    return parse_model(data, f"the deployed config (stack {deployed.stack_name})")
