"""Nodes joining and leaving a local cluster's layout (pure: no nodes run): names, addresses, the state file's
round trip, and slurm.conf for a group at 0 and after a join."""

from __future__ import annotations

from hyperpod_local.hyperpod_files import slurm_conf
from hyperpod_local.layout import LocalLayout, plan_nodes
from hyperpod_local.membership import grown, shrunk
from training_runtime.groups import GroupSpec
from training_runtime.node_names import INSTANCE_NAMES, IP_NAMES

GROUPS = (
    GroupSpec("controller", "controller", "ml.m5.xlarge"),
    GroupSpec("cpu", "compute", "ml.c5.xlarge", partition="cpu"),
    GroupSpec("burst", "compute", "ml.c5.2xlarge", partition="burst"),
)


def layout() -> LocalLayout:
    return plan_nodes("scaled", GROUPS, {"controller": 1, "cpu": 1, "burst": 0}, subnet="10.9.0.0/24")


def partitions(conf: str) -> dict[str, str]:
    lines = [line.split() for line in conf.splitlines() if line.startswith("PartitionName=")]
    return {w[0].split("=")[1]: next((x.split("=", 1)[1] for x in w if x.startswith("Nodes=")), "") for w in lines}


def test_a_group_at_zero_keeps_an_empty_partition_and_a_joined_node_enters_it() -> None:
    start = layout()
    assert partitions(slurm_conf(start, IP_NAMES))["burst"] == ""
    after, node = grown(start, "burst")
    assert (node.name, node.ip, node.instance_type) == ("burst-1", "10.9.0.12", "ml.c5.2xlarge")
    assert partitions(slurm_conf(after, IP_NAMES))["burst"] == "ip-10-9-0-12"
    assert partitions(slurm_conf(after, INSTANCE_NAMES))["burst"] == "burst-1"
    assert "NodeName=burst-1 " in slurm_conf(after, INSTANCE_NAMES)


def test_names_are_never_reused_and_addresses_are_the_lowest_free() -> None:
    one, first = grown(layout(), "burst")
    two, second = grown(one, "burst")
    assert [first.name, second.name] == ["burst-1", "burst-2"]
    fewer = shrunk(two, "burst-2")
    three, third = grown(fewer, "burst")
    assert third.name == "burst-3"  # burst-2 (and its instance id) is gone for good
    assert third.ip == second.ip  # its address is free again
    restored = LocalLayout.from_json(three.to_json())  # the state file keeps the numbering
    assert restored == three and grown(restored, "burst")[1].name == "burst-4"
