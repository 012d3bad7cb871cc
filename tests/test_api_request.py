"""The CreateCluster request ``validate`` checks (:func:`hyperpod_cdk.core.api_request.cluster_request`) is the one the
stack sends: for every example, equal to the cluster's properties in its synthesized template (the committed
snapshots, which tests/test_snapshots.py keeps current), member by member, and so for examples synthesized with an
organization section and a budget (the prefixed name, the merged tags, the organization's volume key); it carries
every member the API model requires; and every member the templates emit is in the constraint table, so none goes
unchecked. API-MODEL reports what the merged values and the UpdateCluster a change produces break at the field that
set them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from hyperpod_cdk import TrainingClusterStack
from hyperpod_cdk.aws_data.api_constraints import table
from hyperpod_cdk.core.api_request import cluster_request, is_unknown, update_request
from hyperpod_cdk.core.config import ClusterConfig, load_file, parse_model
from hyperpod_cdk.core.merged_values import COST_TAG_KEY, cdk_tag_order
from hyperpod_cdk.rules.api_model import api_model
from hyperpod_cdk.rules.view import ClusterView
from support import ROOT, fast_app

EXAMPLES = sorted(
    (path, snapshot)
    for path in (ROOT / "examples").glob("*.yaml")
    for snapshot in (ROOT / "tests" / "snapshots").glob(f"{path.stem}.*.json")
    if "Resources" in json.loads(snapshot.read_text())
)


def _intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and any(k == "Ref" or k.startswith("Fn::") for k in value)


def _differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    if is_unknown(ours) or _intrinsic(theirs):
        return []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if set(ours) != set(theirs):
            return [f"{path}: members {sorted(ours)} != {sorted(theirs)}"]
        return [d for k in ours for d in _differences(ours[k], theirs[k], f"{path}.{k}")]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [
            d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in _differences(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path}: {ours!r} != {theirs!r}"]


def _cluster(snapshot: Path) -> dict[str, Any]:
    resources = json.loads(snapshot.read_text())["Resources"].values()
    (properties,) = [r["Properties"] for r in resources if r["Type"] == "AWS::SageMaker::Cluster"]
    return dict(properties)


def _request(path: Path) -> dict[str, Any]:
    return cluster_request(ClusterView.of_config(parse_model(load_file(path))))


@pytest.mark.parametrize(("example", "snapshot"), EXAMPLES, ids=[e.stem for e, _ in EXAMPLES])
def test_the_request_is_the_rendered_clusters_properties(example: Path, snapshot: Path) -> None:
    assert _differences(_request(example), _cluster(snapshot)) == []


def _missing_required(shape_name: str, value: Any, path: str) -> list[str]:
    shape = table()["shapes"][shape_name]
    if shape["type"] == "list" and isinstance(value, list):
        return [m for i, v in enumerate(value) for m in _missing_required(shape["member"], v, f"{path}[{i}]")]
    if shape["type"] != "structure" or not isinstance(value, dict):
        return []
    missing = [f"{path}.{m}" for m in shape["required"] if m not in value]
    for member, child in shape["members"].items():
        if member in value:
            missing += _missing_required(child, value[member], f"{path}.{member}")
    return missing


@pytest.mark.parametrize(("example", "snapshot"), EXAMPLES, ids=[e.stem for e, _ in EXAMPLES])
def test_every_required_member_is_rendered_and_every_rendered_member_is_checked(example: Path, snapshot: Path) -> None:
    assert _missing_required("CreateClusterRequest", _request(example), "") == []

    def unchecked(shape_name: str, value: Any, path: str) -> list[str]:
        shape = table()["shapes"][shape_name]
        if _intrinsic(value):
            return []
        if shape["type"] == "list" and isinstance(value, list):
            return [u for i, v in enumerate(value) for u in unchecked(shape["member"], v, f"{path}[{i}]")]
        if shape["type"] != "structure" or not isinstance(value, dict):
            return []
        found = [f"{path}.{m}" for m in value if m not in shape["members"]]
        return found + [
            u
            for m, v in value.items()
            if m in shape["members"]
            for u in unchecked(shape["members"][m], v, f"{path}.{m}")
        ]

    assert unchecked("CreateClusterRequest", _cluster(snapshot), "") == []


def test_every_example_has_a_snapshot_to_hold_its_request_against() -> None:
    assert {e.stem for e, _ in EXAMPLES} == {p.stem for p in (ROOT / "examples").glob("*.yaml")}


# What the stack merges in: the organization's prefix, tags and volume key, and the cost tag.

KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ORGANIZATION = {
    "name_prefix": "team-a-",
    "required_tags": {"CostCenter": "1234", "team": "platform"},  # the examples' own `team` tag wins
    "kms_key_arn": KEY,
}
MERGED_EXAMPLES = ("spot-research-cluster", "gpu-cluster", "continuous-cluster")
"""Continuous with the organization's key on every node volume (a file system's config before the root volume's),
not continuous (AWS's key), and continuous with the groups' own keys (the organization's, as it must be)."""


def _with_organization(name: str) -> ClusterConfig:
    raw = load_file(ROOT / "examples" / f"{name}.yaml")
    priced = {"per_hour": 1.0, "source": "test"}
    types = {g["instance_type"] for g in raw["instance_groups"]}
    cost = {"prices": dict.fromkeys(types, priced), "aws_budget": {"monthly": 1000}}
    groups = [  # a group's own key is the organization's (ORG-VOLUME-KEY)
        {**g, "volume_kms_key_arn": KEY} if g.get("volume_kms_key_arn") else g for g in raw["instance_groups"]
    ]
    return parse_model({**raw, "instance_groups": groups, "organization": ORGANIZATION, "cost": cost})


@pytest.mark.parametrize("name", MERGED_EXAMPLES)
def test_the_request_has_what_the_stack_merges_in_as_synthesized(name: str) -> None:
    """The request validate checks, of a config with an organization section and a budget, is the synthesized
    cluster's properties: the prefixed name, the merged tags (the cost tag too) and the organization's volume key."""
    config = _with_organization(name)
    app = fast_app()
    stack = TrainingClusterStack(app, "org", config=config)
    template = app.synth().get_stack_artifact(stack.artifact_id).template
    (properties,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    request = _request_of(config)
    assert _differences(request, properties) == []
    assert request["ClusterName"] == f"team-a-{config.cluster_name}"
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    assert tags == {**ORGANIZATION["required_tags"], **config.tags, COST_TAG_KEY: request["ClusterName"]}
    configs = [c for g in request["InstanceGroups"] for c in g.get("InstanceStorageConfigs", [])]
    volumes = [c["EbsVolumeConfig"] for c in configs if "EbsVolumeConfig" in c]
    roots = sum(1 for v in volumes if v.get("RootVolume"))
    if config.node_provisioning_mode:  # every node volume under the key, a root volume's in each group
        assert {v.get("VolumeKmsKeyId") for v in volumes} == {KEY} and roots == len(config.instance_groups)
    else:
        assert all("VolumeKmsKeyId" not in v for v in volumes) and roots == 0


def test_the_tags_are_in_the_order_cdk_renders_them() -> None:
    keys = ["CostCenter", "cost-center", "team", "Team", COST_TAG_KEY, "a b", "a_b", "a-b", "a:b", "a.b", "a@b"]
    keys += ["a/b", "a+b", "a=b", "a1", "aB", "ab", "Ab", "\u00e9", "e", "f", "Z", "z", "10", "9", "a", "A"]
    manager = cdk.TagManager(cdk.TagType.KEY_VALUE, "AWS::SageMaker::Cluster")
    for key in keys:
        manager.set_tag(key, "v")
    rendered = [t["key"] if "key" in t else t["Key"] for t in manager.render_tags()]
    assert sorted(keys, key=cdk_tag_order) == rendered


def _request_of(config: ClusterConfig, previous: ClusterConfig | None = None) -> dict[str, Any]:
    return cluster_request(ClusterView.of_config(config, previous=previous))


def _api_model(config: ClusterConfig, previous: ClusterConfig | None = None) -> list[tuple[str, str]]:
    return [(p.path, p.expected) for p in api_model(ClusterView.of_config(config, previous=previous))]


BASE = load_file(ROOT / "examples" / "cpu-cluster.yaml")


def _config(**changes: Any) -> ClusterConfig:
    return parse_model({**BASE, **changes})


def test_the_prefixed_name_is_checked_and_reported_once() -> None:
    prefix = "team-abcdefghijklmn-"  # 20 characters: a name of 43 fits HyperPod's 63
    assert _api_model(_config(cluster_name="a" * 43, organization={"name_prefix": prefix})) == []
    config = _config(cluster_name="a" * 44, organization={"name_prefix": prefix})
    found = _api_model(config)
    assert found and {path for path, _ in found} == {"cluster_name"}  # the name is what its owner shortens
    assert "ClusterName: allowed: length less than or equal to 63" in found[0][1]
    # validate says it once: ORG-PREFIXED-NAME, whose words are clearer, at the same field (API-MODEL backs it up)
    assert [(p.rule, p.path) for p in config.problems() if p.level == "error"] == [
        ("ORG-PREFIXED-NAME", "cluster_name")
    ]
    # a prefix whose own form breaks the name: the prefix
    found = _api_model(_config(organization={"name_prefix": "Team_A-"}))
    assert found and {path for path, _ in found} == {"organization.name_prefix"}
    assert "ClusterName: allowed: regular expression pattern" in found[0][1]


def test_merged_tags_over_the_limit_are_refused_at_the_organizations_tags() -> None:
    own = {f"t{i}": "v" for i in range(45)}
    organization = {"required_tags": {f"o{i}": "v" for i in range(5)}}
    assert _api_model(_config(tags=own, organization=organization)) == []  # 50: TagList's maximum
    organization = {"required_tags": {f"o{i}": "v" for i in range(6)}}
    config = _config(tags=own, organization=organization)
    ((path, message),) = _api_model(config)
    assert path == "organization.required_tags" and "Tags: allowed: length less than or equal to 50" in message
    errors = [(p.rule, p.path) for p in config.problems() if p.level == "error"]
    assert errors == [("API-MODEL", "organization.required_tags")]  # no other rule counts the merged tags
    # a key both set is one tag (the file's value wins)
    organization = {"required_tags": {**{f"o{i}": "v" for i in range(5)}, "t0": "org"}}
    assert _api_model(_config(tags=own, organization=organization)) == []
    # with a budget, the cost tag is the 51st: the budget's
    budget = {"prices": {"ml.m5.xlarge": {"per_hour": 1.0, "source": "t"}}, "aws_budget": {"monthly": 10}}
    organization = {"required_tags": {f"o{i}": "v" for i in range(5)}}
    ((path, _),) = _api_model(_config(tags=own, organization=organization, cost=budget))
    assert path == "cost.aws_budget"


def test_a_merged_tag_the_api_refuses_is_reported_at_the_field_that_set_it() -> None:
    ((path, message),) = _api_model(_config(organization={"required_tags": {"cost center!": "1"}}))
    assert path == "organization.required_tags.cost center!" and "Tags[0].Key" in message
    ((path, _),) = _api_model(_config(tags={"b!": "1"}, organization={"required_tags": {"a": "1", "b!": "org"}}))
    assert path == "tags.b!"  # the file's tags set the value sent


def test_the_organizations_volume_key_is_sent_and_checked_on_continuous_clusters_only() -> None:
    bad = KEY + " "  # the API's KmsKeyId pattern has no space
    continuous = _config(node_provisioning_mode="continuous", organization={"kms_key_arn": bad})
    found = {path for path, _ in _api_model(continuous)}
    assert found == {"organization.kms_key_arn"}
    assert _api_model(_config(organization={"kms_key_arn": bad})) == []  # not sent: AWS's key there
    good = _config(node_provisioning_mode="continuous", organization={"kms_key_arn": KEY})
    assert _api_model(good) == []
    root = {"EbsVolumeConfig": {"RootVolume": True, "VolumeKmsKeyId": KEY}}
    assert all(root in g["InstanceStorageConfigs"] for g in _request_of(good)["InstanceGroups"])


def _groups(count: int) -> list[dict[str, Any]]:
    return [dict(BASE["instance_groups"][-1], name=f"old{i}") for i in range(count)]


def test_the_update_a_change_produces_is_checked_against_update_cluster() -> None:
    new = _config()
    previous = _config(instance_groups=[*BASE["instance_groups"], *_groups(2)])
    update = update_request(ClusterView.of_config(new, previous=previous))
    assert update is not None
    assert update["InstanceGroupsToDelete"] == ["old0", "old1"]
    assert update["ClusterName"] == new.cluster_name
    assert [g["InstanceGroupName"] for g in update["InstanceGroups"]] == [g["name"] for g in BASE["instance_groups"]]
    assert "Tags" not in update and "VpcConfig" not in update  # not UpdateCluster's: AddTags; a new cluster
    previous = _config(instance_groups=[*BASE["instance_groups"], *_groups(100)])
    assert _api_model(new, previous) == []
    previous = _config(instance_groups=[*BASE["instance_groups"], *_groups(101)])
    ((path, message),) = _api_model(new, previous)
    assert path == "instance_groups" and "UpdateCluster's InstanceGroupsToDelete" in message
    assert "length less than or equal to 100" in message
    assert ("API-MODEL", "instance_groups") in [(p.rule, p.path) for p in new.problems(previous=previous)]
    # a new name replaces the cluster: CloudFormation creates it, no UpdateCluster
    renamed = _config(organization={"name_prefix": "team-a-"})
    assert update_request(ClusterView.of_config(renamed, previous=previous)) is None
    assert update_request(ClusterView.of_config(new)) is None
