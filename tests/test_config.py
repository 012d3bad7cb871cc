"""The configuration file: defaults, loading, field-path errors, the exported JSON Schema."""

import json
from pathlib import Path

import pytest

from hyperpod_cdk import ClusterConfig, ConfigurationError, NodeRole, load_config, parse_config
from hyperpod_cdk.core.config import json_schema, parse_model

ROOT = Path(__file__).resolve().parent.parent


def test_default_is_a_trainium_cluster_with_a_data_repository() -> None:
    config = ClusterConfig()
    assert config.warnings_if_valid() == []
    groups = [(g.role, g.instance_type, g.count) for g in config.instance_groups]
    assert groups == [(NodeRole.CONTROLLER, "ml.m5.xlarge", 1), (NodeRole.COMPUTE, "ml.trn1.32xlarge", 4)]
    assert config.storage is not None
    assert [r.bucket_name for r in config.storage.data_repositories] == [None]  # a new bucket


USER = {"name": "researcher", "uid": 2001}


def test_warnings_if_valid_raises_every_error_and_otherwise_returns_the_warnings() -> None:
    controller = {"name": "controller", "role": "controller", "count": 1, "instance_type": "ml.m5.xlarge"}
    efa = {"name": "gpu", "role": "compute", "count": 2, "instance_type": "ml.p5.48xlarge"}
    warned = parse_model({"instance_groups": [controller, efa]})
    assert [(p.rule, p.level) for p in warned.warnings_if_valid()] == [("FSX-EFA-CLIENTS", "warning")]
    assert warned.check() == warned.warnings_if_valid()  # the former name still works
    broken = parse_model({"cluster_name": "-bad", "instance_groups": [controller, {**efa, "name": "bad_name"}]})
    with pytest.raises(ConfigurationError, match=r"my file: 2 problems") as raised:
        broken.warnings_if_valid("my file")
    assert "[CL-NAME]" in str(raised.value) and "[GRP-NAME]" in str(raised.value)


@pytest.mark.parametrize(
    "needs_storage",
    [{"mode": "lifecycle-driven"}, {"users": [USER]}, {"runtime": {"pytorch": {"version": "2.9.0"}}}],
    ids=["lifecycle-driven", "users", "pytorch"],
)
def test_what_needs_a_shared_file_system_refuses_storage_null(needs_storage: dict, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_config({"storage": None, **needs_storage})
    assert [p for p in error.value.problems if p.startswith("storage")], error.value.problems
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({"storage": None, **needs_storage}))
    with pytest.raises(ConfigurationError) as from_file:
        load_config(path)
    assert [p for p in from_file.value.problems if p.startswith("storage")], from_file.value.problems
    parse_config({"storage": {}, **needs_storage})  # with a file system it is fine


def test_empty_file_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("")
    assert load_config(path) == ClusterConfig()


def test_type_errors_name_every_field(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "cluster_name: x\n"
        "instance_groups:\n"
        "  - {name: c, role: boss, instance_type: ml.m5.large, count: 1}\n"
        "  - {name: w, instance_type: ml.c5.large, count: many, colour: red}\n"
    )
    with pytest.raises(ConfigurationError) as error:
        load_config(path)
    text = str(error.value)
    assert str(path) in text
    assert "instance_groups[0].role: got 'boss'" in text
    assert "instance_groups[1].count: got 'many'" in text
    assert "instance_groups[1].colour" in text
    assert len(error.value.problems) == 3


def test_rule_errors_are_reported_together() -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_config(
            {
                "cluster_name": "-bad-",
                "instance_groups": [
                    {"name": "c", "role": "controller", "instance_type": "m5.xlarge", "count": 1},
                    {"name": "w", "instance_type": "ml.c5.large", "count": 1, "threads_per_core": 4},
                ],
                "network": {"subnet_id": "subnet-0123456789abcdef0"},
                "storage": {"storage_capacity_gib": 1000, "throughput_mb_per_tib": 200},
            }
        )
    problems = error.value.problems
    expected_paths = [
        "cluster_name",
        "instance_groups[0].instance_type",
        "instance_groups[1].threads_per_core",
        "network.subnet_id",
        "storage.storage_capacity_gib",
        "storage.throughput_mb_per_tib",
    ]
    for path in expected_paths:
        assert any(p.startswith(path + ":") for p in problems), (path, problems)


def test_problems_say_what_is_allowed() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"storage.throughput_mb_per_tib: got 200; PERSISTENT_2 takes one of 125, 250, 500, 1000",
    ):
        parse_config({"storage": {"throughput_mb_per_tib": 200}})


def test_unreadable_yaml_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("instance_groups: [unclosed\n")
    with pytest.raises(ConfigurationError, match="cannot read the file"):
        load_config(path)


def test_committed_json_schema_is_current() -> None:
    committed = json.loads((ROOT / "schema" / "cluster-config.schema.json").read_text())
    assert committed == json_schema(), "run `make schema` and commit schema/cluster-config.schema.json"


def test_schema_describes_observability() -> None:
    """Its docstring once sat after another field's, so the schema had no description for it."""
    assert json_schema()["properties"]["observability"]["description"].startswith("Metrics to Amazon Managed")


def test_every_field_docstring_of_the_config_models_follows_its_field() -> None:
    """pydantic attaches an attribute docstring only to the field right above it: a string anywhere else in a
    model's body (a second docstring, one after a method) documents nothing and is lost from the JSON Schema."""
    import ast

    stray = []
    for module in ("core/config.py", "model.py"):
        tree = ast.parse((ROOT / "src" / "hyperpod_cdk" / module).read_text())
        for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
            for index, statement in enumerate(cls.body):
                is_string = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                after_field = index > 0 and isinstance(cls.body[index - 1], (ast.AnnAssign, ast.Assign))
                if is_string and isinstance(statement.value.value, str) and index > 0 and not after_field:
                    stray.append(f"{module}:{statement.lineno} ({cls.name})")
    assert stray == []


def test_schema_describes_instance_groups() -> None:
    schema = json_schema()
    assert "instance_groups" in schema["properties"]
    assert schema["additionalProperties"] is False


def test_unquoted_lustre_versions_are_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("storage:\n  file_system_type_version: 2.15\n")
    config = load_config(path)
    assert config.storage is not None and config.storage.file_system_type_version == "2.15"
    path.write_text("storage:\n  file_system_type_version: 2.10\n")
    with pytest.raises(ConfigurationError, match=r"file_system_type_version: got '2\.10'; PERSISTENT_2"):
        load_config(path)
