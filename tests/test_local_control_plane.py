"""The emulated control plane on a running local cluster (root only; HyperPod platform): boto3 and the operator
CLI reach it through AWS_ENDPOINT_URL with the instance role's keys, and what they see and change are the real
nodes: a node added to a group at 0 joins Slurm and runs a job, a deleted one leaves it, a controller cannot be
deleted, a launch short of capacity shows in the counts and the events; ``hyperpod-cdk status``, ``replace`` and
``scale`` act on the cluster. Alone: ``python -m pytest tests/test_local_control_plane.py`` (``make test`` runs
two clusters at a time, docs/testing.md)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.namespaces import list_netns
from hyperpod_local.plan import UpOptions
from local_support import SsmOnTheNode, requires_hyperpod_platform, use_control_plane, variant
from ops_support import NoFakes, Operator
from training_runtime.node import HYPERPOD
from training_runtime.node_names import ip_name
from training_runtime.paths import DONE_MARKER

pytestmark = requires_hyperpod_platform

CONFIG = Path(__file__).resolve().parent / "fixtures" / "control_plane" / "cluster.yaml"
NAME = "scaled-cluster"
BURST_TYPE = "ml.c5.2xlarge"
BOOT_TIMEOUT_S = 300.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("control-plane")
    cluster = LocalCluster.up(
        CONFIG,
        workdir,
        variant(platform=HYPERPOD),
        UpOptions(prefix=f"hpcp{os.getpid() % 10000}", subnet="10.237.0.0/24"),
    )
    try:
        control_plane.start(cluster, launch_latency=1.0)
        yield cluster
    finally:
        cluster.down()  # this object's layout is up's: down takes the nodes added since from the state file
        leftover = [ns for ns in list_netns() if ns.startswith(cluster.state.prefix + "-")]
        assert leftover == [], leftover


@pytest.fixture
def env(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    return use_control_plane(cluster, monkeypatch, tmp_path)


@pytest.fixture
def sagemaker(env: dict[str, str]) -> Any:
    return boto3.session.Session().client("sagemaker", config=Config(retries={"max_attempts": 2}))


def counts(sagemaker: Any) -> dict[str, tuple[int, int]]:
    groups = sagemaker.describe_cluster(ClusterName=NAME)["InstanceGroups"]
    return {g["InstanceGroupName"]: (g["CurrentCount"], g["TargetCount"]) for g in groups}


def nodes(sagemaker: Any, **extra: Any) -> list[dict[str, Any]]:
    pages = sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=NAME, **extra)
    return [n for page in pages for n in page["ClusterNodeSummaries"]]


def wait_for(what: str, check: Callable[[], Any], timeout: float = BOOT_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(1.0)


def run(cluster: LocalCluster, *argv: str) -> str:
    result = cluster.exec(cluster.layout.controller.name, list(argv), timeout=120)
    assert result.returncode == 0, f"{' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def slurm_nodes(cluster: LocalCluster, partition: str) -> dict[str, str]:
    out = run(cluster, "sinfo", "-h", "-N", "-p", partition, "-o", "%N %t")
    return dict(line.split() for line in out.splitlines() if line.strip())


def test_the_api_shows_the_real_nodes_under_their_slurm_names(cluster: LocalCluster, sagemaker: Any) -> None:
    assert counts(sagemaker) == {"controller": (1, 1), "cpu": (1, 1), "burst": (0, 0)}
    assert cluster.status()["control_plane"] == control_plane.url(cluster)  # `hyperpod-local status` shows it
    listed = nodes(sagemaker)
    assert sorted(n["InstanceGroupName"] for n in listed) == ["controller", "cpu"]
    hostnames = {n["PrivateDnsHostname"].split(".")[0] for n in listed}
    assert hostnames == {ip_name(n.ip) for n in cluster.nodes}  # EC2's DNS name: the Slurm name in the ip naming
    assert set(slurm_nodes(cluster, "cpu")) == {cluster.slurm_name("cpu-1")}
    # The group at 0 keeps its partition, with no node (membership.py).
    assert "burst" in run(cluster, "sinfo", "-h", "-o", "%P").split()
    assert slurm_nodes(cluster, "burst") == {}


def test_status_slurm_shows_each_real_node_with_its_slurm_state(
    cluster: LocalCluster, sagemaker: Any, env: dict[str, str]
) -> None:
    worker = cluster.slurm_name("cpu-1")
    operator = Operator(fakes=NoFakes(), ssm_command=SsmOnTheNode(cluster, sagemaker, NAME))
    run(cluster, "scontrol", "update", f"NodeName={worker}", "State=DRAIN", "Reason=status drill")
    try:
        drained = operator("status", NAME, "--slurm", "--json")
        assert drained.code == 0, drained.err
        report = drained.json()
        assert report["slurm_note"] is None
        by_group = {n["group"]: n["slurm"] for n in report["nodes"]}
        assert by_group["cpu"] == {"listed": True, "name": worker, "state": "drained", "reason": "status drill"}
        assert by_group["controller"] == {"listed": False}  # HyperPod's controller runs slurmctld, not slurmd
    finally:
        run(cluster, "scontrol", "update", f"NodeName={worker}", "State=RESUME")
    human = operator("status", NAME, "--slurm")
    assert human.code == 0, human.err
    row = next(line for line in human.out.splitlines() if worker in line and "cpu" in line)
    assert f"{worker} idle" in row, human.out


def test_an_added_node_joins_slurm_runs_a_job_and_leaves_when_deleted(cluster: LocalCluster, sagemaker: Any) -> None:
    # Slurm 24.11 refuses a job for a partition without nodes at submission: it cannot wait there for a node.
    refused = cluster.exec(cluster.layout.controller.name, ["sbatch", "-p", "burst", "-N1", "--wrap", "hostname"])
    assert refused.returncode != 0 and "Requested node configuration is not available" in refused.stderr
    added = sagemaker.batch_add_cluster_nodes(
        ClusterName=NAME, NodesToAdd=[{"InstanceGroupName": "burst", "IncrementTargetCountBy": 1}], ClientToken="t1"
    )
    logical = added["Successful"][0]["NodeLogicalId"]
    assert added["Successful"][0]["Status"] == "Pending"
    node = wait_for(
        "the new node Running",
        lambda: next(
            (
                n
                for n in nodes(sagemaker)
                if n.get("InstanceGroupName") == "burst" and n["InstanceStatus"]["Status"] == "Running"
            ),
            None,
        ),
    )
    assert counts(sagemaker)["burst"] == (1, 1)
    name = next(n.name for n in LocalCluster.open(cluster.workdir).nodes if n.group == "burst")
    fresh = LocalCluster.open(cluster.workdir)
    slurm_name = fresh.slurm_name(name)
    assert node["PrivateDnsHostname"].split(".")[0] == ip_name(fresh.node(name).ip)
    fresh.wait_idle(120, nodes=[name])
    assert run(cluster, "srun", "-p", "burst", "-N1", "hostname").strip() == slurm_name  # a job runs on it
    assert fresh.exec(name, ["test", "-e", DONE_MARKER]).returncode == 0  # its lifecycle script ran
    for holder in (fresh.layout.controller.name, "cpu-1", name):  # every copy of resource_config.json lists it
        config = fresh.exec(holder, ["cat", "/opt/ml/config/resource_config.json"]).stdout
        assert f'"{name}"' in config, holder
    instance_id = node["InstanceId"]
    detail = sagemaker.describe_cluster_node(ClusterName=NAME, NodeLogicalId=logical)["NodeDetails"]
    assert detail["InstanceId"] == instance_id and detail["PrivatePrimaryIp"] == fresh.node(name).ip

    deleted = sagemaker.batch_delete_cluster_nodes(ClusterName=NAME, NodeIds=[instance_id])
    assert deleted["Successful"] == [instance_id]
    wait_for("the node to leave", lambda: instance_id not in [n["InstanceId"] for n in nodes(sagemaker)])
    assert counts(sagemaker)["burst"] == (0, 0)
    after = LocalCluster.open(cluster.workdir)
    assert name not in [n.name for n in after.nodes]
    assert not after.namespaces.alive(name)
    assert slurm_name not in run(cluster, "sinfo", "-h", "-N", "-o", "%N").split()


def test_a_controller_is_never_deleted(cluster: LocalCluster, sagemaker: Any) -> None:
    controller = next(n["InstanceId"] for n in nodes(sagemaker) if n["InstanceGroupName"] == "controller")
    answer = sagemaker.batch_delete_cluster_nodes(ClusterName=NAME, NodeIds=[controller])
    assert answer["Successful"] == [] and answer["Failed"][0]["Code"] == "InvalidNodeStatus"
    assert cluster.namespaces.alive(cluster.layout.controller.name)


SLURM_CONF = "cat \"$(scontrol show config | awk '/^SLURM_CONF /{print $3}')\""
"""The controller's slurm.conf, wherever the platform keeps it."""


