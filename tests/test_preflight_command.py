"""`hyperpod-cdk preflight` and `validate --online`: output, exit statuses, permissions, concurrency, the policy."""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_cdk.ops.context import OpsContext, make_session
from hyperpod_cdk.preflight import command
from hyperpod_cdk.preflight.online import ACTIONS, online_rules, policy
from ops_support import ACCOUNT, REGION, Run, aws_env, moto_url  # noqa: F401
from preflight_support import (  # noqa: F401
    NOW,
    P5,
    AccountFakes,
    MotoAccount,
    acct_fixture,
    check,
    config,
    deployed_stack,
    moto_extras,
    plan,
)
from test_ops_startup import run_cli
from test_preflight_resources import NO_ROOT_POLICY

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Preflight:
    """Runs the preflight command line in-process with the fakes installed in its session."""

    tmp_path: Path
    fakes: AccountFakes = field(default_factory=AccountFakes)

    def session(self, profile: str | None, region: str | None) -> Any:
        session = make_session(profile, region)
        self.fakes.install(session)
        return session

    def __call__(self, data: dict[str, Any] | None, *args: str, verb: str = "preflight") -> Run:
        path = self.tmp_path / "cluster.yaml"
        if data is not None:
            path.write_text(yaml.safe_dump(data))
        out, err = io.StringIO(), io.StringIO()
        ctx = OpsContext(session_factory=self.session, now=lambda: NOW.timestamp(), stdout=out, stderr=err)
        parser_args = [verb, str(path), *args] if data is not None else [verb, *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # offline validate prints there
            code = run_via_cli(parser_args, ctx)
        return Run(code, out.getvalue(), err.getvalue())


def run_via_cli(argv: list[str], ctx: OpsContext) -> int:
    """hyperpod-cdk's own parser and dispatch, with the preflight context injected."""
    from hyperpod_cdk import cli

    original = command.dispatch
    command.dispatch = lambda args, _ctx=None: original(args, ctx)  # type: ignore[assignment]
    try:
        return cli.main(argv)
    finally:
        command.dispatch = original  # type: ignore[assignment]


pytestmark = pytest.mark.usefixtures("aws_env")


@pytest.fixture
def preflight(tmp_path: Path) -> Preflight:
    return Preflight(tmp_path, AccountFakes(quotas={f"{P5} for cluster usage": 8, "ml.m5.xlarge for cluster usage": 4}))


def test_good_account_passes_with_a_summary(acct: MotoAccount, preflight: Preflight) -> None:
    result = preflight(config(acct))
    assert result.code == 0, result.out + result.err
    assert f"passed preflight: 0 error(s), 0 warning(s) in account {ACCOUNT}, {REGION}" in result.out


def test_errors_are_a_table_and_exit_1(acct: MotoAccount, preflight: Preflight) -> None:
    acct.cluster("other", P5, 6)
    data = config(acct, organization={"kms_key_arn": acct.key(policy=NO_ROOT_POLICY)})
    result = preflight(data)
    assert result.code == 1
    for column in ("level", "rule", "field", "found", "problem", "fix"):
        assert column in result.out
    assert "AWS-QUOTA" in result.out and "instance_groups[1].count" in result.out  # [1] survives rich markup
    assert "AWS-KMS" in result.out and "organization.kms_key_arn" in result.out
    assert "2 error(s), 0 warning(s)" in result.err and "fix them before cdk deploy" in result.err


def test_json_carries_every_problem_in_the_registry_shape(acct: MotoAccount, preflight: Preflight) -> None:
    acct.cluster("other", P5, 6)
    result = preflight(config(acct), "--json")
    assert result.code == 1
    report = result.json()
    assert (report["account"], report["region"], report["valid"]) == (ACCOUNT, REGION, False)
    [problem] = report["problems"]
    assert set(problem) == {"path", "got", "expected", "fix", "rule", "level", "message"}
    assert (problem["rule"], problem["path"], problem["got"], problem["level"]) == (
        "AWS-QUOTA",
        "instance_groups[1].count",
        4,
        "error",
    )


def test_access_denied_is_a_warning_and_strict_fails_on_it(acct: MotoAccount, preflight: Preflight) -> None:
    preflight.fakes.fail[("ec2", "DescribeSubnets")] = ("UnauthorizedOperation", "You are not authorized")
    preflight.fakes.fail[("ec2", "DescribeVpcs")] = ("UnauthorizedOperation", "You are not authorized")
    result = preflight(config(acct), "--json")
    assert result.code == 0, result.out
    warned = {(p["rule"], p["path"]): p for p in result.json()["problems"]}
    assert set(warned) == {("AWS-SUBNET", "network.subnet_id"), ("AWS-VPC", "network.vpc_id")}
    subnet = warned[("AWS-SUBNET", "network.subnet_id")]
    assert subnet["level"] == "warning"
    assert subnet["expected"] == "could not be checked: ec2:DescribeSubnets access denied"
    assert subnet["got"] == acct.subnet  # which resource went unchecked
    assert "--policy" in subnet["fix"]
    assert preflight(config(acct), "--strict").code == 1


def test_an_api_missing_in_the_region_is_a_warning(acct: MotoAccount, preflight: Preflight) -> None:
    preflight.fakes.fail[("sagemaker", "ListClusters")] = ("UnknownOperationException", "unknown operation")
    result = preflight(config(acct), "--json")
    assert result.code == 0
    problems = result.json()["problems"]  # the rules that look the clusters up: each could not check
    assert {p["rule"] for p in problems} == {"AWS-QUOTA", "UPD-DEPLOYED"} and len(problems) == 2
    for problem in problems:
        assert problem["level"] == "warning"
        assert "sagemaker:ListClusters not available in us-west-2" in problem["expected"]


def test_a_rule_that_breaks_is_a_warning_not_a_crash(acct: MotoAccount, preflight: Preflight) -> None:
    preflight.fakes.quotas = {f"{P5} for cluster usage": "lots"}  # type: ignore[dict-item]  # an answer no rule expects
    result = preflight(config(acct), "--json")
    assert result.code == 0
    [problem] = result.json()["problems"]
    assert problem["level"] == "warning" and problem["expected"].startswith("could not be checked: ValueError")


def test_usage_credentials_and_shape_errors(
    acct: MotoAccount, preflight: Preflight, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert preflight(None).code == 2
    assert "needs a CONFIG" in preflight(None).err
    bad = preflight({"instance_groups": "none"})
    assert bad.code == 1 and "instance_groups" in bad.out + bad.err
    profile = preflight(config(acct), "--profile", "nobody")
    assert profile.code == 4 and "nobody" in profile.err
    monkeypatch.delenv("AWS_REGION")
    no_region = preflight(config(acct))
    assert no_region.code == 2 and "no AWS Region" in no_region.err
    monkeypatch.setenv("AWS_REGION", REGION)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    result = preflight(config(acct))
    assert result.code == 4 and "no AWS credentials" in result.err


def test_validate_online_adds_the_account_findings(acct: MotoAccount, preflight: Preflight) -> None:
    acct.cluster("other", P5, 6)
    result = preflight(config(acct), "--online", "--json", verb="validate")
    assert result.code == 1
    rules = [p["rule"] for p in result.json()["problems"]]
    assert "AWS-QUOTA" in rules
    offline = preflight(config(acct), "--json", verb="validate")
    assert "AWS-QUOTA" not in [p["rule"] for p in offline.json()["problems"]]


def test_rules_run_concurrently(acct: MotoAccount, preflight: Preflight) -> None:
    """Two rules' first calls meet at a barrier: run one after the other, the barrier breaks (5 s) and both warn."""
    barrier = threading.Barrier(2, timeout=5)

    def meet(**_: Any) -> None:
        barrier.wait()

    session_factory = preflight.session

    def session(profile: str | None, region: str | None) -> Any:
        found = session_factory(profile, region)
        found.events.register("before-call.ec2.DescribeVpcs", meet)
        found.events.register("before-call.iam.GetPolicy", meet)
        return found

    preflight.session = session  # type: ignore[method-assign]
    arn = acct.iam.create_policy(
        PolicyName="b",
        PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        ),
    )["Policy"]["Arn"]
    result = preflight(config(acct, organization={"permission_boundary_arn": arn}), "--json")
    assert result.json()["problems"] == [], result.out


# --- least privilege ----------------------------------------------------------------------------------------------
def full_config(acct: MotoAccount, fakes: AccountFakes) -> dict[str, Any]:
    """A config that names every kind of existing resource, so every rule makes every call it can."""
    fakes.plans["plan"] = plan("plan")
    key = acct.key()
    fs_id = acct.file_system("LUSTRE", acct.sg, LustreConfiguration={"MountName": "abcdef"})
    zfs = acct.file_system("OPENZFS", acct.sg)
    secret = acct.secrets.create_secret(Name="db", SecretString='{"username": "u", "password": "p"}')["ARN"]
    boundary = acct.iam.create_policy(
        PolicyName="b",
        PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        ),
    )["Policy"]["Arn"]
    data = config(
        acct,
        node_provisioning_mode="continuous",
        lifecycle={"bucket_name": acct.bucket("sagemaker-scripts", key=key)},
        storage={"existing": {"file_system_id": fs_id, "mount_name": "abcdef", "security_group_id": acct.sg}},
        storage_openzfs={
            "existing": {
                "file_system_id": zfs,
                "dns_name": f"{zfs}.fsx.{REGION}.amazonaws.com",
                "security_group_id": acct.sg,
            }
        },
        organization={
            "kms_key_arn": key,
            "permission_boundary_arn": boundary,
            "access_logs_bucket": acct.bucket("logs"),
        },
        observability={"workspace_arn": acct.amp.create_workspace(alias="m")["arn"]},
        runtime={
            "accounting": {
                "enabled": True,
                "database": "external",
                "host": "db.example.com",
                "password_secret_arn": secret,
            }
        },
    )
    data["instance_groups"][1].update(
        training_plan_arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/plan", image_id=acct.image()
    )
    data["network"]["availability_zone"] = None  # the nodes' AZ comes from the subnet
    acct.cluster("other", P5, 1)  # DescribeCluster runs for each cluster in the account
    return data


