#!/usr/bin/env python3
"""Write ``src/hyperpod_cdk/data/api_constraints.json``: the SageMaker API model's constraints on every shape of
the CreateCluster, UpdateCluster and UpdateClusterSoftware request members hyperpod-cdk emits, and where the
CloudFormation schema of ``AWS::SageMaker::Cluster`` disagrees with them.

Sources, both pinned by the project's lock: botocore's SageMaker service model
(``botocore/data/sagemaker/2017-07-24/service-2.json``; the API reference pages are generated from it) and
cfn-lint's bundled CloudFormation resource schema (``cfnlint/data/schemas``, us-east-1's provider map). The table
is read at run time by :mod:`hyperpod_cdk.aws_data.api_constraints` (``validate``, synth, the cfn-lint rules) and by the
emulated control plane; botocore's 20 MB model never is::

    .venv/bin/python scripts/gen_api_constraints.py          # rewrite the table
    .venv/bin/python scripts/gen_api_constraints.py --check  # exit 1 if the committed table is stale

tests/test_api_constraints.py regenerates it in memory: a newer botocore or cfn-lint that changes a shape we emit
fails that test until the table is regenerated and the change reviewed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from hyperpod_cdk.aws_data.fields import fields

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "src" / "hyperpod_cdk" / "data" / "api_constraints.json"


def _members(prefix: str) -> tuple[str, ...]:
    """The members under ``prefix`` (``""``: the request's own) that the field map's ``api`` paths name."""
    found: dict[str, None] = {}
    for f in fields():
        if f.api and f.api.startswith(prefix):
            found[f.api[len(prefix) :].split(".")[0].removesuffix("[]")] = None
    return tuple(m for m in found if m)


CREATE = _members("")
OPERATIONS: dict[str, tuple[str, ...]] = {
    "CreateCluster": CREATE,
    # CloudFormation sends UpdateCluster with the members it takes (api_shapes keeps those of CreateCluster's that
    # UpdateClusterRequest has: the rest are create-only) and the removed groups' names.
    "UpdateCluster": (*CREATE, "InstanceGroupsToDelete"),
    "UpdateClusterSoftware": ("ClusterName", "InstanceGroups", "DeploymentConfig", "ImageId"),
}
"""Each operation's request members that hyperpod-cdk emits: CreateCluster's are the field map's (data/fields.yaml,
``api``: the ``AWS::SageMaker::Cluster`` properties the construct renders); CloudFormation calls UpdateCluster with
those UpdateClusterRequest has and the removed groups' names (``InstanceGroupsToDelete``); ``hyperpod-cdk
update-software`` sends UpdateClusterSoftware for an AMI."""

KEPT_MEMBERS: dict[str, tuple[str, ...]] = {
    "ClusterInstanceGroupSpecification": _members("InstanceGroups[]."),
    "ClusterOrchestrator": _members("Orchestrator."),
    "ClusterAutoPatchConfig": _members("InstanceGroups[].AutoPatchConfig."),
}
"""Structures of which we emit only some members (the rest are EKS's or not rendered): only these are kept, so a
model change elsewhere in the structure does not touch the table. Other structures keep every member."""

CFN_TYPE = "AWS::SageMaker::Cluster"
CFN_FACETS = {"minLength": "min", "maxLength": "max", "minimum": "min", "maximum": "max", "minItems": "min"}
CFN_FACETS["maxItems"] = "max"


def botocore_model() -> tuple[dict[str, Any], str]:
    """The pinned botocore's SageMaker model and botocore's version."""
    import botocore
    from botocore.loaders import Loader

    return Loader().load_service_model("sagemaker", "service-2", "2017-07-24"), str(botocore.__version__)


def cfn_schema() -> tuple[dict[str, Any], str]:
    """cfn-lint's bundled schema of ``AWS::SageMaker::Cluster`` (us-east-1's provider map) and its origin."""
    from importlib.metadata import version

    import cfnlint

    base = Path(cfnlint.__file__).parent / "data" / "schemas"
    providers = json.loads((base / "providers" / "us-east-1.json").read_text())
    name = providers[CFN_TYPE]
    schema = json.loads((base / "resources" / f"{name}.json").read_text())
    return schema, f"cfn-lint {version('cfn-lint')} schemas/resources/{name}.json"


def _facets(shape: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {"type": shape["type"]}
    for key in ("min", "max", "enum"):
        if key in shape:
            found[key] = list(shape[key]) if key == "enum" else shape[key]
    if "pattern" in shape:
        found["pattern"] = shape["pattern"]
    return found


def api_shapes(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every shape reachable from the emitted request members, with its constraints (structures: members and
    required members; lists: the member shape)."""
    shapes = model["shapes"]
    out: dict[str, dict[str, Any]] = {}
    todo: list[str] = []
    for operation, members in OPERATIONS.items():
        request = shapes[model["operations"][operation]["input"]["shape"]]
        name = f"{operation}Request"
        out[name] = {
            "type": "structure",
            "required": [m for m in request.get("required", []) if m in members],
            "members": {m: request["members"][m]["shape"] for m in request["members"] if m in members},  # model order
        }
        todo.extend(out[name]["members"].values())
    while todo:
        name = todo.pop()
        if name in out:
            continue
        shape = shapes[name]
        entry = _facets(shape)
        if shape["type"] == "structure":
            kept = KEPT_MEMBERS.get(name, tuple(shape["members"]))
            entry["members"] = {m: shape["members"][m]["shape"] for m in shape["members"] if m in kept}
            entry["required"] = [m for m in shape.get("required", []) if m in kept]
            todo.extend(entry["members"].values())
        elif shape["type"] == "list":
            entry["member"] = shape["member"]["shape"]
            todo.append(entry["member"])
        elif shape["type"] == "map":
            entry["key"], entry["value"] = shape["key"]["shape"], shape["value"]["shape"]
            todo.extend((entry["key"], entry["value"]))
        out[name] = entry
    return dict(sorted(out.items()))


