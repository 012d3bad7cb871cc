"""The emulator's engine in layers (no root): the variant checked once, the plan made before anything starts, the
state file as the store, and the daemons' entry point that opens the engine."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hyperpod_local import cli
from hyperpod_local.layout import LayoutError
from hyperpod_local.namespaces import DEFAULT_PREFIX
from hyperpod_local.plan import UpOptions, plan
from hyperpod_local.state import ClusterState, LocalClusterError, change_layout, read_state, write_state
from hyperpod_local.variant import DEFAULT_SLURM, Variant, VariantError
from training_runtime.node import GENERIC, HYPERPOD
from training_runtime.node_names import INSTANCE_NAMES, IP_NAMES

ROOT = Path(__file__).resolve().parent.parent
CPU_CLUSTER = ROOT / "examples" / "cpu-cluster.yaml"


def test_the_python_api_and_the_command_line_share_one_default_the_hyperpod_platform() -> None:
    parser = cli.argparse.ArgumentParser()
    cli.add_commands(parser)
    from_command_line = cli.up_variant(parser.parse_args(["up"]))
    assert Variant() == from_command_line == Variant(HYPERPOD, IP_NAMES, DEFAULT_SLURM, True, False, False)
    assert Variant(platform=GENERIC) == Variant(GENERIC, INSTANCE_NAMES, None, True, False, False)


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        ({"platform": "aws"}, r"^platform: got 'aws'; allowed: hyperpod, generic$"),
        ({"slurm": "23.02"}, r"^slurm: got '23.02'; allowed: 24.11 \(Debian trixie\), 26.05 \(Debian forky\)$"),
        ({"platform": GENERIC, "preconfigured_ami": True}, r"^preconfigured_ami: got True on platform 'generic'"),
        ({"platform": GENERIC, "stale_worker_copies": True}, r"^stale_worker_copies: got True on platform 'generic'"),
    ],
)
def test_a_variant_is_checked_once_on_construction_with_one_line(choices: dict[str, object], message: str) -> None:
    with pytest.raises(VariantError, match=message) as error:
        Variant(**choices)  # type: ignore[arg-type]
    assert "\n" not in str(error.value)


def test_a_variant_is_frozen_and_round_trips_through_json() -> None:
    chosen = Variant(node_names=INSTANCE_NAMES, slurm="26.05", automatic_topology=False, preconfigured_ami=True)
    assert Variant.from_json(json.loads(json.dumps(chosen.to_json()))) == chosen
    with pytest.raises(dataclasses.FrozenInstanceError):
        chosen.platform = GENERIC  # type: ignore[misc]


def test_a_plan_needs_no_root_and_decides_the_nodes_and_the_prefix(tmp_path: Path) -> None:
    decided = plan(CPU_CLUSTER, tmp_path / "work", Variant(), UpOptions(max_workers=1, subnet="10.9.0.0/24"))
    assert decided.directory == (tmp_path / "work").absolute() and not decided.directory.exists()
    assert [n.role for n in decided.layout.nodes] == ["controller", "login", "compute"]
    assert decided.layout.subnet == "10.9.0.0/24"
    parameters = json.loads(decided.files["hyperpod_cdk_parameters.json"])
    assert parameters["hyperpod_cdk"]["emulation"]["sagemaker_url"] == "http://10.9.0.3:8112"
    state = decided.state(None, True, False)
    assert (state.variant, state.prefix, state.rootfs) == (Variant(), DEFAULT_PREFIX, None)
    assert (state.host_had_run_netns, state.host_had_run_mount) == (True, False)


def test_a_plan_refuses_what_cannot_be_built_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match="give a group count 0"):
        plan(CPU_CLUSTER, tmp_path, Variant(stale_worker_copies=True), UpOptions())
    with pytest.raises(LocalClusterError, match="not both"):
        plan(CPU_CLUSTER, tmp_path, Variant(), UpOptions(assembly=tmp_path))
    with pytest.raises(LocalClusterError, match="prefix: got 'a b'"):
        plan(CPU_CLUSTER, tmp_path, Variant(), UpOptions(prefix="a b"))


def test_the_state_file_is_the_store_a_layout_change_goes_through(tmp_path: Path) -> None:
    decided = plan(CPU_CLUSTER, tmp_path, Variant(), UpOptions())
    write_state(tmp_path, decided.state(None, False, False))
    (tmp_path / ".lock").touch()
    last = decided.layout.nodes[-1]
    shrunk = change_layout(tmp_path, lambda layout: dataclasses.replace(layout, nodes=layout.nodes[:-1]))
    assert read_state(tmp_path).layout == shrunk and last not in shrunk.nodes
    assert read_state(tmp_path).variant == Variant()
    with pytest.raises(LocalClusterError, match=r"^no local cluster in .*Fix: `hyperpod-local up"):
        read_state(tmp_path / "elsewhere")
    assert isinstance(read_state(tmp_path), ClusterState)


def test_a_daemon_opens_the_engine_and_reports_a_missing_cluster_in_one_line(tmp_path: Path) -> None:
    for daemon in ("hyperpod_local.agent", "hyperpod_local.control_plane"):
        result = subprocess.run(
            [sys.executable, "-m", "hyperpod_local.processes", daemon, "--workdir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 1, result.stderr
        assert result.stderr.splitlines() == [
            f"{daemon}: no local cluster in {tmp_path} (no state.json). Fix: `hyperpod-local up --config FILE` "
            "or pass the --workdir the cluster was created with"
        ]
