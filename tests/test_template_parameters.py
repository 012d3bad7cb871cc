"""A platform team's template: the launch choices become template parameters whose constraints reject what
the rules reject, whose values reach the resources, and which the console groups and labels.

The template is examples/platform-template.yaml's (its snapshot and cfn-lint run in tests/test_examples.py);
tests/cfn_parameters.py evaluates CloudFormation's constraints on a value.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cfn_parameters import rejections, resolved
from hyperpod_cdk import ConfigurationError, TrainingClusterStack, parse_config
from hyperpod_cdk.core.config import load_file, parse_model
from hyperpod_cdk.core.template_parameters import template_parameters
from hyperpod_cdk.rules.repositories import bucket_name_problem
from support import ROOT, fast_app, uploaded_files

EXAMPLE = ROOT / "examples" / "platform-template.yaml"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The example's template and the parameters file its lifecycle upload carries."""
    outdir = tmp_path_factory.mktemp("platform")
    app = fast_app(outdir=str(outdir))
    stack = TrainingClusterStack(app, "platform", config=parse_config(load_file(EXAMPLE)))
    template = app.synth().get_stack_by_name(stack.stack_name).template
    [upload] = uploaded_files(outdir, template).values()
    return template, upload["parameters"]


@pytest.fixture(scope="module")
def template(synthesized: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    return synthesized[0]


def choices(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's parameters but CDK's bootstrap-version check."""
    return {k: v for k, v in template["Parameters"].items() if k != "BootstrapVersion"}


def config_with(field: str, value: Any) -> dict[str, Any]:
    """The example's config with ``field`` (a config path such as ``instance_groups[2].count``) set to
    ``value`` and no ``parameters`` section: the fixed config a team's choice makes."""
    data = copy.deepcopy(load_file(EXAMPLE))
    del data["parameters"]
    *parents, last = re.findall(r"[^.\[\]]+", field)
    node = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[last] = value
    return data  # type: ignore[no-any-return]


def test_every_choice_is_a_parameter_with_its_default(template: dict[str, Any]) -> None:
    assert list(choices(template)) == [
        "HyperPodClusterName",
        "InstanceGroupWorkersCount",
        "InstanceGroupWorkersType",
        "InstanceGroupWorkersCapacity",
        "FsxStorageCapacityGib",
        "DataRepositoryDatasetsBucketName",
        "DataRepositoryDatasetsBucketPrefix",
    ]
    for name, parameter in choices(template).items():
        assert rejections(parameter, parameter["Default"]) == [], name
        assert parameter["Description"], name


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HyperPodClusterName", "x" * 64),
        ("HyperPodClusterName", "-team"),
        ("HyperPodClusterName", "team_cluster"),
        ("HyperPodClusterName", ""),
        ("InstanceGroupWorkersCount", 17),
        ("InstanceGroupWorkersCount", 0),
        ("InstanceGroupWorkersCount", "many"),
        ("InstanceGroupWorkersType", "ml.p5.48xlarge"),
        ("FsxStorageCapacityGib", 3000),
        ("FsxStorageCapacityGib", 3600),
        ("DataRepositoryDatasetsBucketName", "Team_Data"),
        ("DataRepositoryDatasetsBucketName", "team..data"),
        ("DataRepositoryDatasetsBucketName", "10.0.0.1"),
        ("DataRepositoryDatasetsBucketName", "xn--team-data"),
        ("DataRepositoryDatasetsBucketPrefix", "/train/"),
        ("DataRepositoryDatasetsBucketPrefix", "train"),
        ("DataRepositoryDatasetsBucketPrefix", "train//2024/"),
        ("DataRepositoryDatasetsBucketPrefix", "train data/"),
        ("InstanceGroupWorkersCapacity", "Spot"),
        ("InstanceGroupWorkersCapacity", "reserved"),
    ],
)
def test_a_bad_choice_is_rejected(template: dict[str, Any], name: str, value: Any) -> None:
    assert rejections(template["Parameters"][name], value)


