"""The principles (rules/principles.py, and the scoped rows of data/api_support.yaml): each class of the field map
(data/fields.yaml) is enumerated from the map, and every field of it is set in a config and judged: a field added to
the map with a class is tested here without a line, or the test names what it needs (a sample, a base)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.aws_data import fields as fm
from hyperpod_cdk.aws_data.api_support import support_table
from hyperpod_cdk.aws_data.inventory import row as inventory_row
from hyperpod_cdk.aws_data.inventory_checks import apply_patch
from hyperpod_cdk.core.api_request import cluster_request
from hyperpod_cdk.core.config import load_file, parse_model
from hyperpod_cdk.rules import REGISTRY, ClusterView
from hyperpod_cdk.rules.field_values import APPLIED_WHEN, member_fields, values_at
from hyperpod_cdk.rules.principles import (
    ELSEWHERE,
    NO_KEY_CHANGE_QUOTE,
    SAME_REGION_QUOTE,
    arn_region,
    endpoint_region,
    region_class,
    region_fields,
)

ROOT = Path(__file__).resolve().parent.parent
BASE = load_file(ROOT / "examples" / "continuous-cluster.yaml")
"""Continuous provisioning, keys, external accounting, OpenZFS: most classed fields have a place in it."""
STACK, OTHER = "us-west-2", "eu-central-1"
ACCOUNT = "111122223333"
PARENTS: dict[str, dict[str, Any]] = {
    "storage": {
        "existing": {
            "file_system_id": "fs-0123456789abcdef0",
            "mount_name": "abcdefgh",
            "security_group_id": "sg-0123456789abcdef0",
        }
    },
    "storage_openzfs": {
        "existing": {"file_system_id": "fs-0123456789abcdef1", "security_group_id": "sg-0123456789abcdef2"},
        "mount_path": "/home",
    },
    "rest_api": {
        "allowed_cidrs": ["10.0.0.0/16"],
        "domain_name": "slurm.example.com",
        "identities": [{"principal_arn": "arn:aws:iam::111122223333:role/pipeline", "slurm_user": "pipeline"}],
    },
}
"""What a section needs around a field that adopts an existing resource (the section replaces the base's)."""
ARN_RESOURCES = {
    "sagemaker": "training-plan/p5-plan",
    "kms": "key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "secretsmanager": "secret:slurm-accounting-AbCdEf",
    "aps": "workspace/ws-12345678-abcd-1234-abcd-123456789012",
    "iam": "policy/boundary",
    "acm": "certificate/12345678-1234-1234-1234-123456789012",
}
"""A resource of each service an ``arn:<service>`` field names (a new service: add one)."""
REGIONLESS = {"iam"}
"""Services whose ARNs have no Region part (IAM is global): PRINCIPLE-REGION does not judge them, by design."""


def sample(f: fm.Field, region: str) -> str:
    """A value of ``f``'s Region-bound class in ``region``."""
    name = region_class(f)
    if name == "arn:":
        service = next(c for c in f.classes if c.startswith("arn:")).removeprefix("arn:")
        return f"arn:aws:{service}:{'' if service in REGIONLESS else region}:{ACCOUNT}:{ARN_RESOURCES[service]}"
    if name == "endpoint":
        return f"fs-0123456789abcdef0.fsx.{region}.amazonaws.com"
    assert name == "az", f"{f.path}: no sample for class {f.classes}"
    return f"{region}a"


def dotted(data: Any, f: fm.Field) -> str:
    """The dotted patch path of ``f`` in ``data``: a list's last item."""
    parts: list[str] = []
    node = data
    for step in re.findall(r"\[\]|[^.\[\]]+", f.path):
        if step == "[]":
            index = len(node) - 1 if isinstance(node, list) else 0
            parts.append(str(index))
            node = node[index] if isinstance(node, list) else None
        else:
            parts.append(step)
            node = node.get(step) if isinstance(node, dict) else None
    return ".".join(parts)


def concrete(dotted_path: str) -> str:
    return re.sub(r"\.(\d+)", r"[\1]", dotted_path)


def with_field(f: fm.Field, value: Any, base: Any = BASE, **patch: Any) -> tuple[Any, str]:
    """``base`` with ``f`` set to ``value`` (and ``patch``), and the field's concrete path."""
    data = apply_patch(base, {f.section: PARENTS[f.section]} if f.section in PARENTS else {})
    where = dotted(data, f)
    return apply_patch(data, {**patch, where: value}), concrete(where)


def problems(data: Any, region: str | None = STACK, previous: Any = None) -> list[Any]:
    config = parse_model(data)
    return config.problems(region=region, previous=parse_model(previous) if previous is not None else None)


def at(found: list[Any], rule: str, path: str) -> list[Any]:
    return [p for p in found if p.rule == rule and p.path == path]


REGION_FIELDS = region_fields()
VOLUME_KEY_FIELDS = fm.of_class("volume-key")


def test_every_class_has_fields_and_every_field_a_known_class() -> None:
    assert {f.path for f in REGION_FIELDS} >= {"instance_groups[].training_plan_arn", "network.availability_zone"}
    assert {f.path for f in VOLUME_KEY_FIELDS} == {"instance_groups[].volume_kms_key_arn", "organization.kms_key_arn"}
    for f in fm.fields():
        for given in f.classes:
            assert given.startswith(fm.CLASSES[0]) or given in fm.CLASSES, f"{f.path}: unknown class {given}"


def test_the_quotes_are_the_inventory_rows() -> None:
    assert SAME_REGION_QUOTE.strip('"') == inventory_row("prereq-same-region").quote
    assert NO_KEY_CHANGE_QUOTE.strip('"') == inventory_row("cmk-no-key-change").quote


# --- PRINCIPLE-REGION ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("f", REGION_FIELDS, ids=lambda f: f.path)
def test_the_principle_reads_every_region_bound_field(f: fm.Field) -> None:
    """values_at finds the value where the config sets it (a map path the model does not have raises)."""
    data, where = with_field(f, sample(f, STACK))
    view = ClusterView.of_config(parse_model(data), region=STACK)
    assert (where, sample(f, STACK)) in values_at(view, f)


@pytest.mark.parametrize("f", REGION_FIELDS, ids=lambda f: f.path)
def test_a_region_bound_field_in_another_region_is_refused(f: fm.Field) -> None:
    data, where = with_field(f, sample(f, OTHER))
    found = problems(data)
    service = next((c for c in f.classes if c.startswith("arn:")), "").removeprefix("arn:")
    if service in REGIONLESS:
        assert at(found, "PRINCIPLE-REGION", where) == [], "an ARN without a Region part is not judged"
    elif f.path in ELSEWHERE:
        assert at(found, "PRINCIPLE-REGION", where) == []
        assert [p.level for p in at(found, ELSEWHERE[f.path], where)] == ["warning"]
    else:
        (problem,) = at(found, "PRINCIPLE-REGION", where)
        assert problem.level == "error" and f"in {OTHER}, but the cluster is in {STACK}" in str(problem)
        assert "same AWS Region as the SageMaker HyperPod cluster" in str(problem)


@pytest.mark.parametrize("f", REGION_FIELDS, ids=lambda f: f.path)
def test_a_region_bound_field_in_the_stacks_region_passes(f: fm.Field) -> None:
    data, _ = with_field(f, sample(f, STACK))
    assert [str(p) for p in problems(data) if p.rule == "PRINCIPLE-REGION"] == []


def test_a_workspace_in_another_region_warns_only() -> None:
    """The nodes' metrics agent signs for the workspace's own Region (docs/observability.md), and HyperPod is not
    given the ARN: OBS-WORKSPACE-REGION warns of the distance, the principle does not refuse it."""
    workspace = fm.field("observability.workspace_arn")
    data, where = with_field(workspace, sample(workspace, OTHER))
    found = problems(data)
    assert at(found, "PRINCIPLE-REGION", where) == []
    assert [p.level for p in at(found, "OBS-WORKSPACE-REGION", where)] == ["warning"]


def test_without_a_region_the_zone_is_the_clusters_and_without_either_nothing_is_judged() -> None:
    plan = fm.field("instance_groups[].training_plan_arn")
    data, where = with_field(plan, sample(plan, OTHER))
    assert [p for p in problems(data, region=None) if p.rule == "PRINCIPLE-REGION"] == []
    zoned = apply_patch(data, {"network.availability_zone": f"{STACK}b"})
    (problem,) = [p for p in problems(zoned, region=None) if p.rule == "PRINCIPLE-REGION"]
    assert problem.path == where and f"the Region of network.availability_zone {STACK}b" in str(problem)


@pytest.mark.parametrize(
    ("value", "region"),
    [
        ("arn:aws:kms:us-west-2:111122223333:key/1", "us-west-2"),
        ("arn:aws-cn:sagemaker:cn-north-1:111122223333:training-plan/p", "cn-north-1"),
        ("arn:aws:iam::111122223333:policy/boundary", None),
        ("alias/team", None),
    ],
)
def test_an_arn_says_its_region_or_none(value: str, region: str | None) -> None:
    assert arn_region(value) == region


@pytest.mark.parametrize(
    ("name", "region"),
    [
        ("fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", "us-west-2"),
        ("slurm-accounting.cluster-abcdefghijkl.eu-west-1.rds.amazonaws.com", "eu-west-1"),
        ("my-db-1.abc.us-east-2.rds.amazonaws.com.", "us-east-2"),
        ("db.cn-north-1.rds.amazonaws.com.cn", "cn-north-1"),
        ("accounting.internal.example.com", None),
        ("10.0.0.12", None),
    ],
)
def test_an_endpoint_says_its_region_only_next_to_the_service(name: str, region: str | None) -> None:
    assert endpoint_region(name) == region


def test_a_construct_view_is_judged_too() -> None:
    """PRINCIPLE-REGION runs on every view (registry.EVERY_VIEW): ClusterNetwork's own view has only ``network``."""
    from hyperpod_cdk.core.config import NetworkConfig
    from hyperpod_cdk.rules import check

    view = ClusterView(
        sections=frozenset({"network"}),
        network=NetworkConfig(availability_zone="us-east-1a"),
        region=STACK,
        paths={"network": ""},
    )
    assert [(p.rule, p.path) for p in check(view)] == [("PRINCIPLE-REGION", "availability_zone")]


# --- the volume key: format, continuous provisioning, no key change -------------------------------------------------

KEY_A = f"arn:aws:kms:{STACK}:{ACCOUNT}:key/aaaaaaaa-12ab-34cd-56ef-1234567890ab"
KEY_B = f"arn:aws:kms:{STACK}:{ACCOUNT}:key/bbbbbbbb-12ab-34cd-56ef-1234567890ab"
OWN_KEYS_REMOVED = {f"instance_groups.{i}.volume_kms_key_arn": None for i in range(len(BASE["instance_groups"]))}
"""The base's groups without their own keys: a default key (the organization's) reaches them."""


@pytest.mark.parametrize("f", VOLUME_KEY_FIELDS, ids=lambda f: f.path)
def test_a_volume_key_that_is_no_key_arn_is_refused(f: fm.Field) -> None:
    data, where = with_field(f, "alias/team")
    assert [p for p in problems(data) if p.path == where and p.level == "error"], "no rule judges the key's form"


@pytest.mark.parametrize("f", VOLUME_KEY_FIELDS, ids=lambda f: f.path)
def test_a_volume_key_reaches_the_volumes_only_with_continuous_provisioning(f: fm.Field) -> None:
    """The CMK page: customer managed keys only with continuous provisioning. A field an aspect writes only there
    (APPLIED_WHEN: the organization's key, tests/test_organization.py shows the template) warns that it does not."""
    data, where = with_field(f, KEY_A, node_provisioning_mode=None)
    found = problems(data)
    if APPLIED_WHEN.get(f.path) == "continuous-only":
        assert at(found, "GRP-VOLUME-KEY-CONTINUOUS", where) == []
        assert [p.level for p in at(found, "ORG-VOLUME-KEY-CONTINUOUS", where)] == ["warning"]
    else:
        assert [p.level for p in at(found, "GRP-VOLUME-KEY-CONTINUOUS", where)] == ["error"]
    continuous, _ = with_field(f, KEY_A)
    assert [p for p in problems(continuous) if p.rule.endswith("VOLUME-KEY-CONTINUOUS")] == []


def _key_changes(found: list[Any], where: str) -> list[Any]:
    return [p for p in found if p.path == where and p.rule in ("UPD-REFUSED", "PRINCIPLE-VOLUME-KEY")]


@pytest.mark.parametrize("f", VOLUME_KEY_FIELDS, ids=lambda f: f.path)
def test_an_existing_groups_volume_key_does_not_change_whatever_field_sets_it(f: fm.Field) -> None:
    base = BASE if f.section == "instance_groups" else apply_patch(BASE, OWN_KEYS_REMOVED)
    before, where = with_field(f, KEY_A, base)
    after, _ = with_field(f, KEY_B, base)
    (problem,) = _key_changes(problems(after, previous=before), where)
    assert problem.level == "error" and "KMS key transition isn't currently supported" in str(problem)
    assert _key_changes(problems(before, previous=before), where) == []
    unset = apply_patch(before, {dotted(before, f): None})
    assert _key_changes(problems(before, previous=unset), where), "a key added to an existing group"
    assert _key_changes(problems(unset, previous=before), where), "a key removed from an existing group"


def test_the_organizations_key_changes_nothing_where_it_does_not_reach() -> None:
    org = fm.field("organization.kms_key_arn")
    before, where = with_field(org, KEY_A, apply_patch(BASE, OWN_KEYS_REMOVED))
    after, _ = with_field(org, KEY_B, apply_patch(BASE, OWN_KEYS_REMOVED))
    # Every group keeps a key of its own: the organization's reaches none of them.
    own = {f"instance_groups.{i}.volume_kms_key_arn": KEY_A for i in range(len(BASE["instance_groups"]))}
    assert at(problems(apply_patch(after, own), previous=apply_patch(before, own)), "PRINCIPLE-VOLUME-KEY", where) == []
    # Without continuous provisioning it reaches no node volume (the groups keep AWS's key).
    plain = {"node_provisioning_mode": None}
    assert (
        at(problems(apply_patch(after, plain), previous=apply_patch(before, plain)), "PRINCIPLE-VOLUME-KEY", where)
        == []
    )
    # A new group takes the new key.
    grown = apply_patch(after, {"instance_groups.3": {"name": "more", "instance_type": "ml.c5.4xlarge", "count": 1}})
    (problem,) = at(problems(grown, previous=before), "PRINCIPLE-VOLUME-KEY", where)
    assert "more" not in str(problem).split("existing instance group(s) ")[1].split(" from ")[0]


# --- continuous-only and EKS-only members, by member ----------------------------------------------------------------

SCOPED = [r for r in support_table() if r.scope]
SAMPLES: dict[str, Any] = {
    "instance_groups[].min_count": 1,
    "instance_groups[].instance_types": ["ml.c5.4xlarge", "ml.c5.9xlarge"],
    "instance_groups[].deep_health_checks": ["InstanceStress"],
    "instance_groups[].volume_kms_key_arn": KEY_A,
    "organization.kms_key_arn": KEY_A,
    "instance_groups[].auto_patch": {"strategy": "when-idle"},
    "instance_groups[].scheduled_update.deployment": {"wait_interval_s": 120},
    "instance_groups[].image_release_version": "1.2.3",
}
"""A value that sets each field sending a value to a scoped member (a new field: add one)."""
PLAIN_BASE = {"instance_groups": [{"name": "c", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}]}


def _outermost(fields: tuple[fm.Field, ...]) -> list[fm.Field]:
    paths = {f.path for f in fields}
    return [f for f in fields if not any(f.path.startswith((p + ".", p + "[")) for p in paths if p != f.path)]


CASES = [(row, f) for row in SCOPED for f in _outermost(member_fields(row.member)) if row.rule is not None]


@pytest.mark.parametrize(("row", "f"), CASES, ids=[f"{r.id}:{f.path}" for r, f in CASES])
def test_a_scoped_members_rule_judges_every_field_that_sets_it(row: Any, f: fm.Field) -> None:
    group = {
        "name": "w",
        "instance_type": "ml.c5.4xlarge",
        "count": 2,
        "scheduled_update": {"schedule_expression": "cron(0 3 ? * SUN *)"},
    }
    base = apply_patch(PLAIN_BASE, {"instance_groups.1": group, "accept_unconfirmed": []})
    assert f.path in SAMPLES, f"{f.path} sends a value to {row.member} ({row.id}): add a sample to SAMPLES"
    data, where = with_field(f, SAMPLES[f.path], base)
    found = problems(data)
    mine = at(found, row.rule, where)
    if APPLIED_WHEN.get(f.path) == row.scope:
        assert mine == [], f"{f.path} reaches {row.member} only where {row.scope} holds"
        return
    assert [p.level for p in mine] == [row.level], [str(p) for p in found if p.rule == row.rule]
    if row.scope == "continuous-only":
        assert at(problems(apply_patch(data, {"node_provisioning_mode": "continuous"})), row.rule, where) == []


def test_a_scoped_row_without_a_rule_holds_by_construction() -> None:
    """accounting-continuous: the request carries AccountingDatabase only with continuous provisioning."""
    assert {r.id for r in SCOPED if r.rule is None} == {"accounting-continuous"}
    view = ClusterView.of_config(parse_model(apply_patch(BASE, {"node_provisioning_mode": None})), region=STACK)
    assert "AccountingDatabase" not in cluster_request(view)["Orchestrator"]["Slurm"]
    view = ClusterView.of_config(parse_model(BASE), region=STACK)
    assert "AccountingDatabase" in cluster_request(view)["Orchestrator"]["Slurm"]


def test_every_scoped_rows_rule_is_registered_at_its_level() -> None:
    levels = {r.id: r.level for r in REGISTRY.rules}
    for row in SCOPED:
        assert row.rule is None or levels[row.rule] == row.level, row.id
