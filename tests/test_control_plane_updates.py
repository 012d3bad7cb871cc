"""The emulated control plane refuses an UpdateCluster that changes a member AWS says cannot change once the
instance group exists, with a ValidationException quoting AWS, and changes nothing (the in-memory backend of
tests/test_control_plane.py; no root, no nodes)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_cdk.aws_data.update_policy import Kind, declarations, policy_for
from hyperpod_local.control_plane.refusals import REFUSED
from test_control_plane import GPU, ROLE, Harness, code, groups, make

cp = pytest.fixture(make())

SPEC = {"InstanceGroupName": "gpu", "InstanceCount": 3, "ExecutionRole": ROLE, "InstanceType": GPU}
KMS = "arn:aws:kms:us-west-2:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _refused(cp: Harness, change: dict[str, Any]) -> str:
    client = cp.client()
    events = len(client.list_cluster_events(ClusterName="ml-cluster").get("Events", []))
    with pytest.raises(ClientError) as error:
        client.update_cluster(ClusterName="ml-cluster", InstanceGroups=[{**SPEC, **change}])
    assert code(error) == "ValidationException"
    cp.later(120)
    assert groups(client)["gpu"] == (2, 2)  # the count in the same request did not change either
    assert not [e for e in cp.backend.log if e[0] != "allocate"]  # no launch, no termination
    assert len(client.list_cluster_events(ClusterName="ml-cluster").get("Events", [])) == events
    return str(error.value.response["Error"]["Message"])


@pytest.mark.parametrize(
    ("change", "member", "quote"),
    [
        ({"SlurmConfig": {"NodeType": "Login"}}, "SlurmConfig.NodeType", "NodeType"),
        ({"InstanceType": "ml.p5e.48xlarge"}, "InstanceType", "you must match the instance type you initially"),
        ({"ThreadsPerCore": 2}, "ThreadsPerCore", "keep using the same value you specified"),
        ({"CapacityRequirements": {"Spot": {}}}, "CapacityRequirements", "CapacityRequirements cannot be modified"),
        (
            {
                "OverrideVpcConfig": {
                    "SecurityGroupIds": ["sg-0123456789abcdef0"],
                    "Subnets": ["subnet-0123456789abcdef0"],
                }
            },
            "OverrideVpcConfig",
            "Cannot be modified after the instance group is created",
        ),
        (
            {"InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 100, "VolumeKmsKeyId": KMS}}]},
            "InstanceStorageConfigs.EbsVolumeConfig.VolumeKmsKeyId",
            "",
        ),
        (
            {"ExecutionRole": ROLE + "-compute"},  # AWS: keep the role attached at creation (issue #39's role split)
            "ExecutionRole",
            "keep using the same IAM role",
        ),
    ],
)
def test_a_refused_member_is_a_validation_exception_quoting_aws_and_changes_nothing(
    cp: Harness, change: dict[str, Any], member: str, quote: str
) -> None:
    message = _refused(cp, change)
    field = REFUSED[member][0]
    assert f"InstanceGroups[0].{member}: cannot be updated on the existing instance group gpu" in message
    assert (policy_for(field).quote or "")[:60] in message and quote in message
    assert (policy_for(field).source or "") in message


def test_the_deployed_value_and_an_in_place_change_pass(cp: Harness) -> None:
    client = cp.client()
    same = {"SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["gpu"]}}
    client.update_cluster(ClusterName="ml-cluster", InstanceGroups=[{**SPEC, **same}])
    cp.later(60)
    assert groups(client)["gpu"] == (3, 3)


def test_the_emulator_refuses_every_field_the_policies_refuse() -> None:
    refused_fields = {
        path
        for path in declarations()
        if path.count(".") == 1 and path.startswith("instance_groups[].") and policy_for(path).kind is Kind.REFUSED
    }
    assert {field for field, *_ in REFUSED.values()} == refused_fields
