"""`scale` (UpdateCluster, not in moto: HyperPodFakes), `events` (ListClusterEvents, not in moto: HyperPodFakes)
and `training-job-config` (moto's CloudFormation DescribeStacks)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from clock import ago, utc
from hyperpod_cdk.aws.session import make_session
from hyperpod_cdk.ops import training_job
from ops_support import MotoCluster, Operator, aws_env, moto_url, stack_with_outputs  # noqa: F401

pytestmark = pytest.mark.usefixtures("aws_env")
ROOT = Path(__file__).resolve().parent.parent


def cluster(**tags: str) -> MotoCluster:
    return MotoCluster(
        "train", {"controller": ("ml.m5.xlarge", 1, "Controller"), "p5": ("ml.p5.48xlarge", 2, "Compute")}, tags
    ).create()


def test_scale_an_unmanaged_cluster_sends_the_whole_group() -> None:
    made = cluster()
    operator = Operator()
    result = operator("scale", "train", "p5", "4")
    assert result.code == 0, result.err
    assert operator.fakes.calls == [
        (
            "UpdateCluster",
            {
                "ClusterName": "train",
                "InstanceGroups": [
                    {
                        "InstanceGroupName": "p5",
                        "InstanceType": "ml.p5.48xlarge",
                        "InstanceCount": 4,
                        "LifeCycleConfig": {
                            "SourceS3Uri": "s3://sagemaker-lifecycle-bucket/lifecycle/",
                            "OnCreate": "on_create.sh",
                        },
                        "ExecutionRole": "arn:aws:iam::123456789012:role/hyperpod-execution",
                        "ThreadsPerCore": 1,
                        "SlurmConfig": {"NodeType": "Compute"},
                    }
                ],
            },
        )
    ]
    assert "2 -> 4" in result.out
    assert made.group("p5")["TargetCount"] == 4
    assert Operator()("status", "train", "--json").json()["groups"][1]["target_count"] == 4


def test_scale_refuses_a_stack_owned_cluster_and_names_the_change() -> None:
    cluster(**{"aws:cloudformation:stack-name": "hyperpod-train"})
    operator = Operator()
    result = operator("scale", "train", "p5", "4")
    assert result.code == 5
    assert operator.fakes.calls == []
    assert "stack hyperpod-train owns the count of group p5" in result.err
    assert "set `count: 4` on the instance group named p5" in result.err
    drift = operator("scale", "train", "p5", "4", "--allow-drift")
    assert drift.code == 0
    assert [name for name, _ in operator.fakes.calls] == ["UpdateCluster"]
    assert "Keep the stack in step" in drift.out


def test_scale_with_the_config_names_its_line_and_checks_the_new_count(tmp_path: Path) -> None:
    cluster()
    config = tmp_path / "cluster.yaml"
    config.write_text((ROOT / "examples" / "gpu-cluster.yaml").read_text())
    operator = Operator()
    result = operator("scale", "train", "p5", "12", "--config", str(config), "--json")
    assert result.code == 5
    report = result.json()
    assert report["config_change"]["path"] == "instance_groups[2].count"
    assert report["config_change"]["before"] == 8
    assert "count: 8 -> 12" in report["config_change"]["text"]
    bad = operator("scale", "train", "controller", "0", "--config", str(config), "--allow-drift")
    assert bad.code == 2
    assert "count 0 does not pass the config's rules" in bad.err
    assert operator.fakes.calls == []


def test_scale_dry_run_and_unknown_group() -> None:
    cluster()
    operator = Operator()
    assert operator("scale", "train", "p5", "3", "--dry-run").code == 0
    missing = operator("scale", "train", "trn1", "3")
    assert missing.code == 3
    assert operator.fakes.calls == []


EVENT = {
    "EventId": "6f0c2f84-1b0e-4a39-9c55-000000000001",
    "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/train",
    "ClusterName": "train",
    "ResourceType": "Instance",
    "EventTime": utc(3600),  # an hour before the commands' clock; botocore parses timestamps to datetime
    "EventLevel": "Error",
}


@pytest.mark.calendar
def test_events_page_through_list_cluster_events() -> None:
    made = cluster()
    made.set(NodeProvisioningMode="Continuous")
    operator = Operator()
    operator.fakes.events = [{**EVENT, "Description": f"node {n} failed health check"} for n in range(5)]
    result = operator("events", "train", "--since", "2h", "--group", "p5", "--json")
    assert result.code == 0, result.err
    assert [e["Description"] for e in result.json()["events"]] == [f"node {n} failed health check" for n in range(5)]
    first = operator.fakes.calls[0][1]
    assert first["InstanceGroupName"] == "p5"
    assert first["EventTimeAfter"] == ago(2 * 3600)  # --since 2h, counted back from the commands' clock
    assert len(operator.fakes.calls) == 3  # pages of 2 through the paginator's NextToken
    human = operator("events", "train")
    assert "node 4 failed health check" in human.out


def test_events_need_continuous_provisioning() -> None:
    cluster()
    operator = Operator()
    result = operator("events", "train")
    assert result.code == 5
    assert "NodeProvisioningMode unset" in result.err
    assert operator.fakes.calls == []


OUTPUTS = {
    "ClusterName": "train",
    "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc123",
    "SsmTargetPrefix": "sagemaker-cluster:abc123_",
    "TrainingJobSubnetIds": "subnet-0aaa",
    "TrainingJobSecurityGroupIds": "sg-0bbb",
    "FsxFileSystemId": "fs-0ccc",
    "FsxDnsName": "fs-0ccc.fsx.us-west-2.amazonaws.com",
    "FsxMountName": "abcdefgh",
}


def test_training_job_config_from_stack_outputs() -> None:
    stack_with_outputs("hyperpod-train", OUTPUTS)
    result = Operator()("training-job-config", "hyperpod-train", "--directory", "datasets/tokenized", "--json")
    assert result.code == 0, result.err
    config = result.json()
    assert config["CreateTrainingJob"] == {
        "VpcConfig": {"Subnets": ["subnet-0aaa"], "SecurityGroupIds": ["sg-0bbb"]},
        "InputDataConfig": [
            {
                "ChannelName": "training",
                "InputMode": "File",
                "DataSource": {
                    "FileSystemDataSource": {
                        "FileSystemId": "fs-0ccc",
                        "FileSystemType": "FSxLustre",
                        "DirectoryPath": "/abcdefgh/datasets/tokenized",
                        "FileSystemAccessMode": "ro",
                    }
                },
            }
        ],
    }


def test_the_python_snippet_builds_the_file_system_input(monkeypatch: pytest.MonkeyPatch) -> None:
    stack_with_outputs("hyperpod-train", OUTPUTS)
    snippet = Operator()("training-job-config", "hyperpod-train", "--python", "--access-mode", "rw").out
    made: list[dict[str, Any]] = []
    inputs = types.ModuleType("sagemaker.inputs")
    inputs.FileSystemInput = lambda **kwargs: made.append(kwargs) or kwargs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sagemaker", types.ModuleType("sagemaker"))
    monkeypatch.setitem(sys.modules, "sagemaker.inputs", inputs)
    namespace: dict[str, Any] = {}
    exec(compile(snippet, "snippet", "exec"), namespace)
    assert namespace["subnets"] == ["subnet-0aaa"]
    assert namespace["security_group_ids"] == ["sg-0bbb"]
    assert made == [
        {
            "file_system_id": "fs-0ccc",
            "file_system_type": "FSxLustre",
            "directory_path": "/abcdefgh",
            "file_system_access_mode": "rw",
        }
    ]


def test_training_job_config_without_fsx_and_unknown_stack() -> None:
    stack_with_outputs("no-fsx", {k: v for k, v in OUTPUTS.items() if not k.startswith("Fsx")})
    config = Operator()("training-job-config", "no-fsx", "--json").json()
    assert "InputDataConfig" not in config["CreateTrainingJob"]
    missing = Operator()("training-job-config", "nope")
    assert missing.code == 3
    assert "no CloudFormation stack 'nope'" in missing.err
    stack_with_outputs("other", {"Foo": "bar"})
    other = Operator()("training-job-config", "other")
    assert other.code == 3
    assert "is it a hyperpod-cdk TrainingClusterStack?" in other.err


def test_output_names_match_the_synthesized_stacks() -> None:
    """The names read here are the ones TrainingClusterStack writes (snapshots of the example stacks), and every
    output of every snapshot is one of hyperpod_cdk.core.stack_outputs' names: one definition, read by both."""
    import re

    from hyperpod_cdk.core import stack_outputs

    read = {
        training_job.CLUSTER_NAME,
        training_job.TRAINING_JOB_SUBNETS,
        training_job.TRAINING_JOB_SECURITY_GROUPS,
        training_job.FSX_FILE_SYSTEM_ID,
        training_job.FSX_MOUNT_NAME,
    }
    template = json.loads((ROOT / "tests" / "snapshots" / "gpu-cluster.hyperpod-gpu-cluster.json").read_text())
    assert read <= set(template["Outputs"])
    named = {v for k, v in vars(stack_outputs).items() if k.isupper() and isinstance(v, str)}
    bucket = re.compile(stack_outputs.data_repository_bucket("[A-Z][A-Za-z0-9]*"))
    stacks = [json.loads(p.read_text()) for p in sorted((ROOT / "tests" / "snapshots").glob("*.hyperpod-*.json"))]
    clusters = [t for t in stacks if str(t.get("Description", "")).startswith("SageMaker HyperPod Slurm cluster")]
    assert len(clusters) >= 9  # every example's TrainingClusterStack
    for template in clusters:
        outputs = template["Outputs"]
        unnamed = [o for o in outputs if o not in named and not bucket.fullmatch(o)]
        assert unnamed == [], f"{template['Description']}: outputs not in hyperpod_cdk.core.stack_outputs: {unnamed}"


def test_scale_sets_a_scaled_groups_count_without_drift_inside_the_scalers_bounds() -> None:
    """The scaler's heartbeat tag names the group with min..max: a deploy keeps the deployed count of such a group,
    so `scale` on a stack-owned cluster sends UpdateCluster, but only inside the bounds."""
    made = cluster(**{"aws:cloudformation:stack-name": "hyperpod-train"})
    session = make_session(None, None)
    session.client("sagemaker").add_tags(
        ResourceArn=made.model.arn,
        Tags=[{"Key": "hyperpod-cdk:scaler", "Value": "ok 2026-11-26T01:02:03Z p5=2/1..3 pending=0"}],
    )
    operator = Operator()
    above = operator("scale", "train", "p5", "4")
    assert above.code == 2, above.err
    assert "the scaler keeps group p5 within 1..3" in above.err
    assert operator.fakes.calls == []
    inside = operator("scale", "train", "p5", "3")
    assert inside.code == 0, inside.err
    assert [name for name, _ in operator.fakes.calls] == ["UpdateCluster"]
    assert "The scaler owns this count within 1..3" in inside.out
    assert "Keep the stack in step" not in inside.out
    assert made.group("p5")["TargetCount"] == 3
