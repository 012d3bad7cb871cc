"""The emulator's broken HyperPod (hyperpod_local.breakage) without root: what each topology kind makes the agent
write, the 25.11 tags, the kinds a cluster cannot play, and the command line."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hyperpod_local import breakage
from hyperpod_local.cli import main

CONF = (
    "ClusterName=c\nTopologyPlugin=topology/tree\nPartitionName=dev Nodes=ALL Default=YES\nPartitionName=gpu Nodes=a\n"
)
TREE = "SwitchName=nn-1 Nodes=a\n"


def cluster(tmp_path: Path, kind: str | None, slurm: str = "24.11") -> Any:
    (tmp_path / "cluster").mkdir(exist_ok=True)
    if kind is not None:
        (tmp_path / breakage.RECORD).write_text(json.dumps({"kind": kind}))
    return SimpleNamespace(workdir=tmp_path, state=SimpleNamespace(variant=SimpleNamespace(slurm=slurm)))


@pytest.mark.parametrize(
    ("kind", "wanted"),
    [
        (None, (CONF, TREE)),
        (breakage.TOPOLOGY_MISSING, (CONF, None)),
        (breakage.TOPOLOGY_EMPTY, (CONF, breakage.EMPTY_TOPOLOGY)),
        (breakage.PYXIS_TWICE, (CONF, TREE)),
    ],
)
def test_while_a_topology_kind_is_active_every_publish_writes_it_that_way(
    tmp_path: Path, kind: str | None, wanted: tuple[str, str | None]
) -> None:
    assert breakage.topology_as_written(cluster(tmp_path, kind), CONF, TREE) == wanted


def test_topology_turned_off_uses_the_plugin_the_slurm_has(tmp_path: Path) -> None:
    conf, tree = breakage.topology_as_written(cluster(tmp_path, breakage.TOPOLOGY_FLAT, "24.11"), CONF, TREE)
    assert tree is None and "TopologyPlugin=topology/default\n" in conf
    conf, _ = breakage.topology_as_written(cluster(tmp_path, breakage.TOPOLOGY_FLAT, "26.05"), CONF, TREE)
    assert "TopologyPlugin=topology/flat\n" in conf


def test_the_25_11_tag_goes_on_the_compute_partitions_only() -> None:
    assert breakage.tagged(CONF, ("gpu",)).splitlines()[-2:] == [
        "PartitionName=dev Nodes=ALL Default=YES",
        "PartitionName=gpu Nodes=a Topology=tree",
    ]


def test_a_kind_the_cluster_cannot_play_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(breakage.BreakageError, match="allowed: topology-missing"):
        breakage.break_slurm(cluster(tmp_path, None), "everything", "24.11")
    with pytest.raises(breakage.BreakageError, match=r"does not read topology.yaml.*--slurm 26.05"):
        breakage.break_slurm(cluster(tmp_path, None), breakage.TOPOLOGY_YAML_EMPTY, "24.11")
    assert not (tmp_path / breakage.RECORD).exists()


def test_the_command_wants_a_kind_or_heal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["break", "nonsense", "--workdir", str(tmp_path)])
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err
