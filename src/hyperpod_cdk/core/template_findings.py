"""CDK's built-in template validator, as problems by config field: a finding fails synth.

aws-cdk-lib runs a CloudFormation validator on every synth and writes ``validation-report.json`` into
the cloud assembly; by default its findings are only printed. The app (``app.py``) reads the report
and fails on any finding, naming the config field where the resource and property map to one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hyperpod_cdk.aws_data.fields import fields
from training_runtime.problems import Problem

VALIDATOR_PLUGIN = "CloudFormation Validate"
RULE_PREFIX = "CFN-"

CONSTRUCTS = {
    "AWS::SageMaker::Cluster": r"/Cluster/Resource$",
    "AWS::FSx::FileSystem": r"/Storage/FileSystem/Resource$",
}
"""Where the construct puts each resource the field map names a property of (the stack's construct paths)."""
FALLBACKS: tuple[tuple[str, str, str], ...] = (
    (r"/Cluster/Resource$", r"^InstanceGroups\.(\d+)\.", "instance_groups[{0}]"),
    (r"/Storage/FileSystem/Resource$", r"", "storage"),
    (r"/Storage/Repository(\w+)$", r"", "storage.data_repositories ({0})"),
    (r"/Network/Vpc/Resource$", r"^CidrBlock$", "network.cidr"),
    (r"/Network/", r"", "network"),
    (r"/LifecycleScripts/", r"", "lifecycle"),
)
"""What a finding the map does not place is about: the group, the resource, the section."""


def _from_map() -> tuple[tuple[str, str, str], ...]:
    """(construct pattern, property pattern, field) of every field map line whose property a construct above
    renders, most specific first; a group's index is kept (``InstanceGroups.2.X``), a list without one is ``[*]``."""
    found = []
    for f in fields():
        where = f.cfn_property
        if where is None or where[0] not in CONSTRUCTS or "[]" in f.path.partition("[]")[2]:
            continue
        pointer = where[1]
        if pointer.startswith("InstanceGroups/*/"):
            member = (
                re.escape(pointer.removeprefix("InstanceGroups/*/")).replace("/\\*/", r"\.\d+\.").replace("/", r"\.")
                + "(?![A-Za-z])"  # InstanceType is not InstanceTypes
            )
            found.append((CONSTRUCTS[where[0]], rf"^InstanceGroups\.(\d+)\.{member}", f.path.replace("[]", "[{0}]", 1)))
            found.append((CONSTRUCTS[where[0]], rf"^InstanceGroups\.{member}", f.path.replace("[]", "[*]", 1)))
        elif "*" not in pointer:
            found.append((CONSTRUCTS[where[0]], "^" + re.escape(pointer).replace("/", r"\.") + "$", f.path))
    return tuple(sorted(found, key=lambda entry: -len(entry[1])))


_FIELDS = (*_from_map(), *FALLBACKS)


def field_of(construct_path: str, property_path: str) -> str:
    """The config field a finding is about, or the construct and property when none maps."""
    prop = property_path.removeprefix("Properties.")
    for construct_pattern, property_pattern, field in _FIELDS:
        construct_match = re.search(construct_pattern, construct_path)
        property_match = re.search(property_pattern, prop)
        if construct_match and property_match:
            return field.format(*(property_match.groups() or construct_match.groups()))
    return f"{construct_path} {prop}".strip()


def findings(report: dict[str, Any]) -> list[Problem]:
    """Every finding of the built-in validator in a parsed ``validation-report.json``."""
    found: list[Problem] = []
    for plugin in report.get("pluginReports", []):
        if plugin.get("pluginName") != VALIDATOR_PLUGIN:
            continue
        for violation in plugin.get("violations", []):
            description = " ".join(str(violation.get("description", "")).split())
            for construct in violation.get("violatingConstructs", []):
                resource = construct.get("cloudFormationResource", {})
                paths = resource.get("propertyPaths") or [""]
                for property_path in paths:
                    found.append(
                        Problem(
                            field_of(str(construct.get("constructPath", "")), str(property_path)),
                            description,
                            rule=RULE_PREFIX + str(violation.get("ruleName", "")),
                            fix="CloudFormation would reject this template; correct the value (validator rule "
                            f"{violation.get('ruleName')})",
                        )
                    )
    return found


def findings_in(assembly_dir: str | Path) -> list[Problem]:
    path = Path(assembly_dir) / "validation-report.json"
    if not path.is_file():
        return []
    return findings(json.loads(path.read_text()))
