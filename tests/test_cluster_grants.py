"""The cluster's grants (issue #34): each grant's statements, and each held to the calls its commands make.

The statements come from a synthesized template. The commands run against the moto server (tests/ops_support.py)
with a botocore hook that records every API call (``before-parameter-build``: every call, moto's or a named fake's);
the sessions' ``ssm:StartSession`` comes from the ``aws ssm start-session`` argument lists the commands hand to the
injected runner. Each recorded call must be allowed by the grant, and each granted action and resource must be
used by some call: a grant allows nothing its commands never call.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.assertions import Template

from builders import cluster_stack, new_stack
from clock import ago_ms
from hyperpod_cdk import HyperPodCluster
from hyperpod_cdk.aws.session import make_session
from hyperpod_cdk.constructs.execution_role import NodeExecutionRole
from hyperpod_cdk.ops.context import Captured
from ops_support import ACCOUNT, REGION, MotoCluster, Operator, aws_env, moto_url  # noqa: F401

GRANTS = ("describe", "operate", "reconfigure", "connect")
CLUSTER_ACTIONS = {
    "describe": [
        "sagemaker:DescribeCluster",
        "sagemaker:ListClusterEvents",
        "sagemaker:ListClusterNodes",
        "sagemaker:ListClusterOperations",
        "sagemaker:ListTags",
    ],
    "operate": [
        "sagemaker:BatchDeleteClusterNodes",
        "sagemaker:BatchRebootClusterNodes",
        "sagemaker:BatchReplaceClusterNodes",
        "sagemaker:DescribeCluster",
        "sagemaker:ListClusterEvents",
        "sagemaker:ListClusterNodes",
        "sagemaker:ListClusterOperations",
        "sagemaker:ListTags",
        "sagemaker:UpdateClusterSoftware",
    ],
    "reconfigure": [
        "sagemaker:DescribeCluster",
        "sagemaker:ListClusterNodes",
        "sagemaker:ListClusterOperations",
        "sagemaker:ListTags",
        "sagemaker:UpdateCluster",
    ],
    "connect": ["sagemaker:DescribeCluster", "sagemaker:ListClusterNodes", "ssm:StartSession"],
}
"""What each grant allows on the cluster's ARN, written out (not read from the table the grants read)."""
DOCUMENTS = [
    "AWS-StartNonInteractiveCommand",
    "AWS-StartPortForwardingSession",
    "AWS-StartSSHSession",
    "SSM-SessionManagerRunShell",
]

# -- the statements ------------------------------------------------------------------------------------------------


def resolve(value: Any) -> Any:
    """Pseudo parameters and joins made strings (moto's account and Region); anything else left as it is."""
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref" and argument in ("AWS::Partition", "AWS::Region", "AWS::AccountId"):
            return {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}[argument]
        if function == "Fn::Join":
            parts = [resolve(p) for p in argument[1]]
            if all(isinstance(p, str) for p in parts):
                return str(argument[0]).join(parts)
            return {"Fn::Join": [argument[0], parts]}
    if isinstance(value, list):
        return [resolve(v) for v in value]
    return value


def statements(stack: cdk.Stack, role: iam.Role, conditions: bool = False) -> list[tuple[list[str], list[Any]]]:
    """(actions, resources) of every Allow statement in the role's policies (none with a condition unless
    ``conditions``: the grants have none)."""
    logical = stack.resolve(role.role_name)
    found = []
    for policy in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values():
        if logical not in policy["Properties"].get("Roles", []):
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow" and (conditions or "Condition" not in statement)
            listed = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            found.append((sorted(listed), [resolve(r) for r in resources]))
    return found


def pairs(found: list[tuple[list[str], list[Any]]]) -> set[tuple[str, str]]:
    """Each (action, resource) a policy allows, the resource as JSON when it is still a CloudFormation value."""
    return {
        (a, r if isinstance(r, str) else json.dumps(r, sort_keys=True))
        for acts, res in found
        for a in acts
        for r in res
    }


def operator_role(stack: cdk.Stack) -> iam.Role:
    return iam.Role(stack, "Operator", assumed_by=iam.AccountRootPrincipal())


def imported(grant: str, **attributes: str) -> set[tuple[str, str]]:
    stack = cdk.Stack(cdk.App(), "Ops", env=cdk.Environment(account=ACCOUNT, region=REGION))
    role = operator_role(stack)
    cluster = HyperPodCluster.from_cluster_attributes(stack, "Cluster", cluster_name="grants", **attributes)
    returned = getattr(cluster, f"grant_{grant}")(role)
    assert isinstance(returned, iam.Grant) and returned.success
    return pairs(statements(stack, role))


ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abcd1234efgh"
LOG_GROUP = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/Clusters/grants/abcd1234efgh:*"