def test_a_refused_update_never_reaches_the_nodes(cluster: LocalCluster, sagemaker: Any) -> None:
    """An UpdateCluster that changes what AWS says cannot change once the group exists (CapacityRequirements) is a
    ValidationException quoting AWS, and the count it also asks for does not start a node: slurm.conf, the Slurm
    nodes and the API's nodes stay as they were."""
    conf, slurm, listed, before = (
        run(cluster, "sh", "-c", SLURM_CONF),
        slurm_nodes(cluster, "cpu"),
        sorted(n["InstanceId"] for n in nodes(sagemaker)),
        counts(sagemaker),
    )
    cpu = next(
        g for g in sagemaker.describe_cluster(ClusterName=NAME)["InstanceGroups"] if g["InstanceGroupName"] == "cpu"
    )
    spec = {key: cpu[key] for key in ("InstanceGroupName", "InstanceType", "ExecutionRole", "LifeCycleConfig")}
    spec.update(InstanceCount=cpu["TargetCount"] + 1, CapacityRequirements={"Spot": {}})
    with pytest.raises(ClientError) as error:
        sagemaker.update_cluster(ClusterName=NAME, InstanceGroups=[spec])
    assert error.value.response["Error"]["Code"] == "ValidationException"
    message = error.value.response["Error"]["Message"]
    assert "CapacityRequirements cannot be modified once an Instance Group is created." in message
    time.sleep(3.0)  # the launch latency is 1 s: an accepted count would show a node by now
    assert counts(sagemaker) == before and sorted(n["InstanceId"] for n in nodes(sagemaker)) == listed
    assert slurm_nodes(cluster, "cpu") == slurm
    assert run(cluster, "sh", "-c", SLURM_CONF) == conf