def _unanchored(pattern: str) -> str:
    return re.sub(r"\$$", "", re.sub(r"^\^", "", pattern))


def _cfn_resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["definitions"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def disagreements(shapes: dict[str, dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Where the CloudFormation schema's constraint on a member differs from the API model's, walked from
    CreateCluster's members: the member path, the facet, both values and which applies (the stricter one; two
    different patterns: both)."""
    found: list[dict[str, Any]] = []

    def walk(shape_name: str, cfn: dict[str, Any], path: str, seen: frozenset[str]) -> None:
        shape = shapes[shape_name]
        cfn = _cfn_resolve(schema, cfn)
        if shape["type"] == "structure":
            properties = cfn.get("properties", {})
            for member, child in shape["members"].items():
                if member not in properties or child in seen:
                    continue
                here = f"{path}.{member}" if path else member
                required_api = member in shape["required"]
                required_cfn = member in cfn.get("required", [])
                # The request's own members: CloudFormation fills in what a template leaves out (a name).
                if required_api != required_cfn and path:
                    found.append(_row(here, shape_name, member, "required", required_api, required_cfn, True))
                walk(child, properties[member], here, seen | {shape_name})
            return
        if shape["type"] == "list":
            _compare(found, path, shape_name, shape, cfn)
            walk(shape["member"], cfn.get("items", {}), f"{path}[]", seen)
            return
        _compare(found, path, shape_name, shape, cfn)

    walk(
        "CreateClusterRequest",
        {"properties": schema["properties"], "required": schema.get("required", [])},
        "",
        frozenset(),
    )
    return found


def _row(path: str, shape: str, member: str | None, facet: str, api: Any, cfn: Any, applied: Any) -> dict[str, Any]:
    return {"path": path, "shape": shape, "facet": facet, "api": api, "cfn": cfn, "applied": applied}


def _compare(
    found: list[dict[str, Any]], path: str, shape_name: str, shape: dict[str, Any], cfn: dict[str, Any]
) -> None:
    bounds: dict[str, Any] = {}
    for key, facet in CFN_FACETS.items():
        if key in cfn:
            bounds[facet] = cfn[key]
    for facet in ("min", "max"):
        api, other = shape.get(facet), bounds.get(facet)
        if other is None or api == other:
            continue
        if api is None:
            applied = other
        elif facet == "min":
            applied = max(api, other)
        else:
            applied = min(api, other)
        found.append(_row(path, shape_name, None, facet, api, other, applied))
    if "enum" in cfn and "enum" in shape and sorted(cfn["enum"]) != sorted(shape["enum"]):
        applied = [v for v in shape["enum"] if v in cfn["enum"]]
        found.append(_row(path, shape_name, None, "enum", shape["enum"], cfn["enum"], applied))
    elif "enum" in cfn and "enum" not in shape:
        found.append(_row(path, shape_name, None, "enum", None, cfn["enum"], cfn["enum"]))
    if "pattern" in cfn:
        api_pattern, cfn_pattern = shape.get("pattern"), _unanchored(cfn["pattern"])
        if api_pattern not in (cfn_pattern, f"({cfn_pattern})"):  # one group around the whole: the same
            applied = [p for p in (api_pattern, cfn_pattern) if p is not None]
            found.append(_row(path, shape_name, None, "pattern", api_pattern, cfn_pattern, applied))


def build() -> dict[str, Any]:
    """The table, from the installed botocore and cfn-lint."""
    model, botocore_version = botocore_model()
    schema, schema_source = cfn_schema()
    shapes = api_shapes(model)
    return {
        "about": "Generated by scripts/gen_api_constraints.py: do not edit; run the script.",
        "botocore": botocore_version,
        "source": f"botocore {botocore_version} service-2.json",
        "cfn_schema": schema_source,
        "operations": {op: f"{op}Request" for op in OPERATIONS},
        "shapes": shapes,
        "disagreements": disagreements(shapes, schema),
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed table is stale")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        if not TABLE.is_file() or TABLE.read_text() != text:
            print(f"{TABLE.relative_to(ROOT)} is stale: run scripts/gen_api_constraints.py", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
