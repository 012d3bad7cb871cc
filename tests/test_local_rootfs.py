"""The nodes' root file systems: the Slurm-major-to-suite table, the build script's suites and cache keys, where a
cluster's choice is kept (unit tests; no root, no build: the script only prints paths here)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import pytest

from hyperpod_local import LocalClusterError, cli
from hyperpod_local.layout import LocalLayout
from hyperpod_local.paths import ROOTFS_SCRIPT
from hyperpod_local.rootfs import build_command, check_slurm, node_rootfs
from hyperpod_local.state import ClusterState
from hyperpod_local.variant import DEFAULT_SLURM, SLURM_SUITES, Variant, VariantError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty root file system cache for the build script (nothing is built here)."""
    monkeypatch.setenv("HYPERPOD_CDK_ROOTFS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def print_path(suite: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOTFS_SCRIPT), "--suite", suite, "--print-path"], capture_output=True, text=True, check=False
    )


def test_each_slurm_major_has_a_suite_of_its_own_and_hyperpods_current_is_the_default() -> None:
    assert SLURM_SUITES == {"24.11": "trixie", "26.05": "forky"} and DEFAULT_SLURM == "24.11"
    assert build_command("26.05", print_path=True)[-3:] == ["--suite", "forky", "--print-path"]
    with pytest.raises(LocalClusterError, match=r"slurm: got '25\.11'; allowed: 24\.11 \(Debian trixie\), 26\.05"):
        check_slurm("25.11")


def test_the_build_script_takes_every_suite_of_the_table_and_each_has_its_own_cache_key(cache: Path) -> None:
    paths = {}
    for suite in SLURM_SUITES.values():
        done = print_path(suite)
        assert done.returncode == 0, done.stderr
        paths[suite] = Path(done.stdout.strip())
    assert all(path.parent == cache for path in paths.values()) and len(set(paths.values())) == len(SLURM_SUITES)
    assert (
        print_path("trixie").stdout
        == subprocess.run(
            ["bash", str(ROOTFS_SCRIPT), "--print-path"], capture_output=True, text=True, check=True
        ).stdout
    )  # trixie is the script's default
    refused = print_path("sid")
    assert refused.returncode == 2 and "--suite: got 'sid'; allowed: trixie, forky" in refused.stderr


def test_make_setup_builds_the_root_of_every_suite_in_the_table() -> None:
    found = re.search(r"^ROOTFS_SUITES := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found is not None and found.group(1).split() == list(SLURM_SUITES.values())


def test_a_built_root_is_found_and_a_missing_one_says_how_to_build_it(cache: Path) -> None:
    with pytest.raises(LocalClusterError, match=r"Slurm 26\.05 \(Debian forky\) is not built.*--suite forky"):
        node_rootfs("26.05")
    built = Path(print_path("forky").stdout.strip())
    (built / "etc").mkdir(parents=True)
    (built / "etc" / "os-release").write_text('VERSION_CODENAME="forky"\n')
    assert node_rootfs("26.05") == built
    with pytest.raises(LocalClusterError, match=r"Slurm 24\.11 \(Debian trixie\) is not built"):
        node_rootfs()


def test_the_state_file_keeps_the_clusters_slurm(tmp_path: Path) -> None:
    layout = LocalLayout(cluster_name="c", subnet="10.9.0.0/24", groups=(), nodes=(), requested={})
    state = ClusterState(
        config_path="c.yaml",
        mode="api-driven",
        fsx_mount_path="/fsx",
        prefix="p",
        layout=layout,
        bootstrap=True,
        host_had_run_netns=False,
        host_had_run_mount=False,
        variant=Variant(platform="generic", slurm="26.05"),
        rootfs="/r",
    )
    again = ClusterState.from_json(json.loads(json.dumps(state.to_json())))
    assert again.variant.slurm == "26.05" and again.rootfs == "/r"


def test_the_command_line_passes_the_slurm_major_on() -> None:
    def variant(*argv: str) -> Variant:
        parser = argparse.ArgumentParser()
        cli.add_commands(parser)
        return cli.up_variant(parser.parse_args(["up", *argv]))

    assert variant("--platform", "generic", "--slurm", "26.05") == Variant(platform="generic", slurm="26.05")
    assert variant().slurm == DEFAULT_SLURM and Variant(platform="generic").slurm is None  # the platform's own
    with pytest.raises(SystemExit):
        cli.main(["up", "--slurm", "25.11"])
    with pytest.raises(VariantError, match=r"^slurm: got '25.11'; allowed: 24.11 \(Debian trixie\), 26.05 "):
        Variant(slurm="25.11")
