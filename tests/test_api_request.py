"""The CreateCluster request ``validate`` checks (:func:`hyperpod_cdk.core.api_request.cluster_request`) is the one the
construct renders: for every example, equal to the cluster's properties in its synthesized template (the committed
snapshots, which tests/test_snapshots.py keeps current), member by member; it carries every member the API model
requires; and every member the templates emit is in the constraint table, so none goes unchecked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.aws_data.api_constraints import table
from hyperpod_cdk.core.api_request import cluster_request, is_unknown
from hyperpod_cdk.core.config import load_file, parse_model
from hyperpod_cdk.rules.view import ClusterView
from support import ROOT

EXAMPLES = sorted(
    (path, snapshot)
    for path in (ROOT / "examples").glob("*.yaml")
    for snapshot in (ROOT / "tests" / "snapshots").glob(f"{path.stem}.*.json")
    if "Resources" in json.loads(snapshot.read_text())
)


def _intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and any(k == "Ref" or k.startswith("Fn::") for k in value)


def _differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    if is_unknown(ours) or _intrinsic(theirs):
        return []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if set(ours) != set(theirs):
            return [f"{path}: members {sorted(ours)} != {sorted(theirs)}"]
        return [d for k in ours for d in _differences(ours[k], theirs[k], f"{path}.{k}")]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [
            d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in _differences(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path}: {ours!r} != {theirs!r}"]


def _cluster(snapshot: Path) -> dict[str, Any]:
    resources = json.loads(snapshot.read_text())["Resources"].values()
    (properties,) = [r["Properties"] for r in resources if r["Type"] == "AWS::SageMaker::Cluster"]
    return dict(properties)


def _request(path: Path) -> dict[str, Any]:
    return cluster_request(ClusterView.of_config(parse_model(load_file(path))))


@pytest.mark.parametrize(("example", "snapshot"), EXAMPLES, ids=[e.stem for e, _ in EXAMPLES])
def test_the_request_is_the_rendered_clusters_properties(example: Path, snapshot: Path) -> None:
    assert _differences(_request(example), _cluster(snapshot)) == []


def _missing_required(shape_name: str, value: Any, path: str) -> list[str]:
    shape = table()["shapes"][shape_name]
    if shape["type"] == "list" and isinstance(value, list):
        return [m for i, v in enumerate(value) for m in _missing_required(shape["member"], v, f"{path}[{i}]")]
    if shape["type"] != "structure" or not isinstance(value, dict):
        return []
    missing = [f"{path}.{m}" for m in shape["required"] if m not in value]
    for member, child in shape["members"].items():
        if member in value:
            missing += _missing_required(child, value[member], f"{path}.{member}")
    return missing


@pytest.mark.parametrize(("example", "snapshot"), EXAMPLES, ids=[e.stem for e, _ in EXAMPLES])
def test_every_required_member_is_rendered_and_every_rendered_member_is_checked(example: Path, snapshot: Path) -> None:
    assert _missing_required("CreateClusterRequest", _request(example), "") == []

    def unchecked(shape_name: str, value: Any, path: str) -> list[str]:
        shape = table()["shapes"][shape_name]
        if _intrinsic(value):
            return []
        if shape["type"] == "list" and isinstance(value, list):
            return [u for i, v in enumerate(value) for u in unchecked(shape["member"], v, f"{path}[{i}]")]
        if shape["type"] != "structure" or not isinstance(value, dict):
            return []
        found = [f"{path}.{m}" for m in value if m not in shape["members"]]
        return found + [
            u
            for m, v in value.items()
            if m in shape["members"]
            for u in unchecked(shape["members"][m], v, f"{path}.{m}")
        ]

    assert unchecked("CreateClusterRequest", _cluster(snapshot), "") == []


def test_every_example_has_a_snapshot_to_hold_its_request_against() -> None:
    assert {e.stem for e, _ in EXAMPLES} == {p.stem for p in (ROOT / "examples").glob("*.yaml")}