def test_every_allowed_value_passes_the_rules(template: dict[str, Any]) -> None:
    """Each value a constraint accepts (every AllowedValue, both ends of a range) validates in the config."""
    specs = {p.logical_id: p for p in template_parameters(parse_model(load_file(EXAMPLE)))}
    tried = 0
    for name, parameter in choices(template).items():
        values = parameter.get("AllowedValues") or [parameter.get("MinValue"), parameter.get("MaxValue")]
        for value in [v for v in values if v is not None] or [parameter["Default"]]:
            number = parameter["Type"] == "Number"
            parse_config(config_with(specs[name].field, int(value) if number else value))
            tried += 1
    assert tried == 1 + 2 + 3 + 2 + 3 + 1 + 1


NAMES = ["team-a", "a", "A1-b--2", "x" * 63, "x" * 64, "-a", "a-", "a_b", "a.b", "", "1"]
TEAM = "example-team-"
"""The example's bucket_name_prefix: a launch links only the team's buckets."""
BUCKETS = ["team-data", "a.b.c", "ab", "Ab-c", "a..b", "192.168.0.1", "sthree-x", "x-s3alias", "a" * 63, "a" * 64]
TEAM_BUCKETS = [TEAM + b for b in ("data", "a.b.c", "a..b", "x-s3alias", "X", "a" * 50, "a" * 51)] + [
    TEAM,
    "example-team",
]


@pytest.mark.parametrize(
    ("name", "field", "values", "start"),
    [
        ("HyperPodClusterName", "cluster_name", NAMES, ""),
        ("DataRepositoryDatasetsBucketName", "storage.data_repositories[0].bucket_name", BUCKETS + TEAM_BUCKETS, TEAM),
    ],
)
def test_the_constraint_and_the_rule_agree(
    template: dict[str, Any], name: str, field: str, values: list[str], start: str
) -> None:
    """A free-text choice is accepted by the template exactly when the rules accept it in the config (and, for a
    bucket, it starts with the team's prefix: PAR-BUCKET-SCOPE)."""
    for value in values:
        accepted = not rejections(template["Parameters"][name], value)
        try:
            parse_config(config_with(field, value))
            valid = value.startswith(start)
        except ConfigurationError:
            valid = False
        assert accepted == valid, value
    assert any(not value.startswith(start) and not bucket_name_problem(value) for value in values) or not start


def test_a_prefix_the_template_accepts_passes_the_rules(template: dict[str, Any]) -> None:
    parameter = template["Parameters"]["DataRepositoryDatasetsBucketPrefix"]
    for prefix in ["", "train/", "a/b-c/(1)/", "x!_.*'()-/"]:
        assert not rejections(parameter, prefix), prefix
        parse_config(config_with("storage.data_repositories[0].bucket_prefix", prefix))
    assert not bucket_name_problem("example-team-datasets")


