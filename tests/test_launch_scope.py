"""What a team that launches a published product can reach (security review M7): a chosen data-repository bucket
is limited to the team's bucket-name prefix or a list (never any bucket of the account), and the Service Catalog
launch role may write a role's permissions only for roles that carry the product's permissions boundary."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from cfn_parameters import rejections
from hyperpod_cdk.core.config import load_file, parse_model
from hyperpod_cdk.core.template_parameters import bucket_name_id, template_parameters
from support import ROOT, build_example, fast_app

REPOSITORY = {"name": "datasets", "file_system_path": "/datasets", "bucket_name": "team-a-datasets"}
ROLE_WRITES = {
    "iam:AttachRolePolicy",
    "iam:CreateRole",
    "iam:DeleteRolePolicy",
    "iam:DetachRolePolicy",
    "iam:PutRolePermissionsBoundary",
    "iam:PutRolePolicy",
}


def config(choice: dict[str, Any], **repository: Any) -> dict[str, Any]:
    return {
        "storage": {"data_repositories": [{**REPOSITORY, **repository}]},
        "parameters": {"data_repositories": {"datasets": choice}},
    }


def scope_problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.path, str(p)) for p in parse_model(data).problems() if p.rule == "PAR-BUCKET-SCOPE"]


def test_any_bucket_of_the_account_is_refused_with_the_fix() -> None:
    [(path, text)] = scope_problems(config({"bucket_name": True}))
    assert path == "parameters.data_repositories.datasets.bucket_name"
    assert "link any bucket of the account" in text and "bucket_name_prefix" in text
    assert scope_problems(config({"bucket_name": True, "bucket_name_prefix": "team-a-"})) == []
    assert scope_problems(config({"bucket_name": ["team-a-datasets", "team-a-archive"]})) == []


@pytest.mark.parametrize(
    ("choice", "path", "words"),
    [
        ({"bucket_name": True, "bucket_name_prefix": "team-b-"}, "storage.data_repositories[0].bucket_name", "start"),
        ({"bucket_name": True, "bucket_name_prefix": "Team_"}, "datasets.bucket_name_prefix", "1-40 lower-case"),
        ({"bucket_name": ["team-a-archive"]}, "datasets.bucket_name", "must include"),
        ({"bucket_name": ["team-a-datasets", "Bad_Bucket"]}, "datasets.bucket_name[1]", "lower-case"),
        ({"bucket_name": ["team-a-datasets"], "bucket_name_prefix": "team-a-"}, "bucket_name_prefix", "applies to"),
    ],
)
def test_a_scope_that_does_not_hold_its_default_or_is_malformed_is_refused(
    choice: dict[str, Any], path: str, words: str
) -> None:
    found = scope_problems(config(choice))
    assert any(p.endswith(path) and words in text for p, text in found), found


def test_the_refusal_may_be_suppressed_with_a_reason() -> None:
    data = {**config({"bucket_name": True}), "suppress": [{"rule": "PAR-BUCKET-SCOPE", "reason": "one-team account"}]}
    assert scope_problems(data) == []


def test_a_launch_cannot_link_a_bucket_outside_the_teams_prefix_or_list() -> None:
    prefixed = template_parameters(parse_model(config({"bucket_name": True, "bucket_name_prefix": "team-a-"})))
    [parameter] = [p for p in prefixed if p.logical_id == bucket_name_id("datasets")]
    cfn = {"Type": "String", "AllowedPattern": parameter.allowed_pattern, "MaxLength": parameter.max_length}
    assert rejections(cfn, "team-a-datasets") == [] and rejections(cfn, "team-a-raw.v2") == []
    assert rejections(cfn, "payroll-exports") and rejections(cfn, "team-ab") and rejections(cfn, "xteam-a-data")
    listed = template_parameters(parse_model(config({"bucket_name": ["team-a-datasets", "team-a-archive"]})))
    [parameter] = [p for p in listed if p.logical_id == bucket_name_id("datasets")]
    assert parameter.allowed_values == ("team-a-datasets", "team-a-archive") and parameter.allowed_pattern is None


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Service Catalog example's portfolio template and its product's template."""
    outdir = tmp_path_factory.mktemp("catalog")
    [stack] = build_example(ROOT / "examples" / "service_catalog.py", fast_app(outdir=str(outdir)))
    stack.node.root.synth()  # type: ignore[attr-defined]
    [product] = outdir.glob("*.product.template.json")
    return json.loads((outdir / f"{stack.stack_name}.template.json").read_text()), json.loads(product.read_text())


def statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_launch_role_writes_role_permissions_only_for_roles_with_the_products_boundary(
    catalog: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    portfolio, product = catalog
    [(boundary_id, boundary)] = [
        (k, r) for k, r in portfolio["Resources"].items() if r["Type"] == "AWS::IAM::ManagedPolicy"
    ]
    writing = [s for s in statements(portfolio) if ROLE_WRITES & set(s["Action"])]
    [only] = writing  # no other statement lets the launch role write a role's permissions
    assert set(only["Action"]) == ROLE_WRITES
    assert only["Condition"] == {"StringEquals": {"iam:PermissionsBoundary": {"Ref": boundary_id}}}
    # Every role of the product carries that boundary, by the name the portfolio gives it.
    name = boundary["Properties"]["ManagedPolicyName"]
    expected = {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, f":policy/{name}"]]
    }
    roles = [r for r in product["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    assert roles and all(r["Properties"].get("PermissionsBoundary") == expected for r in roles)
    # The boundary lets no role the product creates change identities, the organization or the account.
    [deny] = [s for s in boundary["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert set(deny["Action"]) == {"iam:*", "organizations:*", "account:*"} and deny["Resource"] == "*"


def test_the_example_template_scopes_its_bucket_choice() -> None:
    example = parse_model(load_file(ROOT / "examples" / "platform-template.yaml"))
    [parameter] = [p for p in template_parameters(example) if p.logical_id == bucket_name_id("datasets")]
    assert parameter.allowed_pattern and parameter.allowed_pattern.startswith("^(?=example-team-)")


def test_with_an_organizations_boundary_the_launch_role_requires_that_one() -> None:
    """OrganizationRules on the app put the organization's boundary on every role, the product's too: the launch
    role then requires it (``boundary_of``), and the example creates no boundary of its own."""
    from hyperpod_cdk import OrganizationRules

    organization = "arn:aws:iam::111122223333:policy/TeamBoundary"
    app = fast_app()
    OrganizationRules(permission_boundary_arn=organization).apply(app)
    [stack] = build_example(ROOT / "examples" / "service_catalog.py", app)
    template = Template.from_stack(stack).to_json()
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::ManagedPolicy"]
    [only] = [s for s in statements(template) if ROLE_WRITES & set(s["Action"])]
    assert only["Condition"] == {"StringEquals": {"iam:PermissionsBoundary": organization}}
