"""Synth's look-up of the deployed cluster, cached in CDK's context (cdk.context.json): a second synth asks AWS
nothing and gets the same counts; `cdk context --reset KEY` (the key removed) makes it ask again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hyperpod_cdk.core.config import parse_config
from hyperpod_cdk.core.deployment import deployment
from hyperpod_cdk.deployed.synth_context import cached_counts, context_key, write_context

CONTROLLER = {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}
GPU = {"name": "gpu", "instance_type": "ml.g5.xlarge", "count": 2, "scaling": {"min": 0, "max": 8}}
CONFIG = {
    "cluster_name": "elastic",
    "node_provisioning_mode": "continuous",
    "instance_groups": [CONTROLLER, GPU],
    "observability": {"enabled": False},
}
KEY = "hyperpod-cdk:deployed-counts:region=us-west-2:cluster=elastic"


class SageMaker:
    """DescribeCluster's answer, counting the calls."""

    def __init__(self, gpu: int | None) -> None:
        self.gpu, self.calls = gpu, 0

    def describe_cluster(self, ClusterName: str) -> dict[str, Any]:
        self.calls += 1
        if self.gpu is None:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "ResourceNotFound", "Message": "no"}}, "DescribeCluster")
        groups = [
            {"InstanceGroupName": "controller", "TargetCount": 1},
            {"InstanceGroupName": "gpu", "TargetCount": self.gpu},
        ]
        return {"ClusterName": ClusterName, "InstanceGroups": groups}


def context_of(path: Path, given: dict[str, Any] | None = None) -> Any:
    """What the CDK CLI gives the app: cdk.context.json's keys (and -c values)."""
    found = json.loads(path.read_text()) if path.exists() else {}
    return {**found, **(given or {})}.get


def test_the_first_synth_records_the_counts_and_the_next_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "cdk.context.json"
    path.write_text(json.dumps({"availability-zones:account=1:region=us-west-2": ["us-west-2a"]}))
    client = SageMaker(gpu=5)
    deployed = deployment(parse_config(CONFIG))
    assert cached_counts(deployed, context_of(path), client=lambda: client, context_file=path, region="us-west-2") == {
        "controller": 1,
        "gpu": 5,
    }
    assert json.loads(path.read_text()) == {
        "availability-zones:account=1:region=us-west-2": ["us-west-2a"],  # CDK's own keys are kept
        KEY: {"controller": 1, "gpu": 5},
    }
    client.gpu = 7  # the scaler grew the group: a synth from the record still says 5 (reproducible)
    again = cached_counts(deployed, context_of(path), client=lambda: client, context_file=path, region="us-west-2")
    assert again == {"controller": 1, "gpu": 5} and client.calls == 1
    path.write_text(json.dumps({}))  # `cdk context --reset KEY`
    fresh = cached_counts(deployed, context_of(path), client=lambda: client, context_file=path, region="us-west-2")
    assert fresh == {"controller": 1, "gpu": 7} and client.calls == 2


def test_no_cluster_is_not_recorded_and_config_counts_ask_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cdk.context.json"
    client = SageMaker(gpu=None)
    deployed = deployment(parse_config(CONFIG))
    assert (
        cached_counts(deployed, context_of(path), client=lambda: client, context_file=path, region="us-west-2") is None
    )
    assert not path.exists() and client.calls == 1  # the first synth after the cluster exists records it
    choice = context_of(path, {"scaler_counts": "config"})
    assert cached_counts(deployed, choice, client=lambda: client, context_file=path) is None and client.calls == 1


def test_the_key_follows_cdks_convention_and_the_write_keeps_other_keys(tmp_path: Path) -> None:
    assert context_key("elastic", "us-west-2") == KEY  # starts with the package's name, as CDK's guide asks
    path = tmp_path / "cdk.context.json"
    write_context(path, "a", 1)
    write_context(path, "b", {"x": 2})
    assert json.loads(path.read_text()) == {"a": 1, "b": {"x": 2}}
    assert [p.name for p in tmp_path.iterdir()] == ["cdk.context.json"]  # no temporary file left behind
