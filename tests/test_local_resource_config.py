"""What the emulated HyperPod gives a node in /opt/ml/config: resource_config.json in AWS's shape (the controller's
current copy, the workers' stale one), the controller's cluster_agent.json, and the switches that choose them."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hyperpod_cdk.core.config import parse_config
from hyperpod_local.layout import LayoutError, cluster_agent_config, plan_layout, resource_config, stale_instances
from hyperpod_local.staging import DeployedModes, StagedPrefix, provision, stage
from hyperpod_local.state import ClusterState
from hyperpod_local.variant import Variant, VariantError
from training_runtime.node_names import INSTANCE_NAMES, IP_NAMES, decide_naming
from training_runtime.resources import ResourceConfig


def layout(spare: int = 0):  # type: ignore[no-untyped-def]
    groups = [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
        {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 1},
        {"name": "cpu", "role": "compute", "instance_type": "ml.c5.4xlarge", "count": 2},
        {"name": "spare", "role": "compute", "instance_type": "ml.c5.large", "count": spare},
    ]
    return plan_layout(parse_config({"cluster_name": "lab", "storage": None, "instance_groups": groups}))


def test_a_stale_worker_copy_still_lists_the_group_the_controllers_copy_shows_empty() -> None:
    local = layout()
    current = ResourceConfig.from_json(resource_config(local))
    stale = ResourceConfig.from_json(resource_config(local, stale=True))
    assert current.instances("spare") == ()
    (ghost,) = stale.instances("spare")
    assert ghost.name == "spare-1" and ghost.instance_type == "ml.c5.large"
    assert ghost.address not in {n.ip for n in local.nodes}, "a stale instance has no live node's address"
    assert [i for i in stale.all_instances() if i.group != "spare"] == current.all_instances()


def test_stale_copies_need_a_group_at_0() -> None:
    with pytest.raises(LayoutError, match=r"every group has local nodes.*give a group count 0"):
        stale_instances(layout(spare=1))


def test_cluster_agent_json_carries_the_naming_the_runtime_reads(tmp_path: Path) -> None:
    for naming in (IP_NAMES, INSTANCE_NAMES):
        path = tmp_path / f"{naming}.json"
        path.write_text(json.dumps(cluster_agent_config(naming)))
        assert decide_naming(path, "other", "cpu-1", "10.250.0.12").mode == naming


def test_the_naming_switch_is_checked_against_the_platform() -> None:
    assert (Variant().naming, Variant(platform="generic").naming) == (IP_NAMES, INSTANCE_NAMES)
    assert Variant(node_names=INSTANCE_NAMES).naming == INSTANCE_NAMES
    with pytest.raises(VariantError, match=r"^node_names: got 'ip' on platform 'generic'.*instance names"):
        Variant(platform="generic", node_names=IP_NAMES)
    with pytest.raises(VariantError, match=r"^node_names: got 'dns'; allowed: ip, instance$"):
        Variant(node_names="dns")


def test_the_state_remembers_both_switches_and_reads_older_files() -> None:
    chosen = Variant(node_names=INSTANCE_NAMES, stale_worker_copies=True)
    state = ClusterState("c.yaml", "api-driven", "/fsx", "hp", layout(), True, False, False, chosen)
    assert ClusterState.from_json(json.loads(json.dumps(state.to_json()))) == state
    old = {k: v for k, v in state.to_json().items() if k != "variant"}  # a file from before the variant value
    old.update(platform="hyperpod", slurm="24.11", automatic_topology=True, preconfigured_ami=False)
    assert ClusterState.from_json({**old, "naming": INSTANCE_NAMES, "stale_worker_copies": True}).variant == chosen
    assert ClusterState.from_json(old).variant == Variant()  # before the switches: the platform's names


class Recorder:
    """A cluster whose ``exec`` keeps the archive each node was sent."""

    def __init__(self, workdir: Path, stale: bool) -> None:
        self.workdir = workdir
        self.state = SimpleNamespace(variant=Variant(stale_worker_copies=stale), mode="api-driven")
        self.sent: dict[str, dict[str, bytes]] = {}

    def exec(self, name: str, argv: Sequence[str], *, input: Any = None, timeout: Any = None) -> Any:
        with tarfile.open(fileobj=io.BytesIO(input)) as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.name.startswith("config/")}  # type: ignore[union-attr]
        self.sent[name] = files
        return subprocess.CompletedProcess(argv, 0, "", "")


@pytest.mark.parametrize("stale", [False, True])
def test_each_node_gets_its_copy_and_only_the_controller_gets_cluster_agent_json(tmp_path: Path, stale: bool) -> None:
    local = layout()
    files = StagedPrefix({"on_create.sh": b"#!/bin/sh\n"}, DeployedModes("api-driven", None))
    stage(tmp_path, local, files, naming=INSTANCE_NAMES, stale_worker_copies=stale)
    cluster = Recorder(tmp_path, stale)
    for node in local.nodes:
        provision(cluster, node)  # type: ignore[arg-type]
    controller, *others = [cluster.sent[n.name] for n in local.nodes]
    assert json.loads(controller["config/cluster_agent.json"]) == cluster_agent_config(INSTANCE_NAMES)
    assert json.loads(controller["config/resource_config.json"]) == resource_config(local)
    for files in others:
        assert "config/cluster_agent.json" not in files
        assert json.loads(files["config/resource_config.json"]) == resource_config(local, stale=stale)


def test_the_command_line_passes_both_switches_to_up() -> None:
    from hyperpod_local import cli

    def variant(*argv: str) -> Variant:
        parser = argparse.ArgumentParser()
        cli.add_commands(parser)
        return cli.up_variant(parser.parse_args(["up", *argv]))

    assert variant("--node-names", "instance", "--stale-worker-copies") == Variant(
        node_names=INSTANCE_NAMES, stale_worker_copies=True
    )
    assert variant() == Variant() and Variant().naming == IP_NAMES  # the platform's own names


def test_a_variant_the_platform_cannot_have_is_one_line_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_local import cli

    assert cli.main(["up", "--platform", "generic", "--stale-worker-copies"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: stale_worker_copies: got True on platform 'generic', which allows only the default (every node "
        "renders slurm.conf from its own copy). Fix: platform 'hyperpod', or leave stale_worker_copies out"
    ]