def test_a_launch_short_of_capacity_shows_in_counts_and_events(cluster: LocalCluster, sagemaker: Any) -> None:
    control_plane.set_capacity(cluster, BURST_TYPE, 0)
    try:
        added = sagemaker.batch_add_cluster_nodes(
            ClusterName=NAME, NodesToAdd=[{"InstanceGroupName": "burst", "IncrementTargetCountBy": 1}]
        )
        events = wait_for(
            "a capacity event",
            lambda: [
                e
                for e in sagemaker.list_cluster_events(ClusterName=NAME, InstanceGroupName="burst")["Events"]
                if e["EventLevel"] == "Error" and "capacity" in e["Description"]
            ],
            30,
        )
        assert events
        assert counts(sagemaker)["burst"] == (0, 1)
        pending = nodes(sagemaker, IncludeNodeLogicalIds=True)
        short = [n for n in pending if n.get("NodeLogicalId") == added["Successful"][0]["NodeLogicalId"]]
        assert "InsufficientCapacity" in short[0]["InstanceStatus"]["Message"]
        assert len(LocalCluster.open(cluster.workdir).nodes) == 2  # nothing booted
    finally:
        control_plane.set_capacity(cluster, BURST_TYPE, None)
        sagemaker.batch_delete_cluster_nodes(ClusterName=NAME, NodeLogicalIds=[added["Successful"][0]["NodeLogicalId"]])
    assert counts(sagemaker)["burst"] == (0, 0)