def test_the_choices_reach_the_resources_and_the_nodes_keep_the_config_name(
    synthesized: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    template, node_parameters = synthesized
    picked = {"HyperPodClusterName": "team-b", "InstanceGroupWorkersType": "ml.g5.12xlarge"}
    picked |= {"InstanceGroupWorkersCount": 7, "FsxStorageCapacityGib": "4800"}
    picked |= {"DataRepositoryDatasetsBucketName": "other-data", "DataRepositoryDatasetsBucketPrefix": "runs/"}
    launched = resolved(template, picked)["Resources"]
    [cluster] = [r["Properties"] for r in launched.values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert cluster["ClusterName"] == "team-b"
    workers = next(g for g in cluster["InstanceGroups"] if g["InstanceGroupName"] == "workers")
    assert (workers["InstanceType"], workers["InstanceCount"]) == ("ml.g5.12xlarge", 7)
    assert workers["CapacityRequirements"] == {"OnDemand": {}}, "the default is the config's capacity"
    [file_system] = [r["Properties"] for r in launched.values() if r["Type"] == "AWS::FSx::FileSystem"]
    assert file_system["StorageCapacity"] == 4800
    paths = [
        r["Properties"]["DataRepositoryPath"]
        for r in launched.values()
        if r["Type"] == "AWS::FSx::DataRepositoryAssociation"
    ]
    assert {"Fn::Join": ["", ["s3://", "other-data", "/", "runs/"]]} in paths
    # The parameters file is fixed when the template is built: the config's name, no type for workers.
    ours = node_parameters["hyperpod_cdk"]
    assert ours["cluster_name"] == "team-cluster"
    assert [g.get("instance_type") for g in ours["groups"]] == ["ml.m5.xlarge", "ml.m5.large", None]


def test_the_console_groups_and_labels_every_parameter(template: dict[str, Any]) -> None:
    interface = template["Metadata"]["AWS::CloudFormation::Interface"]
    grouped = [p for group in interface["ParameterGroups"] for p in group["Parameters"]]
    assert sorted(grouped) == sorted(choices(template))
    assert set(interface["ParameterLabels"]) == set(choices(template))
    assert [g["Label"]["default"] for g in interface["ParameterGroups"]] == [
        "Cluster",
        "Instance group workers",
        "Storage",
        "Data repository datasets (/datasets)",
    ]


def test_a_choice_the_rules_reject_stops_synth(tmp_path: Path) -> None:
    """The rules judge every allowed value before any construct is built."""
    data = load_file(EXAMPLE)
    data["parameters"]["instance_groups"]["workers"]["instance_types"].append("ml.g5.huge")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigurationError) as error:
        TrainingClusterStack(fast_app(), "bad", config=parse_model(load_file(path)))
    assert [(p.rule, p.path) for p in error.value.problems] == [  # type: ignore[attr-defined]
        ("PAR-CHOICE", "parameters.instance_groups.workers.instance_types[3]")
    ]


def test_an_instance_count_may_be_a_number_token_but_not_a_fraction() -> None:
    """Embedding code passes a CfnParameter's value_as_number; a config's 2.5 stays an error."""
    import aws_cdk as cdk

    from hyperpod_cdk import InstanceGroup

    stack = cdk.Stack(fast_app(), "s")
    token = cdk.CfnParameter(stack, "Count", type="Number").value_as_number
    assert InstanceGroup(name="w", instance_type="ml.c5.xlarge", count=token).count == token  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fractional part"):
        InstanceGroup(name="w", instance_type="ml.c5.xlarge", count=2.5)  # type: ignore[arg-type]


def test_the_chosen_capacity_renders_its_requirements(template: dict[str, Any]) -> None:
    """CloudFormation picks ``{Spot: {}}`` or ``{OnDemand: {}}`` from the parameter; the other groups keep none."""
    for value, expected in (("spot", {"Spot": {}}), ("on-demand", {"OnDemand": {}})):
        launched = resolved(template, {"InstanceGroupWorkersCapacity": value})["Resources"]
        [cluster] = [r["Properties"] for r in launched.values() if r["Type"] == "AWS::SageMaker::Cluster"]
        groups = {g["InstanceGroupName"]: g for g in cluster["InstanceGroups"]}
        assert groups["workers"]["CapacityRequirements"] == expected, value
        assert "CapacityRequirements" not in groups["controller"] and "CapacityRequirements" not in groups["login"]


def test_a_capacity_choice_needs_the_groups_capacity_as_default() -> None:
    data = load_file(EXAMPLE)
    del data["instance_groups"][2]["capacity"]
    found = [(p.rule, p.path) for p in parse_model(data).problems()]
    assert found == [("PAR-DEFAULT", "parameters.instance_groups.workers.capacity")]


def test_spot_on_the_controller_is_not_a_choice() -> None:
    """Every allowed capacity passes the rules in the config: Spot for the controller is GRP-CAPACITY's error."""
    data = load_file(EXAMPLE)
    data["instance_groups"][0]["capacity"] = "on-demand"
    data["parameters"]["instance_groups"]["controller"] = {"capacity": ["on-demand", "spot"]}
    found = [(p.rule, p.path) for p in parse_model(data).problems()]
    assert found == [("PAR-CHOICE", "parameters.instance_groups.controller.capacity[1]")]


def test_a_group_that_may_launch_on_spot_is_spot_to_its_nodes(
    synthesized: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The file is fixed at build time while the capacity is chosen at launch: the node's parser reads the
    workers as Spot (their interruption watcher stays idle on On-Demand), the other groups as not said."""
    from training_runtime.params import ProvisioningParameters

    parsed = ProvisioningParameters.from_json(synthesized[1])
    assert [(g.name, g.capacity) for g in parsed.groups] == [("controller", None), ("login", None), ("workers", "spot")]
    assert [g.name for g in parsed.groups if g.is_spot] == ["workers"]
