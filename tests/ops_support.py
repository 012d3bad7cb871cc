"""A moto server for the operator CLI's tests, and named fakes for the HyperPod calls moto lacks.

moto 5.2.5 implements CreateCluster, DescribeCluster, ListClusterNodes, DescribeClusterNode and ListTags for
HyperPod clusters, and CloudWatch Logs and CloudFormation; the tests reach them over real HTTP with real
botocore through AWS_ENDPOINT_URL. moto's nodes lack what the service returns for Slurm clusters (i-...
instance ids, PrivateDnsHostname) and its cluster never changes state, so ``MotoCluster`` edits moto's
in-process backend the way the service would change; ``HyperPodFakes`` answers the calls moto does not
implement at all (each named below with the reason) through botocore's before-call event, the hook botocore's
own Stubber uses, after botocore has validated the parameters against the service model. The API's limits are
the emulated control plane's (:mod:`hyperpod_local.control_plane.validation`), AWS's side's one copy.
"""

from __future__ import annotations

import io
import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto.sagemaker.models import Cluster as MotoClusterModel
from moto.sagemaker.models import ClusterNode as MotoNodeModel
from moto.sagemaker.models import sagemaker_backends
from moto.server import ThreadedMotoServer

from clock import NOW
from hyperpod_cdk.aws.session import make_session
from hyperpod_cdk.ops.context import Captured, OpsContext
from hyperpod_cdk.ops.parser import main as ops_main
from hyperpod_local.control_plane.validation import DELETE_IDS_MAX, REBOOT_IDS_MAX

ACCOUNT = "123456789012"  # moto's account
REGION = "us-west-2"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/hyperpod-execution"
LIFECYCLE = {"SourceS3Uri": "s3://sagemaker-lifecycle-bucket/lifecycle/", "OnCreate": "on_create.sh"}


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def stack_with_outputs(name: str, outputs: dict[str, str]) -> None:
    """A stack in moto's CloudFormation holding only ``outputs`` (what the operator commands read of a stack)."""
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    make_session(None, None).client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


