"""A deployed example for ``hyperpod-cdk plan``: its stack in moto (CloudFormation, S3) and its cluster in the
emulated control plane (SageMaker), both over real HTTP and real botocore.

* The stack is the example's committed snapshot template (tests/snapshots/, what synth writes) cut to the
  resources ``plan`` reads: the ``AWS::SageMaker::Cluster``, the FSx file systems and the lifecycle bucket, with
  the outputs that name the bucket and prefix. Reason: moto's CloudFormation cannot create the rest of a real
  stack (Lambda-backed custom resources fail at CreateStack); it keeps the resource types it does not know in the
  template, which is all GetTemplate returns.
* The parameters file is the example's snapshot (tests/snapshots/*.parameters.json), uploaded where the
  construct's BucketDeployment puts it: the bucket output, then the prefix output and the file's name.
* SageMaker is the emulated control plane (hyperpod_local.control_plane, in memory, no nodes): moto's
  DescribeCluster has no ``TargetCount``, which drift reads. ``AWS_ENDPOINT_URL_SAGEMAKER`` points botocore at it
  and every other service at moto (botocore's service-specific endpoint variable).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

from hyperpod_local.control_plane.fleet import Fleet, Settings
from hyperpod_local.control_plane.memory import MemoryBackend
from hyperpod_local.control_plane.model import ClusterInfo, Group, Node
from hyperpod_local.control_plane.operations import ControlPlane
from hyperpod_local.control_plane.protocol import Endpoint
from hyperpod_local.control_plane.sigv4 import Key

SNAPSHOTS = Path(__file__).parent / "snapshots"
KEPT = ("AWS::SageMaker::Cluster", "AWS::FSx::FileSystem", "AWS::S3::Bucket")
OUTPUTS = ("ClusterName", "LifecycleBucket", "LifecyclePrefix")
ROLE = "arn:aws:iam::123456789012:role/hyperpod-execution"


def snapshot(example: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(stack name, template, parameters file) of an example's snapshot."""
    (template_path,) = [p for p in SNAPSHOTS.glob(f"{example}.hyperpod-*.json")]
    stack = template_path.name[len(example) + 1 : -len(".json")]
    (parameters,) = json.loads((SNAPSHOTS / f"{example}.parameters.json").read_text()).values()
    return stack, json.loads(template_path.read_text()), parameters


def cluster_groups(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    return list(cluster["Properties"]["InstanceGroups"])


def deploy_stack(session: boto3.session.Session, example: str, template: dict[str, Any] | None = None) -> str:
    """Creates the example's (cut) stack in moto and uploads its parameters file; returns the stack name."""
    stack, full, parameters = snapshot(example)
    full = template or full
    cut = {
        "Resources": {k: v for k, v in full["Resources"].items() if v["Type"] in KEPT},
        "Outputs": {k: v for k, v in full["Outputs"].items() if k in OUTPUTS},
    }
    cloudformation = session.client("cloudformation")
    cloudformation.create_stack(StackName=stack, TemplateBody=json.dumps(cut))
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["Outputs"]
    }
    session.client("s3").put_object(
        Bucket=outputs["LifecycleBucket"],
        Key=outputs["LifecyclePrefix"] + parameters["file_name"],
        Body=json.dumps(parameters["content"]).encode(),
    )
    return stack


@contextmanager
def control_plane(
    cluster_name: str, groups: list[dict[str, Any]], targets: Mapping[str, int] | None = None
) -> Iterator[str]:
    """The cluster of ``groups`` (the template's InstanceGroups) in the emulated control plane, each group at
    ``targets[name]`` (default its InstanceCount); yields the endpoint URL (signed with moto's test key)."""
    clock = [1_795_000_000.0]  # the emulated fleet's injected clock (its nodes' launch times); SigV4 uses the real one
    backend = MemoryBackend()
    made: list[Group] = []
    nodes: list[Node] = []
    for g in groups:
        slurm = g.get("SlurmConfig") or {}
        target = (targets or {}).get(g["InstanceGroupName"], g["InstanceCount"])
        group = Group(
            g["InstanceGroupName"],
            slurm.get("NodeType", "Compute"),
            g["InstanceType"],
            target,
            ROLE,
            {"SourceS3Uri": "s3://bucket/lifecycle/", "OnCreate": "on_create.sh"},
            partition=(slurm.get("PartitionNames") or [None])[0],
        )
        made.append(group)
        for _ in range(target):
            node = Node(f"logical-{len(nodes)}", group.name, group.instance_type, "Running", clock[0])
            node.instance = backend.allocate(group)
            nodes.append(node)
    settings = Settings(launch_latency=60.0, retry_interval=30.0)
    fleet = Fleet(made, nodes, backend, settings=lambda: settings, clock=lambda: clock[0], spawn=lambda w: w())
    arn = f"arn:aws:sagemaker:us-west-2:123456789012:cluster/{'ab' * 6}"
    plane = ControlPlane(ClusterInfo(cluster_name, arn, True, clock[0]), fleet)
    endpoint = Endpoint(plane, lambda: [Key("testing", "testing")], clock=time.time)
    url = endpoint.serve()
    try:
        yield url
    finally:
        endpoint.stop()