def document_arn(name: str) -> str:
    owner = "" if name.startswith("AWS-") else ACCOUNT
    return f"arn:aws:ssm:{REGION}:{owner}:document/{name}"


def expected(grant: str, arn: str, log_group: str) -> set[tuple[str, str]]:
    found = {(a, arn) for a in CLUSTER_ACTIONS[grant]}
    if grant in ("describe", "operate"):
        found.add(("logs:FilterLogEvents", log_group))
    if grant == "connect":
        found |= {("ssm:StartSession", document_arn(d)) for d in DOCUMENTS}
    return found


@pytest.mark.parametrize("grant", GRANTS)
def test_each_grant_allows_its_actions_on_this_clusters_arn_log_group_and_documents_only(grant: str) -> None:
    assert imported(grant, cluster_arn=ARN) == expected(grant, ARN, LOG_GROUP)


@pytest.mark.parametrize("grant", GRANTS)
def test_an_owned_cluster_grants_the_same_on_its_own_arn(grant: str) -> None:
    stack, cluster = cluster_stack()
    role = operator_role(stack)
    assert getattr(cluster, f"grant_{grant}")(role).success
    arn = json.dumps(stack.resolve(cluster.cluster_arn), sort_keys=True)
    log_group = json.dumps(
        resolve(
            stack.resolve(
                stack.format_arn(
                    service="logs",
                    resource="log-group",
                    resource_name=f"{cluster.log_group_name}:*",
                    arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                )
            )
        ),
        sort_keys=True,
    )
    assert "ClusterArn" in arn and "abcd" not in log_group
    owned = pairs(statements(stack, role))
    own_documents = {(a, r) for a, r in owned if ":document/" in r}
    assert {(a, r) for a, r in owned if ":document/" not in r} == {
        (a, r) for a, r in expected(grant, arn, log_group) if ":document/" not in r
    }
    # The documents: the same names, with the stack's (unresolved) Region and account.
    assert sorted(r.rsplit("/", 1)[-1] for _, r in own_documents) == (DOCUMENTS if grant == "connect" else [])