@pytest.mark.slow  # handed out first (tests/conftest.py)
def test_each_rule_calls_exactly_the_actions_it_declares(acct: MotoAccount) -> None:
    fakes = AccountFakes(quotas={f"{P5} for cluster usage": 8, "ml.m5.xlarge for cluster usage": 4})
    data = full_config(acct, fakes)
    # A new Multi-AZ OpenZFS file system instead of the adopted one (its standby subnet is looked up).
    multi_az = {**data, "storage_openzfs": {"deployment_type": "MULTI_AZ_1", "standby_subnet_id": acct.other_subnet}}
    # A full subnet (whose shortfall is weighed against what a running cluster of this name holds).
    crowded = {**data, "network": {**data["network"], "subnet_id": acct.make_subnet("10.0.32.0/26", "us-west-2a")}}
    # A scaled group (whose deployed count is looked up).
    workers = {**data["instance_groups"][1], "scaling": {"min": 0, "max": 8}}
    scaled = {**data, "instance_groups": [data["instance_groups"][0], workers]}
    # An EFA group on subnets of its own (whose AZ is looked up against the partition's other EFA groups).
    split = {
        **data["instance_groups"][1],
        "override_vpc": {"subnet_ids": [acct.other_subnet], "security_group_ids": [acct.sg]},
    }
    overridden = {**data, "instance_groups": [data["instance_groups"][0], split]}
    # The cluster these configs update, with its stack (UPD-DEPLOYED compares them).
    acct.cluster("c1", P5, 4)
    deployed_stack(acct, "Compute")
    for rule in online_rules():
        called: set[str] = set()
        for variant in (data, multi_az, crowded, scaled, overridden):
            found, account = check(rule.id, variant, fakes)
            called |= {action for _, action in account.calls}
            assert {who for who, _ in account.calls} <= {rule.id}
        assert called == set(ACTIONS[rule.id]), (rule.id, [str(p) for p in found])


def test_policy_is_every_declared_action_and_docs_show_it() -> None:
    document = policy()
    [statement] = document["Statement"]
    assert statement["Action"] == sorted({a for actions in ACTIONS.values() for a in actions})
    assert all(re.match(r"^[a-z0-9-]+:(Describe|Get|List)[A-Za-z]+$", a) for a in statement["Action"])
    docs = (ROOT / "docs" / "operations.md").read_text()
    assert "```json\n" + json.dumps(document, indent=2) + "\n```" in docs, "regenerate: hyperpod-cdk preflight --policy"


def test_policy_flag_prints_it(preflight: Preflight) -> None:
    result = preflight(None, "--policy")
    assert result.code == 0 and json.loads(result.out) == policy()
    fresh = run_cli("preflight", "--policy")  # a fresh interpreter: the rules register before the policy is read
    assert json.loads(fresh.stdout) == policy() and len(policy()["Statement"][0]["Action"]) > 10


def test_help_and_offline_validate_do_not_import_boto3() -> None:
    for args in (["preflight", "--help"], ["validate", str(ROOT / "examples" / "gpu-cluster.yaml")]):
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip().endswith("LOADED="), (args, result.stderr)