def test_the_operator_cli_status_replace_and_scale(cluster: LocalCluster, sagemaker: Any, env: dict[str, str]) -> None:
    operator = Operator(fakes=NoFakes())
    status = operator("status", NAME, "--json")
    assert status.code == 0, status.err
    report = status.json()
    assert {n["hostname"] for n in report["nodes"]} == {ip_name(n.ip) for n in cluster.nodes}
    assert {n["status"] for n in report["nodes"]} == {"Running"}

    worker = next(n for n in report["nodes"] if n["group"] == "cpu")
    marker = cluster.exec("cpu-1", ["sh", "-c", "echo old >/var/tmp/disk-marker"])
    assert marker.returncode == 0
    replaced = operator("replace", NAME, worker["hostname"], "--yes")
    assert replaced.code == 0, replaced.err
    wait_for(
        "the replaced node Running", lambda: all(n["InstanceStatus"]["Status"] == "Running" for n in nodes(sagemaker))
    )
    assert cluster.exec("cpu-1", ["test", "-e", "/var/tmp/disk-marker"]).returncode == 1  # a new disk
    cluster.wait_idle(120, nodes=["cpu-1"])

    scaled = operator("scale", NAME, "burst", "1")
    assert scaled.code == 0, scaled.err
    wait_for("the scaled group", lambda: counts(sagemaker)["burst"] == (1, 1))
    fresh = LocalCluster.open(cluster.workdir)
    added = next(n.name for n in fresh.nodes if n.group == "burst")
    fresh.wait_idle(120, nodes=[added])
    again = operator("status", NAME, "--json").json()
    assert ip_name(fresh.node(added).ip) in {n["hostname"] for n in again["nodes"]}
    operator.ssm_command = SsmOnTheNode(cluster, sagemaker, NAME)
    joined = operator("status", NAME, "--slurm", "--json").json()  # the added node is in Slurm, idle
    burst = next(n["slurm"] for n in joined["nodes"] if n["group"] == "burst")
    assert (burst["name"], burst["state"]) == (fresh.slurm_name(added), "idle"), joined


NODE_CALL = """
import json, sys, urllib.request
import boto3
imds, endpoint = sys.argv[1], sys.argv[2]
def get(path, token=None, method="GET"):
    headers = {"X-aws-ec2-metadata-token": token} if token else {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    return urllib.request.urlopen(urllib.request.Request(imds + path, headers=headers, method=method)).read().decode()
token = get("/latest/api/token", method="PUT")
role = get("/latest/meta-data/iam/security-credentials/", token)
keys = json.loads(get("/latest/meta-data/iam/security-credentials/" + role, token))
client = boto3.client("sagemaker", region_name="local", endpoint_url=endpoint, aws_access_key_id=keys["AccessKeyId"],
                      aws_secret_access_key=keys["SecretAccessKey"], aws_session_token=keys["Token"])
print(client.describe_cluster(ClusterName=sys.argv[3])["ClusterStatus"])
"""


def test_a_node_calls_the_api_with_the_role_keys_of_its_metadata_service(cluster: LocalCluster) -> None:
    """What the scaler on the controller does: IMDSv2 for the role's keys, then a signed call to the URL in its
    parameters file, on the cluster's bridge."""
    from hyperpod_local.imds import imds_url
    from training_runtime.params import PARAMETERS_FILE_BY_MODE, ProvisioningParameters

    path = f"/opt/ml/lifecycle/{PARAMETERS_FILE_BY_MODE[cluster.state.mode]}"
    params = cluster.exec(cluster.layout.controller.name, ["cat", path])
    emulation = ProvisioningParameters.from_json(json.loads(params.stdout)).emulation
    assert emulation is not None and emulation.sagemaker_url == control_plane.sagemaker_url(cluster.layout.subnet)
    python = str(Path(sys.prefix) / "bin" / "python")  # the host's environment is mounted on every node
    argv = [python, "-c", NODE_CALL, imds_url(cluster.layout.subnet), emulation.sagemaker_url, NAME]
    result = cluster.exec(cluster.layout.controller.name, argv, env={"AWS_EC2_METADATA_DISABLED": "true"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "InService"
