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

from training_runtime.problems import Problem

VALIDATOR_PLUGIN = "CloudFormation Validate"
RULE_PREFIX = "CFN-"

# (construct path pattern, property path pattern) -> config field; groups carry list indexes.
_FIELDS: tuple[tuple[str, str, str], ...] = (
    (r"/Cluster/Resource$", r"^ClusterName$", "cluster_name"),
    (r"/Cluster/Resource$", r"^InstanceGroups\.(\d+)\.InstanceType$", "instance_groups[{0}].instance_type"),
    (r"/Cluster/Resource$", r"^InstanceGroups\.InstanceType$", "instance_groups[*].instance_type"),
    (r"/Cluster/Resource$", r"^InstanceGroups\.(\d+)\.InstanceCount$", "instance_groups[{0}].count"),
    (r"/Cluster/Resource$", r"^InstanceGroups\.(\d+)\.InstanceGroupName$", "instance_groups[{0}].name"),
    (r"/Cluster/Resource$", r"^InstanceGroups\.(\d+)\.ThreadsPerCore$", "instance_groups[{0}].threads_per_core"),
    (r"/Cluster/Resource$", r"^InstanceGroups\.(\d+)\.TrainingPlanArn$", "instance_groups[{0}].training_plan_arn"),
    (r"/Cluster/Resource$", r"^InstanceGroups\.(\d+)\.", "instance_groups[{0}]"),
    (r"/Storage/FileSystem/Resource$", r"^StorageCapacity$", "storage.storage_capacity_gib"),
    (r"/Storage/FileSystem/Resource$", r"PerUnitStorageThroughput$", "storage.throughput_mb_per_tib"),
    (r"/Storage/FileSystem/Resource$", r"DeploymentType$", "storage.deployment_type"),
    (r"/Storage/FileSystem/Resource$", r"FileSystemTypeVersion$", "storage.file_system_type_version"),
    (r"/Storage/FileSystem/Resource$", r"MetadataConfiguration", "storage.metadata_iops"),
    (r"/Storage/FileSystem/Resource$", r"", "storage"),
    (r"/Storage/Repository(\w+)$", r"", "storage.data_repositories ({0})"),
    (r"/Network/Vpc/Resource$", r"^CidrBlock$", "network.cidr"),
    (r"/Network/", r"", "network"),
    (r"/LifecycleScripts/", r"", "lifecycle"),
)


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