@pytest.fixture
def aws_env(moto_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Dummy credentials, the Region and the moto endpoint in the standard variables; moto's state reset."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")).close()
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    _enrich_moto(monkeypatch)
    return moto_url


def _enrich_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's describe/summary plus the fields a test sets in ``extra`` (Orchestrator, hostnames, ...)."""
    describe, summary = MotoClusterModel.describe, MotoNodeModel.summary
    monkeypatch.setattr(MotoClusterModel, "describe", lambda self: {**describe(self), **getattr(self, "extra", {})})
    monkeypatch.setattr(MotoNodeModel, "summary", lambda self: {**summary(self), **getattr(self, "extra", {})})
    # moto pages ListClusterNodes by each node's ``arn``, which its ClusterNode lacks: past one page (100 nodes)
    # every page looks the same and botocore's paginator stops ("the same next token was received twice").
    monkeypatch.setattr(MotoNodeModel, "arn", property(lambda self: self.instance_id), raising=False)


@dataclass
class MotoCluster:
    """A cluster created in moto through CreateCluster, with Slurm-like node ids and hostnames."""

    name: str
    groups: dict[str, tuple[str, int, str | None]]  # name -> (instance type, count, Slurm NodeType)
    tags: dict[str, str] = field(default_factory=dict)
    ids: dict[str, list[str]] = field(default_factory=dict)

    def create(self) -> MotoCluster:
        client = make_session(None, None).client("sagemaker")
        groups = []
        for name, (instance_type, count, node_type) in self.groups.items():
            group: dict[str, Any] = {
                "InstanceGroupName": name,
                "InstanceType": instance_type,
                "InstanceCount": count,
                "LifeCycleConfig": LIFECYCLE,
                "ExecutionRole": ROLE,
                "ThreadsPerCore": 1,
            }
            if node_type:
                group["SlurmConfig"] = {"NodeType": node_type}
            groups.append(group)
        client.create_cluster(
            ClusterName=self.name,
            InstanceGroups=groups,
            VpcConfig={"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
            Tags=[{"Key": k, "Value": v} for k, v in self.tags.items()],
        )
        # The service names nodes i-<17 hex> and gives them an EC2 private DNS name (the Slurm hostname).
        model = self.model
        renamed = {}
        for number, node in enumerate(model.nodes.values(), start=1):
            node.instance_id = f"i-{number:017x}"
            node.extra = {"PrivateDnsHostname": f"ip-10-1-0-{number}.us-west-2.compute.internal"}
            renamed[node.instance_id] = node
            self.ids.setdefault(node.instance_group_name, []).append(node.instance_id)
        model.nodes = renamed
        model.extra = {"Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}}}
        return self

    @property
    def model(self) -> Any:
        return sagemaker_backends[ACCOUNT][REGION].clusters[self.name]

    @property
    def id(self) -> str:
        return str(self.model.arn).rsplit("/", 1)[-1]

    def set(self, status: str | None = None, failure: str | None = None, **extra: Any) -> None:
        if status is not None:
            self.model.status = status
        if failure is not None:
            self.model.failure_message = failure
        self.model.extra.update(extra)

    def node(self, instance_id: str) -> Any:
        return self.model.nodes[instance_id]

    def group(self, name: str) -> dict[str, Any]:
        return next(g for g in self.model.instance_groups if g["InstanceGroupName"] == name)


class HyperPodFakes:
    """Answers the HyperPod calls moto 5.2.5 does not implement, on moto's cluster state; records each call.

    - BatchRebootClusterNodes / BatchReplaceClusterNodes: not in moto. The fake enforces the API's limits (1 to
      25 NodeIds and 1 to 25 NodeLogicalIds: ValidationException beyond them), answers InstanceIdNotFound for
      ids the cluster lacks and InvalidInstanceStatus for nodes in ``busy``, and Successful for the rest.
    - BatchDeleteClusterNodes: not in moto. The same, with its own limit (a combined maximum of 50 identifiers)
      and codes (NodeIdNotFound, InvalidNodeStatus under ``Code``); a deleted node leaves moto's cluster and its
      group's counts go down by one.
    - UpdateCluster: not in moto. The fake sets the group's TargetCount in moto's state.
    - UpdateClusterSoftware: not in moto. The fake re-images at once: each named group (every group when none is)
      gets ``SoftwareUpdateStatus: Succeeded`` and its nodes ``LastSoftwareUpdateTime`` (now); a DeploymentConfig is
      a ValidationException, as on the emulated control plane (Slurm: no updates in batches).
    - ListClusterEvents and ListClusterOperations: not in moto. The fakes page through ``events`` and
      ``operations`` with the paginator's NextToken (ListClusterOperations keeps those whose Status is asked).
    Any call can be made to fail with ``fail[operation] = (code, message)``.
    """

    ANSWERED = (
        "BatchRebootClusterNodes",
        "BatchReplaceClusterNodes",
        "BatchDeleteClusterNodes",
        "UpdateCluster",
        "ListClusterEvents",
        "ListClusterOperations",
        "UpdateClusterSoftware",
    )

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.busy: set[str] = set()
        self.events: list[dict[str, Any]] = []
        self.operations: list[dict[str, Any]] = []
        self.fail: dict[str, tuple[str, str]] = {}

    def install(self, session: boto3.session.Session) -> None:
        for operation in self.ANSWERED:
            session.events.register(f"before-call.sagemaker.{operation}", self._answer)
        for operation in self.fail:
            session.events.register(f"before-call.sagemaker.{operation}", self._answer)

    def batch_calls(self, name: str) -> list[dict[str, Any]]:
        return [params for called, params in self.calls if called == name]

    def _answer(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        # ``params`` is the serialized request: SageMaker speaks JSON, so its body holds the call's parameters.
        name = model.name
        params = json.loads(params["body"] or b"{}")
        self.calls.append((name, params))
        if name in self.fail:
            code, message = self.fail[name]
            return _error(code, message)
        handler: Callable[[dict[str, Any]], tuple[AWSResponse, dict[str, Any]]] = getattr(self, f"_{name}")
        return handler(params)

    def _batch(self, params: dict[str, Any], deleting: bool = False) -> tuple[AWSResponse, dict[str, Any]]:
        ids, logical = params.get("NodeIds", []), params.get("NodeLogicalIds", [])
        if not ids and not logical:
            return _error("ValidationException", "Either NodeIds or NodeLogicalIds must be provided")
        if deleting and len(ids) + len(logical) > DELETE_IDS_MAX:
            return _error("ValidationException", f"a combined maximum of {DELETE_IDS_MAX} NodeIds and NodeLogicalIds")
        if not deleting and (len(ids) > REBOOT_IDS_MAX or len(logical) > REBOOT_IDS_MAX):
            return _error("ValidationException", f"NodeIds: at most {REBOOT_IDS_MAX} members")
        cluster = sagemaker_backends[ACCOUNT][REGION].clusters[params["ClusterName"]]
        by_logical = {getattr(n, "extra", {}).get("NodeLogicalId"): k for k, n in cluster.nodes.items()}
        code = "Code" if deleting else "ErrorCode"
        missing, busy = (
            ("NodeIdNotFound", "InvalidNodeStatus") if deleting else ("InstanceIdNotFound", "InvalidInstanceStatus")
        )
        answer: dict[str, list[Any]] = {
            "Successful": [],
            "Failed": [],
            "SuccessfulNodeLogicalIds": [],
            "FailedNodeLogicalIds": [],
        }
        done: list[str] = []
        for kind, refs, key in (("Node", ids, None), ("NodeLogical", logical, by_logical)):
            ok, failed = (
                answer["Successful" if key is None else "SuccessfulNodeLogicalIds"],
                answer["Failed" if key is None else "FailedNodeLogicalIds"],
            )
            for ref in refs:
                node_id = ref if key is None else key.get(ref)
                field = f"{kind}Id"
                if node_id not in cluster.nodes:
                    failed.append({field: ref, code: missing, "Message": "no such node"})
                elif node_id in self.busy:
                    failed.append({field: ref, code: busy, "Message": "node is busy"})
                else:
                    ok.append(ref)
                    done.append(node_id)
        if deleting:
            for node_id in done:
                node = cluster.nodes.pop(node_id)
                for group in cluster.instance_groups:
                    if group["InstanceGroupName"] == node.instance_group_name:
                        group["TargetCount"] -= 1
                        group["CurrentCount"] -= 1
        return _ok({k: v for k, v in answer.items() if v or k in ("Successful", "Failed")})

    _BatchRebootClusterNodes = _batch
    _BatchReplaceClusterNodes = _batch

    def _BatchDeleteClusterNodes(self, params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        return self._batch(params, deleting=True)

    def _UpdateCluster(self, params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        cluster = sagemaker_backends[ACCOUNT][REGION].clusters[params["ClusterName"]]
        for spec in params["InstanceGroups"]:
            for group in cluster.instance_groups:
                if group["InstanceGroupName"] == spec["InstanceGroupName"]:
                    group["TargetCount"] = spec["InstanceCount"]
        return _ok({"ClusterArn": cluster.arn})

    def _UpdateClusterSoftware(self, params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        if params.get("DeploymentConfig"):
            return _error("ValidationException", "DeploymentConfig: updates in batches are EKS only")
        cluster = sagemaker_backends[ACCOUNT][REGION].clusters[params["ClusterName"]]
        named = {g["InstanceGroupName"] for g in params.get("InstanceGroups") or []}
        for group in cluster.instance_groups:
            if not named or group["InstanceGroupName"] in named:
                group["SoftwareUpdateStatus"] = "Succeeded"
        for node in cluster.nodes.values():
            if not named or node.instance_group_name in named:
                extra = {**getattr(node, "extra", {}), "LastSoftwareUpdateTime": time.time()}
                node.extra = extra  # type: ignore[attr-defined]
        return _ok({"ClusterArn": cluster.arn})

    def _ListClusterEvents(self, params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        return _page(self.events, "Events", params)

    def _ListClusterOperations(self, params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        wanted = [o for o in self.operations if params.get("Status") in (None, o["Status"])]
        return _page(wanted, "ClusterOperationSummaries", params)


def _page(items: list[dict[str, Any]], key: str, params: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    start = int(params.get("NextToken") or 0)
    size = int(params.get("MaxResults") or 2)
    page: dict[str, Any] = {key: items[start : start + size]}
    if start + size < len(items):
        page["NextToken"] = str(start + size)
    return _ok(page)


def _ok(parsed: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    return AWSResponse("https://fake", 200, {}, None), {**parsed, "ResponseMetadata": {"HTTPStatusCode": 200}}


def _error(code: str, message: str) -> tuple[AWSResponse, dict[str, Any]]:
    parsed = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}}
    return AWSResponse("https://fake", 400, {}, None), parsed


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class NoFakes(HyperPodFakes):
    """Every call goes to the endpoint the session names (the emulated control plane of a local cluster)."""

    def install(self, session: boto3.session.Session) -> None:
        pass


@dataclass
class Operator:
    """Runs operator commands in-process with an injected context; records what they would execute."""

    fakes: HyperPodFakes = field(default_factory=HyperPodFakes)
    executed: list[list[str]] = field(default_factory=list)
    answers: list[bool] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    home: Path = Path("/nonexistent")
    sleep: Callable[[float], None] = lambda seconds: None
    clock: list[float] = field(default_factory=lambda: [1_000.0])
    exit_status: int = 0
    before_session: Callable[[boto3.session.Session], None] | None = None
    ssm_command: Callable[[list[str]], Captured] | None = None
    """The fake for a non-interactive ``aws ssm start-session`` (``status --slurm``): moto has no SSM
    ``sagemaker-cluster:`` target and no node to run a command on, so a test says what the controller answers.
    None: any such call fails the test (nothing is expected to run)."""
    captured: list[list[str]] = field(default_factory=list)
    now: float = NOW
    """The commands' wall clock (``ctx.now``): the run's (tests/clock.py), so that what moto keeps by the calendar
    (log events, 14 days) and the windows counted back from now (``--since``) agree."""

    def session(self, profile: str | None, region: str | None) -> boto3.session.Session:
        session = make_session(profile, region)
        self.fakes.install(session)
        if self.before_session:
            self.before_session(session)
        return session

    def execute(self, argv: Any) -> int:
        self.executed.append(list(argv))
        return self.exit_status

    def capture(self, argv: Any, timeout: float) -> Captured:
        self.captured.append(list(argv))
        assert self.ssm_command is not None, f"unexpected command {list(argv)}"
        return self.ssm_command(list(argv))

    def confirm(self, question: str) -> bool:
        self.questions.append(question)
        return self.answers.pop(0) if self.answers else False

    def __call__(self, *argv: str) -> Run:
        out, err = io.StringIO(), io.StringIO()
        context = OpsContext(
            session_factory=self.session,
            execute=self.execute,
            capture=self.capture,
            confirm=self.confirm,
            sleep=self.sleep,
            monotonic=lambda: self.clock[0],
            now=lambda: self.now,
            home=self.home,
            stdout=out,
            stderr=err,
        )
        code = ops_main(list(argv), context)
        return Run(code, out.getvalue(), err.getvalue())
