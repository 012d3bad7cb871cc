"""Docs that repeat what the code defines are generated from it; the committed copies must be current."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from training_runtime.guard import table as guard_table

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass in the script looks its module up
    spec.loader.exec_module(module)
    return module


def test_runtime_options_tables_are_current() -> None:
    generator = _script("gen_runtime_options_doc")
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "docs/configuration.md is stale: run scripts/gen_runtime_options_doc.py"


def test_every_runtime_option_has_a_documented_row() -> None:
    generator = _script("gen_runtime_options_doc")
    text = generator.DOC.read_text()
    for path, cls in generator.SECTIONS:
        block = text.split(generator.begin_marker(path))[1].split(generator.END)[0]
        rows = re.findall(r"^\| `(\w+)` \|", block, flags=re.MULTILINE)
        assert rows == list(cls.__dataclass_fields__), path


def test_the_generator_reads_each_fields_own_docstring() -> None:
    generator = _script("gen_runtime_options_doc")
    from training_runtime.options import SlurmOptions

    docs = generator.field_docstrings(SlurmOptions)
    assert docs["slurmd_timeout"].startswith("Seconds. ``SlurmdTimeout``")
    assert "Slurm's default is 0" in docs["return_to_service"]


def test_construct_reference_is_current() -> None:
    generator = _script("gen_construct_reference")
    assert generator.DOC.read_text() == generator.render(), (
        "docs/constructs.md is stale: run scripts/gen_construct_reference.py"
    )


def test_every_optional_construct_prop_documents_its_default() -> None:
    """awslint's rule: an optional prop's description says what happens when it is left out."""
    generator = _script("gen_construct_reference")
    lacking = [
        f"{name}.{prop.name}"
        for module, name in generator.CLASSES
        for prop in generator.props_of(generator.load(module, name))
        if prop.lacks_default or not prop.description
    ]
    assert lacking == [], "add a `Default:` to these :param lines (or document the prop)"


def test_the_construct_reference_reads_params_signatures_and_flags_missing_defaults() -> None:
    generator = _script("gen_construct_reference")

    class Example:
        """Prose about the example.

        :param size: how big, across
            two lines. Default: 3.
        :param label: a name.
        """

        def __init__(self, scope: object, id: str, *, size: int = 3, label: str = "", color: str = "red") -> None:
            del scope, id, size, label, color

    prose, params = generator.split_docstring(Example.__doc__)
    assert prose == "Prose about the example."
    assert params == {"size": "how big, across two lines. Default: 3.", "label": "a name."}
    props = {prop.name: prop for prop in generator.props_of(Example)}
    assert list(props) == ["size", "label", "color"]
    assert (props["size"].type, props["size"].default, props["size"].lacks_default) == ("int", "3", False)
    assert props["label"].lacks_default and props["label"].default == "''"
    assert props["color"].description == ""


def test_parameters_example_is_current() -> None:
    generator = _script("gen_parameters_example")
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "docs/slurm-mode.md is stale: run scripts/gen_parameters_example.py"


def test_the_parameters_example_shows_deploy_time_values_by_their_key() -> None:
    generator = _script("gen_parameters_example")
    shown = generator.readable({"a": {"fsx_dns_name": "<<marker:0xbaba:0>>"}, "b": ["x", "<<marker:0xbaba:12>>"]})
    assert shown == {"a": {"fsx_dns_name": "<deploy time: fsx_dns_name>"}, "b": ["x", "<deploy time: b>"]}


def test_slurm_mode_doc_names_every_key_the_parameters_file_can_hold() -> None:
    """The key list in docs/slurm-mode.md is prose; a key the contract gains must be named there too."""
    from training_runtime.groups import GroupSpec
    from training_runtime.params import MetricsTarget, ProvisioningParameters

    everything = ProvisioningParameters(
        cluster_name="c",
        mode="api-driven",
        groups=(
            GroupSpec(name="controller", role="controller", instance_type="ml.m5.xlarge"),
            GroupSpec(name="login", role="login", instance_type="ml.m5.xlarge"),
            GroupSpec(name="w", role="compute", instance_type=None, instance_types=("ml.g5.xlarge",), capacity="spot"),
        ),
        fsx_dns_name="fs.example",
        fsx_mountname="abcdefgh",
        fsx=True,
        openzfs_mount_path="/home",
        metrics=MetricsTarget(remote_write_url="https://aps.example/api/v1/remote_write", region="us-west-2"),
        slurmdbd_owner="hyperpod",
    ).to_json()

    def keys(value: object) -> set[str]:
        if isinstance(value, dict):
            return {name for name in value if name != "options"} | {k for v in value.values() for k in keys(v)}
        if isinstance(value, list):
            return {k for item in value for k in keys(item)}
        return set()

    text = (ROOT / "docs" / "slurm-mode.md").read_text().split("<!-- BEGIN GENERATED")[0]
    assert sorted(key for key in keys(everything) if f"`{key}`" not in text) == []


def test_module_index_is_current() -> None:
    generator = _script("gen_module_index")
    assert generator.DOC.read_text() == generator.render(), "docs/modules.md is stale: run scripts/gen_module_index.py"


def test_the_module_index_takes_the_first_sentence_of_each_docstring(tmp_path: Path) -> None:
    generator = _script("gen_module_index")
    module = tmp_path / "m.py"
    module.write_text('"""Thing: does ``x`` for :mod:`a.b`. More here.\n\nDetail."""\n')
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\n# Starts the node.\n# Second line.\nset -e\n")
    assert generator.summary(module) == "Thing: does `x` for `a.b`."
    assert generator.summary(script) == "Starts the node."


def test_architecture_names_every_resource_type_and_execution_role_action_of_the_default_template() -> None:
    """docs/architecture.md is what a security reviewer reads: a resource or a grant the default template gains
    (as the metrics workspace and ``aps:RemoteWrite`` once did) must appear there."""
    import json

    template = json.loads((ROOT / "tests" / "snapshots" / "trn1-cluster.hyperpod-trn1-cluster.json").read_text())
    text = (ROOT / "docs" / "architecture.md").read_text()
    types = {resource["Type"] for resource in template["Resources"].values()}
    assert sorted(t for t in types if t not in text) == []
    policies = [
        resource
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::Policy" and name.startswith("ClusterExecutionRole")
    ]
    assert len(policies) >= 2  # a role per instance group
    actions = set()
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            found = statement["Action"]
            actions.update([found] if isinstance(found, str) else found)
    assert "aps:RemoteWrite" in actions
    assert sorted(action for action in actions if action not in text) == []


def test_operator_permissions_are_current() -> None:
    generator = _script("gen_operator_permissions")
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "docs/operations.md is stale: run scripts/gen_operator_permissions.py"


def test_the_operator_permissions_name_every_cluster_command_of_the_cli() -> None:
    """A new operator command gets a row (and so a place in a grant) before the docs can be current."""
    import argparse

    from hyperpod_cdk.core.operator_permissions import COMMANDS, GRANTS
    from hyperpod_cdk.ops.parser import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    names = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert names - {"training-job-config", "plan", "jobs", "rest"} == {c for c in COMMANDS if " " not in c}
    assert {c for commands in GRANTS.values() for c in commands} == set(COMMANDS)


def test_step_module_list_is_current() -> None:
    generator = _script("gen_step_list")
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "docs/node-runtime.md is stale: run scripts/gen_step_list.py"


def test_the_step_module_list_names_every_module_of_the_steps_package() -> None:
    """The hand-kept list missed 8 of 27 step modules (review 2026-11-28, claim 18)."""
    generator = _script("gen_step_list")
    listed = re.findall(r"^\| `(\w+\.py)` \|", generator.block(), flags=re.MULTILINE)
    on_disk = sorted(p.name for p in (ROOT / "src" / "training_runtime" / "steps").glob("*.py"))
    assert listed == on_disk and len(on_disk) > 20


def test_the_slurm_guard_table_is_current_and_is_the_codes_table() -> None:
    """What the guard repairs and leaves is one definition (training_runtime.guard.table), rendered into the doc."""
    generator = _script("gen_guard_table")
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "docs/node-runtime.md is stale: run scripts/gen_guard_table.py"
    rows = re.findall(r"^\| `([a-z-]+)` \|", generator.block(), flags=re.MULTILINE)
    assert rows == [rule.check for rule in guard_table.RULES]


def test_a_generated_block_ends_at_its_own_end_marker() -> None:
    """Two generated blocks in one doc share the end marker: each is replaced up to the end marker after it."""
    docgen = _script("docgen")
    text = "a\n<!-- B1 -->old1<!-- END -->\nb\n<!-- B2 -->old2<!-- END -->\nc\n"
    assert docgen.replace_block(text, "<!-- B2 -->", "<!-- END -->", "new2") == (
        "a\n<!-- B1 -->old1<!-- END -->\nb\nnew2\nc\n"
    )


def test_plan_example_is_current() -> None:
    generator = _script("gen_plan_example")
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "docs/node-runtime.md is stale: run scripts/gen_plan_example.py"


def test_the_plan_example_is_the_workers_whole_plan_with_metrics() -> None:
    """The review found the hand-kept example without the metrics steps (on by default): the generated one is
    the catalog's plan for that worker, metrics agent included."""
    generator = _script("gen_plan_example")
    steps = re.findall(r"^(\S+)\s+WILL CHANGE$", generator.plan_text(), flags=re.MULTILINE)
    assert steps[0] == "installed-runtime" and "daemon:slurmd" in steps
    assert steps[-1] == "daemon:hyperpod-cdk-metrics-agent"


def test_the_field_map_and_update_policy_tables_are_current() -> None:
    """docs/configuration.md's two tables of the field map (data/fields.yaml): each field's member, shape, classes
    and rows, and each field's update policy."""
    generator = _script("gen_update_policies_doc")
    text = generator.DOC.read_text()
    assert generator.updated(text) == text, "docs/configuration.md is stale: run scripts/gen_update_policies_doc.py"
    table = generator.render_map()
    assert "| `instance_groups[].instance_type` | `InstanceGroups[].InstanceType` (" in table
    assert "ClusterInstanceGroupSpecification.InstanceType" in table and "cli-command-keep-instance-type" in table