@pytest.mark.parametrize("grant", GRANTS)
def test_a_cluster_imported_by_name_grants_the_same_on_every_cluster_of_the_account_and_region(grant: str) -> None:
    """Its ARN ends in an ID the name does not give: ``cluster/*``; the log group is still the name's."""
    every = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/*"
    named = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/Clusters/grants/*:*"
    stack = cdk.Stack(cdk.App(), "Ops", env=cdk.Environment(account=ACCOUNT, region=REGION))
    role = operator_role(stack)
    assert getattr(HyperPodCluster.from_cluster_name(stack, "Cluster", "grants"), f"grant_{grant}")(role).success
    assert pairs(statements(stack, role)) == expected(grant, every, named)


def test_a_grant_to_a_principal_without_a_policy_is_reported_not_granted() -> None:
    stack = new_stack()
    cluster = HyperPodCluster.from_cluster_attributes(stack, "Cluster", cluster_name="grants", cluster_arn=ARN)
    grant = cluster.grant_describe(iam.AccountPrincipal(ACCOUNT))
    assert not grant.success


# -- the execution role --------------------------------------------------------------------------------------------


def test_the_execution_role_is_a_node_execution_role_that_grants_reads() -> None:
    stack, cluster = cluster_stack()
    role = cluster.execution_roles["workers"]
    assert isinstance(role, NodeExecutionRole)
    bucket = s3.Bucket.from_bucket_name(stack, "Data", "training-data")
    key = kms.Key.from_key_arn(stack, "Key", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    secret = secretsmanager.Secret.from_secret_complete_arn(
        stack, "Token", f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:hf-token-AbCdEf"
    )
    plain_stack, plain = cluster_stack()
    before = pairs(statements(plain_stack, plain.execution_roles["workers"], conditions=True))  # type: ignore[arg-type]
    for grant in (role.grant_read_bucket(bucket, "datasets/"), role.grant_decrypt(key), role.grant_read_secret(secret)):
        assert isinstance(grant, iam.Grant) and grant.success
    added = pairs(statements(stack, role, conditions=True)) - before
    objects = "arn:aws:s3:::training-data/datasets/*"
    assert ("s3:GetObject*", objects) in added
    assert not any(r.endswith("training-data/*") for _, r in added)  # the prefix only
    assert {a for a, r in added if r == objects} == {"s3:GetObject*", "s3:GetBucket*", "s3:List*"}
    assert {a for a, r in added if "kms" in r} == {"kms:Decrypt"}
    assert {a for a, r in added if "secretsmanager" in r} == {
        "secretsmanager:GetSecretValue",
        "secretsmanager:DescribeSecret",
    }


def test_a_role_passed_in_is_every_groups_execution_role_as_it_is() -> None:
    stack = new_stack()
    given = iam.Role.from_role_arn(stack, "Given", f"arn:aws:iam::{ACCOUNT}:role/nodes", mutable=False)
    _, cluster = cluster_stack(role=given)
    assert all(role is given for role in cluster.execution_roles.values())
    assert cluster.controller_role is given and cluster.node_roles == [given]


# -- the commands against moto -------------------------------------------------------------------------------------

Call = tuple[str, str]
"""(IAM action, resource ARN)."""


def iam_resource(service: str, operation: str, params: dict[str, Any], cluster_arn: str) -> str:
    if service == "sagemaker":
        return str(params.get("ResourceArn") or cluster_arn)
    if service == "logs" and operation == "FilterLogEvents":
        return f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{params['logGroupName']}:*"
    if service == "cloudformation" and operation == "DescribeStacks":
        return f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{params['StackName']}/*"
    raise AssertionError(f"{service}:{operation}: no resource rule; add one for a new call")


def session_calls(argv: list[str], cluster_arn: str) -> list[Call]:
    """``aws ssm start-session --target sagemaker-cluster:<id>_... [--document-name D]``: StartSession on the
    cluster (the target's resource) and the document (Session Manager's default shell document when none)."""
    text = " ".join(argv)
    target = re.search(r"--target (\S+)", text)
    assert target and target.group(1).startswith(f"sagemaker-cluster:{cluster_arn.rsplit('/', 1)[-1]}_")
    document = re.search(r"--document-name (\S+)", text)
    return [
        ("ssm:StartSession", cluster_arn),
        ("ssm:StartSession", document_arn(document.group(1) if document else "SSM-SessionManagerRunShell")),
    ]


@pytest.fixture
def moto_cluster(aws_env: str) -> Iterator[MotoCluster]:  # noqa: F811
    made = MotoCluster(
        "grants",
        {"controller": ("ml.m5.xlarge", 1, "Controller"), "workers": ("ml.c5.xlarge", 3, "Compute")},
        tags={"aws:cloudformation:stack-name": "grants-stack"},
    ).create()
    made.set(NodeProvisioningMode="Continuous")
    logs = make_session(None, None).client("logs")
    group = f"/aws/sagemaker/Clusters/grants/{made.id}"
    logs.create_log_group(logGroupName=group)
    worker = made.ids["workers"][0]
    logs.create_log_stream(logGroupName=group, logStreamName=f"LifecycleConfig/workers/{worker}")
    logs.put_log_events(
        logGroupName=group,
        logStreamName=f"LifecycleConfig/workers/{worker}",
        logEvents=[{"timestamp": ago_ms(60), "message": "lifecycle done"}],
    )
    yield made


def commands(made: MotoCluster) -> dict[str, list[str]]:
    worker = made.ids["workers"]
    return {
        "status": ["status", "grants", "--json"],
        "wait": ["wait", "grants", "--timeout", "1", "--json"],
        "events": ["events", "grants", "--node", worker[0], "--json"],
        "logs": ["logs", "grants", "--node", worker[0]],
        "reboot": ["reboot", "grants", worker[0], "--yes", "--json"],
        "replace": ["replace", "grants", worker[1], "--yes", "--json"],
        "delete": ["delete", "grants", worker[2], "--yes", "--allow-drift", "--json"],
        "scale": ["scale", "grants", "workers", "4", "--allow-drift", "--json"],
        "connect": ["connect", "grants"],
        "port-forward": ["port-forward", "grants", "8888:8888", "--group", "workers"],
        "ssh-config": ["ssh-config", "grants", "--print"],
        "status --slurm": ["status", "grants", "--slurm", "--json"],
        "cost": ["cost", "grants", "--json"],
        "update-software": ["update-software", "grants", "--yes", "--poll", "0", "--json"],
        "update-software (controller)": ["update-software", "grants", "--yes", "--poll", "0", "--json"],
        "login": ["login", "drain", "grants", worker[0], "--json"],
    }


def controller_answers(argv: list[str]) -> Captured:
    """The controller's answer to a session's command: `cost`'s three sections (empty: no job, no partition, no
    budget); for `status --slurm` and `update-software` the workers' Slurm nodes, idle, and each of update-software's
    commands succeeding (tests/test_ops_update_software.py tests what they do)."""
    command = json.loads(argv[argv.index("--parameters") + 1])["command"][0]
    nodes = "".join(f"NodeName=ip-10-1-0-{n} NodeAddr=10.1.0.{n} State=IDLE\n" for n in (2, 3, 4))
    if "### hyperpod-cdk begin" in command:
        said = nodes if "scontrol -o show nodes" in command else ""
        if "/bin/login-pool drain" in command:  # a login node's drain (hyperpod_cdk.ops.login)
            said = '{"changed": true, "drained": true}\n'
        return Captured(0, f"### hyperpod-cdk begin\n{said}### hyperpod-cdk exit 0\n", "")
    if command.startswith("scontrol -o show nodes"):
        return Captured(0, nodes, "")
    return Captured(0, "### sacct\n### partitions\n### sshare\n", "")


def run_recorded(made: MotoCluster, argv: list[str]) -> list[Call]:
    """Runs one command; every API call it made and every session it started, as (action, resource)."""
    recorded: list[Call] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.signing_name
        recorded.append((f"{service}:{model.name}", iam_resource(service, model.name, params, made.model.arn)))

    operator = Operator(
        before_session=lambda session: session.events.register("before-parameter-build", record),
        ssm_command=controller_answers,
        home=Path(tempfile.mkdtemp()),  # update-software keeps its progress there
    )
    result = operator(*argv)
    assert result.code == 0, (argv, result.err)
    for argv_run in operator.executed + operator.captured:
        recorded += session_calls(argv_run, made.model.arn)
    if argv[0] == "ssh-config":
        recorded += session_calls(result.out.split("ProxyCommand", 1)[1].split(), made.model.arn)
    return recorded


STACK_ARN = f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/hyperpod-grants/*"
"""The stack ``ssh-config`` reads for the login pool's name (tests/test_ops_access.py: refused, the SSM block alone)."""

GRANTED_COMMANDS = {
    "describe": ("status", "wait", "events", "logs"),
    "operate": ("status", "wait", "events", "logs", "reboot", "replace", "delete", "update-software"),
    "reconfigure": ("status", "wait", "scale"),
    "connect": (
        "connect",
        "port-forward",
        "ssh-config",
        "status --slurm",
        "cost",
        "update-software (controller)",
        "login",
    ),
}


def allowed(granted: set[tuple[str, str]], call: Call) -> bool:
    return any(call[0] == action and fnmatch.fnmatchcase(call[1], resource) for action, resource in granted)


@pytest.mark.parametrize("grant", GRANTS)
def test_each_grant_allows_every_call_of_its_commands_and_nothing_they_do_not_call(
    grant: str, moto_cluster: MotoCluster
) -> None:
    granted = imported(grant, cluster_arn=moto_cluster.model.arn)
    made = commands(moto_cluster)
    calls: list[Call] = []
    for command in GRANTED_COMMANDS[grant]:
        ran = run_recorded(moto_cluster, made[command])
        assert ran, command
        if command in ("status --slurm", "cost", "update-software (controller)"):
            ran = [c for c in ran if c[0] == "ssm:StartSession"]  # the rest is describe's or operate's
        if command == "update-software":
            ran = [c for c in ran if c[0] != "ssm:StartSession"]  # the sessions are connect's
        if command == "ssh-config":  # the login pool's name from the stack: no grant gives it, a refusal is a note
            assert ("cloudformation:DescribeStacks", STACK_ARN) in ran
            ran = [c for c in ran if c[0] != "cloudformation:DescribeStacks"]
        assert [c for c in ran if not allowed(granted, c)] == [], command
        calls += ran
    unused = {(a, r) for a, r in granted if not any(allowed({(a, r)}, c) for c in calls)}
    assert unused == set()


def test_the_recorder_sees_a_call_the_grant_lacks() -> None:
    """The check above fails when a grant misses a call: FilterLogEvents is not in grant_reconfigure."""
    granted = expected("reconfigure", ARN, LOG_GROUP)
    assert not allowed(granted, ("logs:FilterLogEvents", LOG_GROUP))
    assert allowed(granted, ("sagemaker:UpdateCluster", ARN))
    assert not allowed(granted, ("sagemaker:UpdateCluster", ARN.replace("abcd", "dcba")))
