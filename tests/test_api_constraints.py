"""The SageMaker API model's constraint table (``data/api_constraints.json``): current with the pinned botocore and
cfn-lint, and applied alike by ``validate`` (rule API-MODEL), the cfn-lint rule E9200 and the emulated control plane,
for each kind of constraint: required members, enums, ranges, lengths and patterns."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_cdk.aws_data.api_constraints import TABLE, check_request, table, validation_message
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.rules.api_model import api_model, disagreement_reference
from hyperpod_cdk.rules.view import ClusterView
from support import cfn_lint
from test_control_plane import Harness, make
from test_docs import _script

ROLE = "arn:aws:iam::111122223333:role/hyperpod"
GROUPS = [
    {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
    {"name": "workers", "instance_type": "ml.c5.xlarge", "count": 2},
]


def _generator() -> Any:
    return _script("gen_api_constraints")


def test_the_table_is_current_with_the_pinned_botocore_and_cfn_lint() -> None:
    assert TABLE.read_text() == _generator().render(_generator().build()), "run scripts/gen_api_constraints.py"


def test_a_newer_model_that_changes_an_emitted_shape_fails_the_currency_check(monkeypatch: pytest.MonkeyPatch) -> None:
    generator = _generator()
    model, version = generator.botocore_model()
    changed = copy.deepcopy(model)
    changed["shapes"]["ClusterInstanceGroupName"]["max"] = 40
    monkeypatch.setattr(generator, "botocore_model", lambda: (changed, version))
    assert generator.render(generator.build()) != TABLE.read_text()
    assert generator.main(["--check"]) == 1


def test_the_table_names_its_source_and_reaches_every_emitted_shape() -> None:
    meta = table()
    assert meta["source"] == f"botocore {meta['botocore']} service-2.json"
    for name, shape in meta["shapes"].items():
        for child in [*shape.get("members", {}).values(), shape.get("member")]:
            assert child is None or child in meta["shapes"], (name, child)
    group = meta["shapes"]["ClusterInstanceGroupName"]
    assert (group["min"], group["max"], group["pattern"]) == (1, 63, "[a-zA-Z0-9](-*[a-zA-Z0-9])*")


def test_rules_md_shows_every_disagreement() -> None:
    text = disagreement_reference()
    for row in table()["disagreements"]:
        assert f"| `{row['path']}` | {row['facet']} |" in text
    assert "`MultiNodeTrainingValidation`" in text  # the API's enum value the schema lacks: the schema's wins


# --- each kind of constraint: a request (the template's properties) that breaks it, and its words ----------------


def _request() -> dict[str, Any]:
    """A CreateCluster request (and AWS::SageMaker::Cluster's properties) that keeps every constraint."""
    return {
        "ClusterName": "api-model",
        "InstanceGroups": [
            {
                "InstanceGroupName": "controller",
                "InstanceType": "ml.m5.xlarge",
                "InstanceCount": 1,
                "ExecutionRole": ROLE,
                "LifeCycleConfig": {"SourceS3Uri": "s3://bucket/lifecycle/", "OnInitComplete": "on_init.sh"},
                "SlurmConfig": {"NodeType": "Controller"},
            }
        ],
        "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
        "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}},
    }


def _group(request: dict[str, Any]) -> dict[str, Any]:
    group: dict[str, Any] = request["InstanceGroups"][0]
    return group


BREAKS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "required": (
        lambda r: _group(r).pop("ExecutionRole"),
        "Value null at 'instanceGroups.1.member.executionRole' failed to satisfy constraint: Member must not be null",
    ),
    "enum": (
        lambda r: _group(r)["SlurmConfig"].update(NodeType="Worker"),
        "Value 'Worker' at 'instanceGroups.1.member.slurmConfig.nodeType' failed to satisfy constraint: Member must "
        "satisfy enum value set: [Controller, Login, Compute]",
    ),
    "range": (
        lambda r: _group(r).update(ThreadsPerCore=3),
        "Value '3' at 'instanceGroups.1.member.threadsPerCore' failed to satisfy constraint: Member must have value "
        "less than or equal to 2",
    ),
    "length": (
        lambda r: _group(r).update(InstanceGroupName="g" * 64),
        f"Value '{'g' * 64}' at 'instanceGroups.1.member.instanceGroupName' failed to satisfy constraint: Member must "
        "have length less than or equal to 63",
    ),
    "pattern": (
        lambda r: _group(r).update(InstanceGroupName="bad_name"),
        "Value 'bad_name' at 'instanceGroups.1.member.instanceGroupName' failed to satisfy constraint: Member must "
        "satisfy regular expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9])*",
    ),
}
"""Each kind: how a request breaks it, and the API's ValidationException for it."""


def _broken(kind: str) -> dict[str, Any]:
    request = _request()
    BREAKS[kind][0](request)
    return request


def test_the_request_that_keeps_every_constraint_passes_the_checker() -> None:
    assert check_request(_request()) == []
    assert check_request(_request(), cloudformation=False) == []


@pytest.mark.parametrize("kind", BREAKS)
def test_the_checker_words_each_kind_as_the_api_does(kind: str) -> None:
    assert validation_message(check_request(_broken(kind), cloudformation=False)) == (
        f"1 validation error detected: {BREAKS[kind][1]}"
    )


