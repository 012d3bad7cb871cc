"""JSON Schema fragments for the sections the node runtime defines (``runtime:``, ``users:``, ``teams:``).

They are derived from the runtime's own dataclasses, so editors complete and check the same names,
types and defaults the node reads; the rules themselves run in ``hyperpod-cdk validate``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import TypeAdapter

from hyperpod_cdk.core.docstrings import field_docstrings
from training_runtime import directory as runtime_directory
from training_runtime import options as runtime_options
from training_runtime import team_model as runtime_teams
from training_runtime.option_types import SECRET_ARN
from training_runtime.users import MAX_ID, MIN_ID, USER_NAME, User


def _dataclass_schema(cls: type) -> dict[str, Any]:
    schema: dict[str, Any] = TypeAdapter(cls).json_schema(ref_template="#/$defs/{model}")
    _describe(cls, schema)
    for name, definition in schema.get("$defs", {}).items():
        nested = getattr(runtime_options, name, None)
        if nested is not None and dataclasses.is_dataclass(nested):
            _describe(nested, definition)
    for definition in [schema, *schema.get("$defs", {}).values()]:
        if definition.get("type") == "object" and "properties" in definition:
            definition["additionalProperties"] = False
            definition.pop("title", None)
    return schema


def _describe(cls: Any, schema: dict[str, Any]) -> None:
    if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
        schema["description"] = " ".join(cls.__doc__.split())
    for name, text in field_docstrings(cls).items():
        schema.get("properties", {}).get(name, {})["description"] = " ".join(text.split())


def runtime_schema() -> dict[str, Any]:
    schema = _dataclass_schema(runtime_options.RuntimeOptions)
    schema.pop("title", None)
    schema["description"] = "Options for the node runtime, passed to every node in the parameters file."
    schema["default"] = {}
    return schema


def users_schema() -> dict[str, Any]:
    user = _dataclass_schema(User)
    user.pop("title", None)
    properties = user["properties"]
    properties["name"]["pattern"] = USER_NAME.pattern
    properties["uid"].update(minimum=MIN_ID, maximum=MAX_ID, description="Fixed on every node (files on FSx).")
    properties["gid"].update(minimum=MIN_ID, maximum=MAX_ID, description="Default: the uid.")
    user["required"] = ["name", "uid"]
    return {
        "type": "array",
        "items": user,
        "default": [],
        "description": "Cluster users: fixed IDs, homes on the shared file system, optional sudo and SSH keys.",
    }


def teams_schema() -> dict[str, Any]:
    team = _dataclass_schema(runtime_teams.Team)
    team.pop("title", None)
    definitions = team.get("$defs", {})
    for name in ("TeamQos", "Budget"):
        _describe(getattr(runtime_teams, name), definitions[name])
    definitions["Budget"]["properties"]["amount"]["minimum"] = 0
    definitions["Budget"]["properties"]["period"]["enum"] = list(runtime_teams.PERIODS)
    definitions["TeamQos"]["properties"]["max_wall"]["anyOf"][0]["pattern"] = runtime_teams.WALL_TIME.pattern
    team["properties"]["name"]["pattern"] = runtime_teams.ACCOUNT_NAME.pattern
    team["required"] = ["name"]
    return {"type": "array", "items": team, "default": [], "description": ""}


def directory_schema() -> dict[str, Any]:
    found = _dataclass_schema(runtime_directory.Directory)
    found.pop("title", None)
    properties = found["properties"]
    properties["uris"].update(minItems=1)
    properties["uris"]["items"]["pattern"] = runtime_directory.URI.pattern
    properties["bind_password_secret_arn"]["pattern"] = SECRET_ARN.pattern
    properties["schema"]["enum"] = list(runtime_directory.SCHEMAS)
    properties["homes"]["enum"] = list(runtime_directory.HOMES)
    properties["group_sync_interval_s"].update(
        minimum=runtime_directory.MIN_SYNC_S, maximum=runtime_directory.MAX_SYNC_S
    )
    return {"anyOf": [found, {"type": "null"}], "default": None}


def add_to(schema: dict[str, Any]) -> dict[str, Any]:
    """The config file's schema with ``runtime``, ``users``, ``teams`` and ``directory`` described in full."""
    runtime, users, teams, directory = runtime_schema(), users_schema(), teams_schema(), directory_schema()
    definitions = schema.setdefault("$defs", {})
    for fragment in (runtime, users["items"], teams["items"], directory["anyOf"][0]):
        definitions.update(fragment.pop("$defs", {}))
    properties = schema["properties"]
    for name, fragment in (("runtime", runtime), ("users", users), ("teams", teams), ("directory", directory)):
        fragment["description"] = properties[name].get("description", fragment.get("description", ""))
        properties[name] = fragment
    return schema
