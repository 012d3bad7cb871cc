"""Update policies (hyperpod_cdk.aws_data.update_policy, data/fields.yaml, rules UPD-*): every config
field has one,
each that is not in-place cites AWS, ``changes`` pairs groups by name, and ``validate --previous`` reports each kind
on a real field. The inventory rows' own breaks/passes run in tests/test_aws_inventory.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.aws_data import update_policy as up
from hyperpod_cdk.aws_data.inventory import POLICY_LEVELS
from hyperpod_cdk.aws_data.inventory import row as inventory_row
from hyperpod_cdk.aws_data.inventory_checks import apply_patch
from hyperpod_cdk.aws_data.update_policy import Kind
from hyperpod_cdk.core.config import json_schema, load_file, parse_model
from hyperpod_cdk.rules import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
KIND_OF_ROW_POLICY = {
    "immutable": Kind.REFUSED,
    "irreversible": Kind.IRREVERSIBLE,
    "new-nodes-only": Kind.NEW_NODES_ONLY,
    "replaces-root-volume": Kind.REPLACES_ROOT_VOLUMES,
    "replaces-cluster": Kind.REPLACES_RESOURCE,
}


def _schema_paths() -> list[str]:
    """Every field of the JSON Schema by its schema path, in order."""
    return list(dict.fromkeys(path for path, _ in up.schema_fields(json_schema())))


def test_every_field_has_a_policy_and_every_line_a_field() -> None:
    fields, declared = _schema_paths(), list(up.declarations())
    assert [f for f in fields if f not in declared] == [], "add a line to src/hyperpod_cdk/data/fields.yaml"
    assert [d for d in declared if d not in fields] == [], "a line names no field of the schema"
    assert len(fields) > 200


def test_every_policy_that_is_not_in_place_cites_aws() -> None:
    for path in up.declarations():
        policy = up.policy_for(path)
        if policy.kind is Kind.IN_PLACE and policy.row is not None:
            # AWS documents the change as made in place: the row is its permission ("You can ...")
            assert inventory_row(policy.row).word == "can" and (policy.source or "").startswith("https://docs.aws"), (
                path
            )
        elif policy.kind is Kind.IN_PLACE:
            assert policy.source is None and policy.quote is None and policy.row is None, path
        else:
            assert (policy.source or "").startswith("https://docs.aws.amazon.com/"), path
            assert policy.quote and policy.why and policy.todo, path


def test_every_kind_has_a_field() -> None:
    assert {up.policy_for(p).kind for p in up.declarations()} == set(Kind)


def test_a_replacement_cites_a_create_only_property_of_cfn_lints_schema() -> None:
    from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

    cited = [
        e["cfn"]
        for e in up.declarations().values()
        if isinstance(e, dict) and "cfn" in e and e["kind"] == "replaces-resource"
    ]
    assert len(cited) >= 5
    for reference in cited:
        resource, _, prop = reference.partition("/properties/")
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource).schema
        assert "/properties/" + prop in schema["createOnlyProperties"], reference


def test_a_field_the_update_api_lacks_is_checked_against_botocores_model() -> None:
    """FSx's UpdateFileSystem cannot change a Lustre file system's deployment type or EFA (the members are in the
    create shape and not in the update shape of botocore's model); a change is refused, naming the shape."""
    import botocore.loaders

    cited = {p: e for p, e in up.declarations().items() if isinstance(e, dict) and "update_api" in e}
    assert {"storage.deployment_type", "storage.efa_enabled", "storage_openzfs.deployment_type"} <= set(cited)
    loader = botocore.loaders.create_loader()
    for path, entry in cited.items():
        service, shape, member = up.update_api_citation(entry)
        shapes = loader.load_service_model(service, "service-2")["shapes"]
        assert member not in shapes[shape]["members"], path
        assert member in shapes[shape.replace("Update", "Create", 1)]["members"], path
        policy = up.policy_for(path)
        assert policy.kind is Kind.REFUSED and policy.source and shape in policy.source and member in str(policy.quote)
    before = parse_model({"storage": {"deployment_type": "PERSISTENT_2"}})
    after = parse_model({"storage": {"deployment_type": "PERSISTENT_1"}})
    (change,) = [c for c in up.changes(before, after) if c.path == "storage.deployment_type"]
    assert change.blocks


def test_every_update_policy_row_is_named_on_its_fields_lines() -> None:
    for row in up.update_policies():
        for field in up.expand(row.field or ""):
            entry = up.declarations()[field.replace("[*]", "[]")]
            assert isinstance(entry, dict) and "row" in entry, f"{field}: name the row {row.id}"
            assert Kind(entry["kind"]) is KIND_OF_ROW_POLICY[row.policy or ""], field


def test_policy_for_takes_concrete_and_free_form_paths() -> None:
    assert up.policy_for("instance_groups[3].capacity").row == "spot-capacity-immutable"
    assert up.policy_for("instance_groups[3].count").kind is Kind.IN_PLACE
    assert up.policy_for("cost.prices.ml.p5.48xlarge").kind is Kind.IN_PLACE
    assert up.policy_for("runtime.accounting.database.host").kind is Kind.IRREVERSIBLE
    with pytest.raises(KeyError, match="nowhere: no update policy"):
        up.policy_for("nowhere")


def test_the_schema_shows_each_fields_policy() -> None:
    schema = json_schema()
    group = schema["$defs"]["InstanceGroup"]["properties"]
    assert group["capacity"]["x-update-policy"] == "refused" and group["count"]["x-update-policy"] == "in-place"
    assert schema["properties"]["fsx_mount_path"]["x-update-policy"] == "new-nodes-only"
    committed = json.loads((ROOT / "schema" / "cluster-config.schema.json").read_text())
    assert committed == json.loads(json.dumps(schema)), "run `hyperpod-cdk schema > schema/cluster-config.schema.json`"


def _configs(previous: dict[str, Any], new: dict[str, Any], base: str = "gpu-cluster.yaml") -> Any:
    data = load_file(ROOT / "examples" / base)
    return parse_model(apply_patch(data, new), "new"), parse_model(apply_patch(data, previous), "old")


def _found(config: Any, previous: Any, rule: str) -> list[Any]:
    return [p for p in config.problems(previous=previous) if p.rule == rule]


def _updates(config: Any, previous: Any) -> list[Any]:
    return [p for p in config.problems(previous=previous) if (p.rule or "").startswith("UPD-")]


def test_groups_pair_by_name() -> None:
    moved = {
        "instance_groups.0": None,
        "instance_groups.2": {"name": "p5b", "role": "compute", "instance_type": "ml.p5e.48xlarge", "count": 1},
    }
    config, previous = _configs({}, moved)  # the controller gone, p5 now at index 1, a new group p5b
    found = {(c.path, c.before is None, c.after is None) for c in up.changes(previous, config)}
    assert found == {("instance_groups[0]", False, True), ("instance_groups[2]", True, False)}
    assert _updates(config, previous) == []
    same, deployed = _configs({}, {})
    assert up.changes(deployed, same) == []


def test_refused_is_an_error_naming_field_values_quote_and_fix() -> None:
    config, previous = _configs({}, {"instance_groups.2.capacity": "spot"})
    (problem,) = _found(config, previous, "UPD-REFUSED")
    assert problem.level == "error" and problem.path == "instance_groups[2].capacity"
    text = str(problem)
    assert "changed from unset" in text and "spot" in text
    assert "CapacityRequirements cannot be modified once an Instance Group is created." in text
    assert "sagemaker-hyperpod-spot.html" in text and "add a new instance group" in (problem.fix or "")
    (change,) = up.changes(previous, config)
    assert change.blocks and change.policy.row == "spot-capacity-immutable"


def test_in_place_is_nothing() -> None:
    config, previous = _configs({}, {"instance_groups.2.count": 7, "node_recovery": "None"})
    assert _updates(config, previous) == []
    assert {c.policy.kind for c in up.changes(previous, config)} == {Kind.IN_PLACE}
    assert not any(c.blocks for c in up.changes(previous, config))


def test_new_instance_group_warns_that_aws_is_silent() -> None:
    config, previous = _configs({}, {"instance_groups.2.ebs_volume_gib": 2000})
    (problem,) = _found(config, previous, "UPD-NEW-INSTANCE-GROUP")
    assert problem.level == "warning" and "AWS does not document" in str(problem)
    assert "API_ClusterInstanceGroupSpecification" in str(problem)
    (change,) = up.changes(previous, config)
    assert change.blocks


@pytest.mark.parametrize(
    ("patch", "path", "words"),
    [
        ({"instance_groups.2.instance_type": "ml.p5e.48xlarge"}, "instance_type", "you must match the instance type"),
        ({"instance_groups.2.threads_per_core": 2}, "threads_per_core", "keep using the same value you specified"),
        # a move to a flexible group: the group had an instance type, which the new config no longer matches
        (
            {"instance_groups.2.instance_type": None, "instance_groups.2.instance_types": ["ml.p5.48xlarge"]},
            "instance_type",
            "you must match the instance type",
        ),
    ],
)
def test_an_existing_groups_type_and_threads_per_core_are_refused(patch: dict[str, Any], path: str, words: str) -> None:
    """AWS's Slurm CLI page: "To update an existing instance group, you must match the instance type you initially
    specified to the group"; for ThreadsPerCore "keep using the same value you specified during cluster creation"."""
    config, previous = _configs({}, patch)
    problems = _found(config, previous, "UPD-REFUSED")
    (problem,) = [p for p in problems if p.path == f"instance_groups[2].{path}"]
    assert problem.level == "error" and words in str(problem)
    assert "sagemaker-hyperpod-operate-slurm-cli-command.html" in str(problem)
    assert "add a new instance group" in (problem.fix or "")
    # a new group takes any type and any threads per core
    new_group = {"instance_groups.3": {"name": "p5e", "instance_type": "ml.p5e.48xlarge", "count": 1}}
    config, previous = _configs({}, {**new_group, "instance_groups.3.threads_per_core": 2})
    assert _found(config, previous, "UPD-REFUSED") == []


@pytest.mark.parametrize(
    ("patch", "rule", "path"),
    [
        ({"fsx_mount_path": "/lustre"}, "UPD-NEW-NODES-ONLY", "fsx_mount_path"),
        ({"runtime": {"slurm": {"requeue": False}}}, "UPD-NEW-NODES-ONLY", "runtime.slurm"),
        (
            {"instance_groups.2.image_id": "ami-0123456789abcdef0"},
            "UPD-REPLACES-ROOT-VOLUMES",
            "instance_groups[2].image_id",
        ),
    ],
)
def test_the_warning_kinds(patch: dict[str, Any], rule: str, path: str) -> None:
    config, previous = _configs({}, patch)
    (problem,) = _found(config, previous, rule)
    assert problem.level == "warning" and problem.path == path
    assert not any(c.blocks for c in up.changes(previous, config))


def test_replacing_a_file_system_is_an_error_and_another_resource_a_warning() -> None:
    key = {"organization": {"kms_key_arn": "arn:aws:kms:us-west-2:111122223333:key/abc"}}
    config, previous = _configs({}, key)
    (problem,) = _found(config, previous, "UPD-REPLACES-DATA")
    assert problem.level == "error" and problem.path == "organization.kms_key_arn"
    assert "AWS::FSx::FileSystem" in str(problem) and "KmsKeyId: Update requires: Replacement" in str(problem)
    assert [c.path for c in up.changes(previous, config) if c.blocks] == ["organization.kms_key_arn"]
    config, previous = _configs({"organization": {"name_prefix": "a"}}, {"organization": {"name_prefix": "b"}})
    (problem,) = _found(config, previous, "UPD-REPLACES")
    assert problem.level == "warning" and "aws-resource-sagemaker-cluster" in str(problem)


def test_an_association_is_left_to_its_own_rule() -> None:
    config, previous = _configs({}, {"storage.data_repositories.0.file_system_path": "/corpora"})
    (change,) = up.changes(previous, config)
    assert change.policy.kind is Kind.REPLACES_RESOURCE and not change.blocks
    assert "FileSystemPath: Update requires: Replacement" in (change.policy.quote or "")
    assert _updates(config, previous) == [] and _found(config, previous, "DRA-REPLACES")


def test_a_field_with_its_own_rule_is_reported_by_that_rule_alone() -> None:
    config, previous = _configs({}, {"cluster_name": "other"})
    assert _updates(config, previous) == [] and _found(config, previous, "CL-NAME-REPLACES")
    (change,) = up.changes(previous, config)
    assert change.policy.kind is Kind.REPLACES_RESOURCE and not change.blocks  # the cluster holds no data


def test_irreversible_may_be_set_but_not_left(monkeypatch: pytest.MonkeyPatch) -> None:
    db = {"runtime": {"accounting": {"database": {"host": "db.example.com"}}}}
    config, previous = _configs({}, db)
    assert [c.policy.kind for c in up.changes(previous, config)] == [Kind.IRREVERSIBLE]
    # every irreversible field names its own rule today (CL-ACCOUNTING-NO-REVERT ...): show UPD-IRREVERSIBLE on one
    monkeypatch.setattr(up, "dedicated_rule", lambda path: None)
    monkeypatch.setattr("hyperpod_cdk.rules.updates.dedicated_rule", lambda path: None)
    assert _found(config, previous, "UPD-IRREVERSIBLE") == []  # setting it is fine
    (problem,) = _found(previous, config, "UPD-IRREVERSIBLE")  # leaving it is not
    assert problem.level == "error" and "changed from" in str(problem)


def test_each_generic_rule_is_registered_at_its_level() -> None:
    levels = {r.id: r.level for r in REGISTRY.rules}
    assert set(up.GENERIC_RULES) <= set(levels)
    assert levels["UPD-REFUSED"] == POLICY_LEVELS["immutable"] == "error"
    assert levels["UPD-NEW-NODES-ONLY"] == POLICY_LEVELS["new-nodes-only"] == "warning"
    assert levels["UPD-IRREVERSIBLE"] == "error" and levels["UPD-REPLACES-DATA"] == "error"


@pytest.mark.parametrize(
    ("before", "after"),
    [(None, "plan-a"), ("plan-a", "plan-b"), ("plan-a", None)],
    ids=["added", "changed", "removed"],
)
def test_a_training_plan_is_added_changed_or_removed_in_place(before: str | None, after: str | None) -> None:
    """AWS: "You can add, update, or remove a training plan by updating the instance group of an existing cluster"."""

    def arn(name: str | None) -> str | None:
        return None if name is None else f"arn:aws:sagemaker:us-west-2:111122223333:training-plan/{name}"

    config, previous = _configs(
        {"instance_groups.2.training_plan_arn": arn(before)}, {"instance_groups.2.training_plan_arn": arn(after)}
    )
    assert _updates(config, previous) == []
    (change,) = up.changes(previous, config)
    assert change.policy.kind is Kind.IN_PLACE and not change.blocks
    assert change.policy.row == "tpup-add-update-remove" and "add, update, or remove" in (change.policy.quote or "")


def test_a_flexible_groups_types_change_in_place() -> None:
    flexible = {"instance_groups.2.instance_type": None, "instance_groups.2.instance_types": ["ml.p5.48xlarge"]}
    more = {**flexible, "instance_groups.2.instance_types": ["ml.p5.48xlarge", "ml.p5e.48xlarge"]}
    config, previous = _configs(flexible, more)
    assert _updates(config, previous) == []
    (change,) = up.changes(previous, config)
    assert change.policy.kind is Kind.IN_PLACE and change.policy.row == "eks-update-flexible-types"


def test_continuous_provisioning_turned_on_warns_and_turned_off_is_refused() -> None:
    config, previous = _configs({}, {"node_provisioning_mode": "continuous"})
    (on,) = _found(config, previous, "CL-PROVISIONING")
    assert on.level == "warning" and "in your CreateCluster request" in str(on)
    assert _found(config, previous, "UPD-IRREVERSIBLE") == []
    config, previous = _configs({}, {"node_provisioning_mode": None}, base="continuous-cluster.yaml")
    (off,) = _found(config, previous, "UPD-IRREVERSIBLE")
    assert off.level == "error" and off.path == "node_provisioning_mode" and "Valid Values: Continuous" in str(off)
    assert _found(config, previous, "CL-PROVISIONING") == []