def _template(properties: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": {"Cluster": {"Type": "AWS::SageMaker::Cluster", "Properties": properties}}}


def _e9200(properties: dict[str, Any]) -> list[str]:
    return [f for f in cfn_lint(_template(properties)) if f.startswith("E9200 ")]


def test_cfn_lint_passes_the_template_that_keeps_every_constraint_and_skips_what_it_cannot_know() -> None:
    assert _e9200(_request()) == []
    unknown = _request()
    _group(unknown)["InstanceGroupName"] = {"Ref": "GroupName"}  # a parameter's value is not known before deploy
    del unknown["ClusterName"]  # CloudFormation generates a name
    assert _e9200(unknown) == []


@pytest.mark.parametrize("kind", BREAKS)
def test_cfn_lint_refuses_each_kind(kind: str) -> None:
    found = _e9200(_broken(kind))
    assert len(found) == 1, found
    assert "(Resources/Cluster/Properties/InstanceGroups/0/" in found[0]


def test_cfn_lint_applies_the_schemas_stricter_enum() -> None:
    request = _request()
    _group(request)["OnStartDeepHealthChecks"] = ["MultiNodeTrainingValidation"]
    assert check_request(request, cloudformation=False) == []  # the API model has the value
    (found,) = _e9200(request)
    assert "allowed: enum value set: [InstanceStress, InstanceConnectivity]" in found and "cfn-lint" in found


cp = pytest.fixture(make())


def _api_error(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(ClientError) as error:
        call()
    return str(error.value.response["Error"]["Code"]), str(error.value.response["Error"]["Message"])


@pytest.mark.parametrize("kind", BREAKS)
def test_the_emulated_control_plane_answers_each_kind_as_the_api_does(cp: Harness, kind: str) -> None:
    client = cp.client(parameter_validation=False)  # botocore checks little itself; the service checks the rest
    assert _api_error(lambda: client.create_cluster(**_broken(kind))) == (
        "ValidationException",
        f"1 validation error detected: {BREAKS[kind][1]}",
    )


def test_the_emulated_control_plane_checks_update_cluster_and_passes_a_valid_request(cp: Harness) -> None:
    client = cp.client(parameter_validation=False)
    assert _api_error(lambda: client.create_cluster(**_request()))[0] == "ResourceLimitExceeded"  # valid: one cluster
    api_only = _request()  # the API model has this value; only CloudFormation's schema lacks it
    _group(api_only)["OnStartDeepHealthChecks"] = ["MultiNodeTrainingValidation"]
    assert _api_error(lambda: client.create_cluster(**api_only))[0] == "ResourceLimitExceeded"
    assert (
        _api_error(lambda: client.create_cluster(**{**_request(), "ClusterName": "ml-cluster"}))[0] == "ResourceInUse"
    )
    groups = [{"InstanceGroupName": "gpu", "InstanceCount": 7000, "ExecutionRole": ROLE}]
    code, message = _api_error(lambda: client.update_cluster(ClusterName="ml-cluster", InstanceGroups=groups))
    assert code == "ValidationException"
    assert message == (
        "1 validation error detected: Value '7000' at 'instanceGroups.1.member.instanceCount' failed to satisfy "
        "constraint: Member must have value less than or equal to 6758"
    )


# --- validate: configs that break each kind --------------------------------------------------------------------

CONFIGS = {
    "enum": (
        {"instance_groups": [GROUPS[0], {**GROUPS[1], "instance_type": "ml.p3.16xlarge"}]},
        "values of the model's enum",
    ),
    "range": ({"instance_groups": [GROUPS[0], {**GROUPS[1], "count": 7000}]}, "value less than or equal to 6758"),
    "length": ({"tags": {"team": "v" * 257}}, "length less than or equal to 256"),
    "pattern": ({"tags": {"team!": "a"}}, "regular expression pattern"),
}
"""A config breaking each kind the config can reach (required members are written by the renderer whatever the
config says: test_api_request.py holds every example's request against the table's required members)."""


@pytest.mark.parametrize("kind", CONFIGS)
def test_validate_refuses_each_kind_and_api_model_alone_finds_it(kind: str) -> None:
    data, words = CONFIGS[kind]
    config = parse_model(data)
    errors = [p for p in config.problems() if p.level == "error"]
    assert errors, kind
    # A more specific rule may have said it first (API-MODEL then backs it up silently); alone, it finds it too.
    own = list(api_model(ClusterView.of_config(config)))
    assert any(words in str(p) for p in own), [str(p) for p in own]
    assert {p.path for p in own} <= {p.path for p in errors}


def test_validate_reports_every_violation_at_once_with_its_config_field() -> None:
    config = parse_model({"tags": {"a!": "x", "b!": "y"}, "instance_groups": GROUPS})
    found = [p for p in config.problems() if p.rule == "API-MODEL"]
    assert [p.path for p in found] == ["tags.a!", "tags.b!"]
    assert "botocore" in str(found[0]) and "shape TagKey" in str(found[0]) and json.dumps(found[0].got) == '"a!"'
