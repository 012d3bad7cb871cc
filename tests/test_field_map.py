"""The field map (data/fields.yaml, :mod:`hyperpod_cdk.aws_data.fields`) covers both ways: every
``AWS::SageMaker::Cluster`` property and FSx property the examples' templates render has a field, and every field's
API member or property is rendered by some example; every member a config's request holds maps to a field; the
readers derive from it (a field map line changed changes what they read)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.aws_data import fields as fm
from hyperpod_cdk.core.api_request import cluster_request, config_field
from hyperpod_cdk.core.config import load_file, parse_model
from hyperpod_cdk.rules.view import ClusterView

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "snapshots"
CONSTANT = {
    "InstanceGroups[].LifeCycleConfig.OnCreate": "the entry script hyperpod-cdk uploads (lifecycle-driven)",
    "InstanceGroups[].LifeCycleConfig.OnInitComplete": "the entry script hyperpod-cdk uploads (api-driven)",
    "Orchestrator.Slurm.AccountingDatabase.Name": "the database name the runtime's slurmdbd.conf uses",
    "InstanceGroups[].CapacityRequirements.Spot": "capacity: spot's empty structure",
    "InstanceGroups[].CapacityRequirements.OnDemand": "capacity: on-demand's empty structure",
    "InstanceGroups[].InstanceStorageConfigs[].EbsVolumeConfig.RootVolume": "the root volume's marker (a key's)",
    "Tags[].Key": "tags: the mapping's key",
    "Tags[].Value": "tags: the mapping's value",
    "InstanceGroups[].ScheduledUpdateConfig.DeploymentConfig.AutoRollbackConfiguration[].AlarmName": "an alarm",
    "InstanceGroups[].AutoPatchConfig.DeploymentConfig.AutoRollbackConfiguration[].AlarmName": "an alarm",
}
"""Members whose value the config does not hold as such: each lands at its nearest field (the parent's)."""
FSX_BY_CONSTRUCTION = {
    "FileSystemType", "SubnetIds", "SecurityGroupIds", "KmsKeyId", "Tags[]/Key", "Tags[]/Value", "StorageType",
    "LustreConfiguration/WeeklyMaintenanceStartTime", "LustreConfiguration/AutomaticBackupRetentionDays",
    "LustreConfiguration/CopyTagsToBackups", "LustreConfiguration/MetadataConfiguration/Mode",
    "LustreConfiguration/DailyAutomaticBackupStartTime", "LustreConfiguration/DriveCacheType",
    "LustreConfiguration/DataReadCacheConfiguration/SizingMode", "LustreConfiguration/ThroughputCapacity",
}  # fmt: skip
"""The Lustre file system's properties the construct decides (not a config field): its type, network, key."""


def structure(value: Any) -> bool:
    return isinstance(value, dict) and not any(k.startswith("Fn::") or k == "Ref" for k in value)


def leaves(value: Any, path: str = "", sep: str = ".", indexed: bool = False) -> list[str]:
    """Every leaf member path of an API-shaped value, list items as ``[]`` (``[N]`` with ``indexed``); a list of
    scalars (or of intrinsics) is a leaf."""
    if structure(value):
        if not value:
            return [path]
        return [leaf for k, v in value.items() for leaf in leaves(v, f"{path}{sep}{k}" if path else k, sep, indexed)]
    if isinstance(value, list) and any(structure(v) for v in value):
        return [
            leaf
            for n, item in enumerate(value)
            for leaf in leaves(item, path + (f"[{n}]" if indexed else "[]"), sep, indexed)
        ]
    return [path]


@cache
def templates() -> tuple[dict[str, Any], ...]:
    """The examples' synthesized templates (their reviewed snapshots), read once."""
    loaded = (json.loads(p.read_text()) for p in sorted(SNAPSHOTS.glob("*.json")))
    return tuple(t for t in loaded if isinstance(t, dict) and "Resources" in t)


def resources_of(kind: str) -> list[dict[str, Any]]:
    return [
        r.get("Properties") or {}
        for t in templates()
        for r in (t.get("Resources") or {}).values()
        if r.get("Type") == kind
        and (kind != "AWS::FSx::FileSystem" or r["Properties"].get("FileSystemType") == "LUSTRE")
    ]


NOT_IN_EXAMPLES = frozenset(
    {"InstanceGroups[].TrainingPlanArn", "InstanceGroups[].InstanceRequirements.InstanceTypes"}
    | {"InstanceGroups[].ImageReleaseVersion"}  # EKS only: a Slurm example cannot set it
    | {f"InstanceGroups[].AutoPatchConfig{m}" for m in ("", ".PatchingStrategy")}
    | {
        f"InstanceGroups[].{setting}.DeploymentConfig{m}"
        for setting in ("AutoPatchConfig", "ScheduledUpdateConfig")
        for m in (
            "",
            ".AutoRollbackConfiguration",
            ".WaitIntervalInSeconds",
            *(
                f".RollingUpdatePolicy.{size}{part}"
                for size in ("MaximumBatchSize", "RollbackMaximumBatchSize")
                for part in ("", ".Type", ".Value")
            ),
        )
    }
)
"""Members no example's template renders (no example sets a training plan, a flexible group, auto patching or a
scheduled update's deployment): the request test above maps them; an example that sets one must drop it here."""


def rendered_cluster_members() -> set[str]:
    return {leaf for props in resources_of(fm.CLUSTER_TYPE) for leaf in leaves(props)}


def known(member: str) -> bool:
    return any(f.api == member for f in fm.fields()) or member in CONSTANT


def test_every_rendered_cluster_property_has_a_field() -> None:
    rendered = rendered_cluster_members()
    assert len(rendered) > 40
    assert sorted(m for m in rendered if not known(m)) == []


def test_every_fields_cluster_member_is_rendered_by_an_example() -> None:
    rendered = rendered_cluster_members()
    members = {f.api for f in fm.fields() if f.api and f.cfn is None}
    covered = {m for m in members if any(r == m or r.startswith((m + ".", m + "[")) for r in rendered)}
    assert sorted(members - covered) == sorted(NOT_IN_EXAMPLES)


def test_every_lustre_property_is_a_field_or_the_constructs() -> None:
    rendered = {leaf for props in resources_of("AWS::FSx::FileSystem") for leaf in leaves(props, sep="/")}
    by_field = {
        f.cfn_property[1] for f in fm.fields() if f.cfn_property and f.cfn_property[0] == "AWS::FSx::FileSystem"
    }
    assert sorted(rendered - by_field - FSX_BY_CONSTRUCTION) == []
    # no example sets the organization's key or metadata IOPS
    assert sorted(by_field - rendered) == ["KmsKeyId", "LustreConfiguration/MetadataConfiguration/Iops"]


@pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_member_of_a_configs_request_maps_to_a_field(example: Path) -> None:
    config = parse_model(load_file(example), str(example))
    view = ClusterView.of_config(config, region="us-west-2")
    request = cluster_request(view)
    for member in leaves(request, indexed=True):
        normalized = re.sub(r"\[\d+\]", "[]", member)
        assert known(normalized), member
        assert config_field(view, member) != member, member


def test_a_member_maps_to_its_group_and_field() -> None:
    config = parse_model(load_file(ROOT / "examples" / "gpu-cluster.yaml"))
    view = ClusterView.of_config(config)
    assert config_field(view, "InstanceGroups[2].ThreadsPerCore") == "instance_groups[2].threads_per_core"
    assert (
        config_field(view, "InstanceGroups[1].InstanceStorageConfigs[0].EbsVolumeConfig.VolumeSizeInGB")
        == "instance_groups[1].ebs_volume_gib"
    )
    assert config_field(view, "InstanceGroups[1].LifeCycleConfig.OnCreate") == "instance_groups[1]"
    assert config_field(view, "NoSuchMember") == "NoSuchMember"


def test_the_readers_derive_from_the_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line's plan flag and member are what plan reads back and what a member maps to."""
    from hyperpod_cdk.deployed import config as deployed

    assert "instance_groups[].image_id" in deployed.COMPARED
    assert deployed.GROUP_FIELDS["ImageId"] == "image_id"
    assert ("LustreConfiguration", "EfaEnabled") in deployed.LUSTRE_FIELDS
    assert ("ImageId", "image_id") in fm.plain_group_members()


def test_classes_are_known_and_each_is_used() -> None:
    for f in fm.fields():
        for name in f.classes:
            assert name.startswith("arn:") or name in fm.CLASSES, (f.path, name)
    for name in ("arn:", "endpoint", "az", "volume-key", "counted"):
        assert fm.of_class(name), name
    assert {f.path for f in fm.of_class("volume-key")} >= {
        "instance_groups[].volume_kms_key_arn",
        "organization.kms_key_arn",
    }


def test_each_line_names_a_known_key() -> None:
    policy_keys = {"kind", "row", "cfn", "rule", "update_api", "member", "why", "todo", "silent", "source", "quote"}
    policy_keys |= {"checked"}
    for path, entry in fm.declarations().items():
        if isinstance(entry, dict):
            assert set(entry) <= policy_keys | fm.MAP_KEYS, path


def test_a_new_member_is_the_model_field_its_map_line_and_its_support_row() -> None:
    """instance_groups[].image_release_version (ImageReleaseVersion, botocore 1.44.8) came in through model.py,
    data/fields.yaml and data/api_support.yaml alone: the construct renders it, the request carries it, the API
    model's table holds it, and its rule (registered from the row) refuses it on a Slurm cluster."""
    from hyperpod_cdk.aws_data.api_constraints import table
    from hyperpod_cdk.constructs.group_api import group_api_properties
    from hyperpod_cdk.model import InstanceGroup

    group = InstanceGroup(name="w", count=1, instance_type="ml.c5.xlarge", image_release_version="1.2.3")
    assert group_api_properties(group)["image_release_version"] == "1.2.3"
    raw = load_file(ROOT / "examples" / "cpu-cluster.yaml")
    raw["instance_groups"][1]["image_release_version"] = "1.2.3"
    config = parse_model(raw)
    assert cluster_request(ClusterView.of_config(config))["InstanceGroups"][1]["ImageReleaseVersion"] == "1.2.3"
    assert "ImageReleaseVersion" in table()["shapes"]["ClusterInstanceGroupSpecification"]["members"]
    found = [p for p in config.problems() if p.rule == "GRP-IMAGE-RELEASE-VERSION"]
    assert [(p.path, p.level) for p in found] == [("instance_groups[1].image_release_version", "error")]
    assert "Supported only for EKS" in str(found[0])
    raw["instance_groups"][1].pop("image_release_version")
    assert not [p for p in parse_model(raw).problems() if p.rule == "GRP-IMAGE-RELEASE-VERSION"]


def test_a_silent_policy_names_the_pages_read_that_say_nothing() -> None:
    """ "AWS silent" is a claim about pages: each such line names inventory pages read end to end (not partial)."""
    from hyperpod_cdk.aws_data.inventory import pages

    read = {p.url.rsplit("/", 1)[-1].removesuffix(".html"): p for p in pages()}
    silent = {path: e for path, e in fm.declarations().items() if isinstance(e, dict) and "silent" in e}
    assert len(silent) >= 3
    for path, entry in silent.items():
        assert entry.get("checked"), f"{path}: name the pages read (checked)"
        for slug in entry["checked"]:
            assert slug in read and not read[slug].partial, (path, slug)
