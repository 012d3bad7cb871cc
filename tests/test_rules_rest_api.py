"""The ``rest_api`` section's rules: every problem of a bad section at once, each with its field path, and the
valid section passes; an off section is not judged."""

from __future__ import annotations

from typing import Any

from hyperpod_cdk.core.config import parse_model

CERTIFICATE = "arn:aws:acm:us-west-2:111122223333:certificate/12345678-1234-1234-1234-123456789012"
ROLE = "arn:aws:iam::111122223333:role/pipelines/ml-pipeline"
GOOD = {
    "certificate_arn": CERTIFICATE,
    "domain_name": "slurm.example.com",
    "allowed_cidrs": ["10.0.0.0/16"],
    "allowed_security_groups": ["sg-0123456789abcdef0"],
    "identities": [{"principal_arn": ROLE, "slurm_user": "alice"}],
}
USERS = [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002}]


def found(rest_api: dict[str, Any], **config: Any) -> list[tuple[str, str, str]]:
    problems = parse_model({"rest_api": rest_api, **config}).problems(region="us-west-2")
    return [(p.rule, p.path, p.level) for p in problems if p.rule.startswith(("REST-", "PRINCIPLE-"))]


def test_a_valid_section_has_no_problem() -> None:
    assert found(GOOD, users=USERS) == []
    assert found({**GOOD, "identities": [], "principal_tag": "slurm-user"}) == []


def test_every_problem_of_a_bad_section_is_reported_at_once() -> None:
    bad = {
        "port": 80,
        "allowed_cidrs": ["0.0.0.0/0", "10.0.0.0/33", "10.0.0.0/12"],
        "allowed_security_groups": ["sg-1"],
        "token_lifetime_s": 3601,
        "identities": [
            {"principal_arn": "arn:aws:sts::111122223333:assumed-role/ml-pipeline/s1", "slurm_user": "alice"},
            {"principal_arn": ROLE, "slurm_user": "carol"},
            {"principal_arn": "arn:aws:iam::111122223333:role/ml-pipeline", "slurm_user": "slurm"},
            {"principal_arn": "arn:aws:iam::111122223333:user/Ops", "slurm_user": "Bad Name"},
        ],
        "principal_tag": "aws:user",
    }
    assert found(bad, users=USERS) == [
        ("REST-CERTIFICATE", "rest_api.certificate_arn", "error"),
        ("REST-CERTIFICATE", "rest_api.domain_name", "error"),
        ("REST-PORT", "rest_api.port", "error"),
        ("REST-TOKEN-LIFETIME", "rest_api.token_lifetime_s", "error"),
        ("REST-CALLERS", "rest_api.allowed_cidrs[0]", "error"),
        ("REST-CALLERS", "rest_api.allowed_cidrs[1]", "error"),
        ("REST-CALLERS", "rest_api.allowed_security_groups[0]", "error"),
        ("REST-CIDR-WIDE", "rest_api.allowed_cidrs[2]", "warning"),
        ("REST-IDENTITY", "rest_api.identities[0].principal_arn", "error"),
        ("REST-IDENTITY", "rest_api.identities[1].slurm_user", "error"),
        ("REST-IDENTITY", "rest_api.identities[2].principal_arn", "error"),
        ("REST-IDENTITY", "rest_api.identities[2].slurm_user", "error"),
        ("REST-IDENTITY", "rest_api.identities[3].slurm_user", "error"),
        ("REST-PRINCIPAL-TAG", "rest_api.principal_tag", "error"),
    ]


def test_nobody_to_call_it_and_nobody_to_map_are_errors() -> None:
    assert found({**GOOD, "allowed_cidrs": [], "allowed_security_groups": [], "identities": []}) == [
        ("REST-CALLERS", "rest_api.allowed_cidrs", "error"),
        ("REST-IDENTITY", "rest_api.identities", "error"),
    ]


def test_without_declared_users_any_posix_name_but_root_and_slurm_maps() -> None:
    assert found({**GOOD, "identities": [{"principal_arn": ROLE, "slurm_user": "svc-train"}]}) == []
    assert found({**GOOD, "identities": [{"principal_arn": ROLE, "slurm_user": "root"}]}) == [
        ("REST-IDENTITY", "rest_api.identities[0].slurm_user", "error")
    ]


def test_a_certificate_in_another_region_is_refused_by_the_principle() -> None:
    other = CERTIFICATE.replace("us-west-2", "eu-west-1")
    assert found({**GOOD, "certificate_arn": other}) == [("PRINCIPLE-REGION", "rest_api.certificate_arn", "error")]


def test_a_section_turned_off_is_not_judged() -> None:
    assert found({"enabled": False, "port": 1}) == []
