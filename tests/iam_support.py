"""Reading a synthesized template's IAM by instance group: which role a group's nodes assume, and what that role's
policies allow (tests/test_roles_per_group.py and the construct tests)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

CLUSTER = "AWS::SageMaker::Cluster"


def resources(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template's resources (a ``Template``'s ``to_json()`` or a plain dict)."""
    data = template.to_json() if hasattr(template, "to_json") else template
    found: dict[str, Any] = data["Resources"]
    return found


def group_roles(template: Mapping[str, Any]) -> dict[str, str]:
    """Each instance group's execution role, by group name: the logical ID its ``ExecutionRole`` GetAtt names."""
    (cluster,) = [r for r in resources(template).values() if r["Type"] == CLUSTER]
    return {
        g["InstanceGroupName"]: g["ExecutionRole"]["Fn::GetAtt"][0] for g in cluster["Properties"]["InstanceGroups"]
    }


def role_statements(template: Mapping[str, Any], role_id: str) -> list[dict[str, Any]]:
    """Every statement of every ``AWS::IAM::Policy`` attached to the role ``role_id`` (inline policies of the role
    itself too)."""
    found: list[dict[str, Any]] = []
    for resource in resources(template).values():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in properties.get("Roles", []):
            found += properties["PolicyDocument"]["Statement"]
    role = resources(template)[role_id]
    for policy in role.get("Properties", {}).get("Policies", []):
        found += policy["PolicyDocument"]["Statement"]
    return found


def actions(statement: Mapping[str, Any]) -> list[str]:
    value = statement["Action"]
    return [value] if isinstance(value, str) else list(value)


def allowed_actions(template: Mapping[str, Any], role_id: str) -> set[str]:
    """Every action an Allow statement of the role's policies names."""
    return {a for s in role_statements(template, role_id) if s["Effect"] == "Allow" for a in actions(s)}


def statements_with(template: Mapping[str, Any], role_id: str, action: str) -> list[dict[str, Any]]:
    return [s for s in role_statements(template, role_id) if action in actions(s)]


def mentions(statement: Mapping[str, Any], text: str) -> bool:
    return text in json.dumps(statement)
