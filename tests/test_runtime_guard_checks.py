"""The Slurm guard's checks on a fake root: what each breakage looks like, the text that repairs it, and the states
its table says to leave alone (training_runtime.guard.checks, .plugstack, .table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_fakes import touch
from training_runtime.guard import checks, conf, plugstack, table
from training_runtime.guard.checks import Layout, inspect
from training_runtime.guard.tree import Tree

ETC = "/opt/slurm/etc"
CACHE = "/var/spool/slurmd/conf-cache"
LAYOUT = Layout(ETC, CACHE)
NODES = (
    "NodeName=ip-10-1-0-11 NodeAddr=10.1.0.11 CPUs=2 State=UNKNOWN\n"
    "NodeName=gpu-[1-2] CPUs=96 State=UNKNOWN\n"
    "NodeName=DEFAULT RealMemory=1000\n"
)
PARTITIONS = "PartitionName=dev Nodes=ALL Default=YES\nPartitionName=gpu Nodes=gpu-[1-2]\n"
CONFIGLESS = "SlurmctldParameters=enable_configless\n"
PYXIS_AMI = "required /opt/slurm/lib/slurm/spank_pyxis.so\n"
PYXIS_SCRIPT = "required /usr/local/lib/slurm/spank_pyxis.so\n"


def slurm_conf(root: Path, *lines: str, nodes: str = NODES) -> None:
    touch(root, f"{ETC}/slurm.conf", "ClusterName=c\n" + "".join(line + "\n" for line in lines) + nodes + PARTITIONS)


def found(root: Path, role: str = "controller", version: tuple[int, int] | None = (24, 11)) -> list[checks.Finding]:
    return inspect(role, Tree(str(root)), LAYOUT, version)


# --- topology.conf (Slurm 24.11: HyperPod's automatic topology) -----------------------------------------------
@pytest.mark.parametrize("topology", [None, "# no switch here\n", ""])
def test_a_tree_plugin_without_a_switch_gets_one_switch_over_every_node(tmp_path: Path, topology: str | None) -> None:
    slurm_conf(tmp_path, "TopologyPlugin=topology/tree")
    if topology is not None:
        touch(tmp_path, f"{ETC}/topology.conf", topology)
    [finding] = found(tmp_path)
    assert (finding.check, finding.path, finding.refresh) == (table.TOPOLOGY_TREE, f"{ETC}/topology.conf", False)
    assert finding.content is not None and conf.ours(finding.content)
    assert finding.content.splitlines()[-1] == "SwitchName=hyperpod-cdk-flat Nodes=ip-10-1-0-11,gpu-[1-2]"


def test_hyperpods_own_tree_is_left_alone_even_when_it_misses_a_node(tmp_path: Path) -> None:
    slurm_conf(tmp_path, "TopologyPlugin=topology/tree")
    touch(tmp_path, f"{ETC}/topology.conf", "SwitchName=nn-1 Nodes=gpu-[1-2]\n")
    assert found(tmp_path) == []


def test_the_guards_own_tree_follows_the_nodes_as_they_join_and_leave(tmp_path: Path) -> None:
    slurm_conf(tmp_path, "TopologyPlugin=topology/tree")
    touch(tmp_path, f"{ETC}/topology.conf", checks.flat_tree(["ip-10-1-0-11"]))
    [finding] = found(tmp_path)
    assert finding.refresh and finding.content == checks.flat_tree(["ip-10-1-0-11", "gpu-[1-2]"])
    touch(tmp_path, f"{ETC}/topology.conf", checks.flat_tree(["ip-10-1-0-11", "gpu-[1-2]"]))
    assert found(tmp_path) == []


@pytest.mark.parametrize("plugin", ["", "TopologyPlugin=topology/flat", "TopologyPlugin=topology/default"])
def test_topology_turned_off_or_never_on_is_left_alone(tmp_path: Path, plugin: str) -> None:
    slurm_conf(tmp_path, plugin)
    assert found(tmp_path) == []


def test_a_tree_with_no_node_to_hang_off_it_is_reported_not_invented(tmp_path: Path) -> None:
    slurm_conf(tmp_path, "TopologyPlugin=topology/tree", nodes="")
    [finding] = found(tmp_path)
    assert (finding.check, finding.content) == (table.TOPOLOGY_TREE, None)


def test_a_block_plugin_without_a_block_is_reported_only(tmp_path: Path) -> None:
    slurm_conf(tmp_path, "TopologyPlugin=topology/block")
    [finding] = found(tmp_path)
    assert (finding.check, finding.content) == (table.TOPOLOGY_BLOCK, None)
    touch(tmp_path, f"{ETC}/topology.conf", "BlockName=us1 Nodes=gpu-[1-2]\nBlockSizes=2\n")
    assert found(tmp_path) == []


def test_the_plugin_set_in_an_included_file_counts(tmp_path: Path) -> None:
    slurm_conf(tmp_path, "include topology-settings.conf")
    touch(tmp_path, f"{ETC}/topology-settings.conf", "TopologyPlugin=topology/tree\n")
    assert [f.check for f in found(tmp_path)] == [table.TOPOLOGY_TREE]


# --- topology.yaml (Slurm 25.05 and later) ---------------------------------------------------------------------
def test_an_empty_topology_yaml_gets_a_flat_topology_per_partition_tag(tmp_path: Path) -> None:
    tagged = PARTITIONS.replace("Nodes=gpu-[1-2]", "Nodes=gpu-[1-2] Topology=tree")
    touch(tmp_path, f"{ETC}/slurm.conf", "TopologyPlugin=topology/tree\n" + NODES + tagged)
    touch(tmp_path, f"{ETC}/topology.yaml", "[]\n")
    touch(tmp_path, f"{ETC}/topology.conf", "")
    [finding] = found(tmp_path, version=(25, 11))
    assert (finding.check, finding.path) == (table.TOPOLOGY_YAML, f"{ETC}/topology.yaml")
    assert finding.content is not None and conf.yaml_topologies(finding.content) == ["tree"]
    assert "- topology: tree\n  cluster_default: true\n  flat: true\n" in finding.content
    touch(tmp_path, f"{ETC}/topology.yaml", finding.content)
    assert found(tmp_path, version=(25, 11)) == [], "converged: its own file, the same tags"


def test_a_topology_yaml_with_a_topology_is_hyperpods_and_left_alone(tmp_path: Path) -> None:
    slurm_conf(tmp_path, "TopologyPlugin=topology/tree")
    touch(tmp_path, f"{ETC}/topology.yaml", "- topology: tree\n  cluster_default: true\n  tree:\n    switches: []\n")
    assert found(tmp_path, version=(25, 11)) == []


def test_slurm_24_11_reads_no_topology_yaml_so_the_tree_file_is_what_counts(tmp_path: Path) -> None:
    slurm_conf(tmp_path, "TopologyPlugin=topology/tree")
    touch(tmp_path, f"{ETC}/topology.yaml", "[]\n")
    assert [f.check for f in found(tmp_path, version=(24, 11))] == [table.TOPOLOGY_TREE]


def test_25_11_block_topology_with_power_saving_is_reported(tmp_path: Path) -> None:
    slurm_conf(tmp_path, "TopologyPlugin=topology/block", "SuspendTime=600")
    touch(tmp_path, f"{ETC}/topology.conf", "BlockName=us1 Nodes=gpu-[1-2]\nBlockSizes=2\n")
    assert [(f.check, f.content) for f in found(tmp_path, version=(25, 11))] == [(table.BLOCK_POWER_DOWN, None)]
    assert found(tmp_path, version=(26, 5)) == [], "a Slurm without the bug"
    slurm_conf(tmp_path, "TopologyPlugin=topology/block", "SuspendTime=INFINITE")
    assert found(tmp_path, version=(25, 11)) == [], "power saving off"


# --- plugstack.conf on the controller --------------------------------------------------------------------------
def test_a_configless_controller_copies_an_include_by_path_into_plugstack(tmp_path: Path) -> None:
    slurm_conf(tmp_path, CONFIGLESS)
    touch(tmp_path, f"{ETC}/plugstack.conf", f"include {ETC}/plugstack.conf.d/pyxis.conf\ninclude local.conf\n")
    touch(tmp_path, f"{ETC}/plugstack.conf.d/pyxis.conf", PYXIS_AMI)
    touch(tmp_path, f"{ETC}/local.conf", "optional /usr/lib/other.so\n")
    [finding] = found(tmp_path)
    assert finding.check == table.CONFIGLESS_INCLUDE and not finding.refresh
    assert finding.content == (
        plugstack.BEGIN.format(f"{ETC}/plugstack.conf.d/pyxis.conf")
        + "\n"
        + PYXIS_AMI
        + plugstack.END.format(f"{ETC}/plugstack.conf.d/pyxis.conf")
        + "\ninclude local.conf\n"
    ), "the bare include next to slurm.conf is shipped as it is: left alone"
    touch(tmp_path, f"{ETC}/plugstack.conf", finding.content)
    assert found(tmp_path) == []
    touch(tmp_path, f"{ETC}/plugstack.conf.d/pyxis.conf", PYXIS_AMI + "# tuned\n")
    [refresh] = found(tmp_path)
    assert refresh.refresh and "# tuned" in (refresh.content or ""), "a copy follows its file"


def test_without_configless_an_include_by_path_is_left_alone(tmp_path: Path) -> None:
    slurm_conf(tmp_path)
    touch(tmp_path, f"{ETC}/plugstack.conf", f"include {ETC}/plugstack.conf.d/*.conf\n")
    touch(tmp_path, f"{ETC}/plugstack.conf.d/pyxis.conf", PYXIS_AMI)
    assert found(tmp_path) == []


def test_a_wildcard_include_is_copied_from_every_file_it_matches(tmp_path: Path) -> None:
    slurm_conf(tmp_path, CONFIGLESS)
    touch(tmp_path, f"{ETC}/plugstack.conf", f"include {ETC}/plugstack.conf.d/*.conf\n")
    touch(tmp_path, f"{ETC}/plugstack.conf.d/a.conf", "optional /usr/lib/a.so\n")
    touch(tmp_path, f"{ETC}/plugstack.conf.d/b.conf", PYXIS_AMI)
    [finding] = found(tmp_path)
    assert finding.content is not None
    assert finding.content.splitlines()[1:3] == ["optional /usr/lib/a.so", PYXIS_AMI.strip()]


def test_the_scripts_second_pyxis_include_is_commented_out_and_the_amis_kept(tmp_path: Path) -> None:
    slurm_conf(tmp_path)  # not configless: only the duplicate is at stake
    touch(tmp_path, f"{ETC}/plugstack.conf", PYXIS_AMI + f"include {ETC}/plugstack.conf.d/pyxis.conf\n")
    touch(tmp_path, f"{ETC}/plugstack.conf.d/pyxis.conf", "# pyxis\n" + PYXIS_SCRIPT)
    [finding] = found(tmp_path)
    assert finding.check == table.PYXIS_TWICE
    assert finding.content == PYXIS_AMI + plugstack.DUPLICATE.format(f"include {ETC}/plugstack.conf.d/pyxis.conf\n")


def test_a_copied_include_that_registers_pyxis_again_converges(tmp_path: Path) -> None:
    """The script's include of the AMI's file on a configless controller: copied in, its line commented out, and
    the next checks find nothing (a copy whose line the guard commented out is not a changed copy)."""
    slurm_conf(tmp_path, CONFIGLESS)
    touch(tmp_path, f"{ETC}/plugstack.conf", PYXIS_AMI + f"include {ETC}/plugstack.conf.d/pyxis.conf\n")
    touch(tmp_path, f"{ETC}/plugstack.conf.d/pyxis.conf", PYXIS_SCRIPT)
    findings = found(tmp_path)
    assert [f.check for f in findings] == [table.CONFIGLESS_INCLUDE, table.PYXIS_TWICE]
    assert findings[0].content == findings[1].content and findings[0].content is not None
    assert [line for line in findings[0].content.splitlines() if conf.loads_pyxis(line)] == [PYXIS_AMI.strip()]
    touch(tmp_path, f"{ETC}/plugstack.conf", findings[0].content)
    assert found(tmp_path) == []


def test_two_direct_registrations_keep_the_first(tmp_path: Path) -> None:
    slurm_conf(tmp_path)
    touch(tmp_path, f"{ETC}/plugstack.conf", PYXIS_AMI + "optional /usr/lib/x.so\n" + PYXIS_SCRIPT)
    [finding] = found(tmp_path)
    assert finding.content == PYXIS_AMI + "optional /usr/lib/x.so\n" + plugstack.DUPLICATE.format(PYXIS_SCRIPT)
    touch(tmp_path, f"{ETC}/plugstack.conf", finding.content)
    assert found(tmp_path) == [], "commented out: converged"


def test_a_second_registration_among_other_plugins_is_reported_not_edited(tmp_path: Path) -> None:
    slurm_conf(tmp_path)
    touch(tmp_path, f"{ETC}/plugstack.conf", PYXIS_AMI + "include site.conf\n")
    touch(tmp_path, f"{ETC}/site.conf", PYXIS_SCRIPT + "optional /usr/lib/site.so\n")
    [finding] = found(tmp_path)
    assert (finding.check, finding.content) == (table.PYXIS_TWICE, None)


def test_one_registration_is_left_alone(tmp_path: Path) -> None:
    slurm_conf(tmp_path)
    touch(tmp_path, f"{ETC}/plugstack.conf", "include pyxis.conf\n")
    touch(tmp_path, f"{ETC}/pyxis.conf", PYXIS_AMI)
    assert found(tmp_path) == []


# --- login and compute nodes: slurmd's copy, reported ----------------------------------------------------------
def test_a_compute_node_reports_an_include_it_does_not_have(tmp_path: Path) -> None:
    touch(tmp_path, f"{CACHE}/slurm.conf", "ClusterName=c\n")
    touch(tmp_path, f"{CACHE}/plugstack.conf", f"include {ETC}/plugstack.conf.d/pyxis.conf\n")
    [finding] = found(tmp_path, role="compute")
    assert (finding.check, finding.content) == (table.CONFIGLESS_MISSING, None)
    touch(tmp_path, f"{ETC}/plugstack.conf.d/pyxis.conf", PYXIS_AMI)
    assert found(tmp_path, role="compute") == [], "the node has the file: Pyxis loads"


def test_a_login_node_reports_pyxis_twice_in_its_copy(tmp_path: Path) -> None:
    touch(tmp_path, f"{CACHE}/slurm.conf", "ClusterName=c\n")
    touch(tmp_path, f"{CACHE}/plugstack.conf", PYXIS_AMI + PYXIS_SCRIPT)
    [finding] = found(tmp_path, role="login")
    assert (finding.check, finding.content) == (table.PYXIS_TWICE, None)


def test_the_nodes_topology_is_the_controllers_business(tmp_path: Path) -> None:
    touch(tmp_path, f"{CACHE}/slurm.conf", "TopologyPlugin=topology/tree\n" + NODES)
    assert found(tmp_path, role="compute") == []


# --- the table ---------------------------------------------------------------------------------------------------
def test_every_check_is_a_row_and_only_the_controller_repairs() -> None:
    emitted = {
        table.TOPOLOGY_TREE,
        table.TOPOLOGY_YAML,
        table.TOPOLOGY_BLOCK,
        table.BLOCK_POWER_DOWN,
        table.PYXIS_TWICE,
        table.CONFIGLESS_INCLUDE,
        table.CONFIGLESS_MISSING,
    }
    assert emitted <= set(table.CHECKS)
    for rule in table.RULES:
        assert rule.sources and all(s.url.startswith("https://") and s.quote for s in rule.sources), rule.check
        for role in (table.LOGIN, table.COMPUTE):
            assert not table.repairs(rule.check, role) if rule.check in table.CHECKS else True
    assert table.repairs(table.PYXIS_TWICE, table.CONTROLLER) and not table.repairs(table.PYXIS_TWICE, table.COMPUTE)
    assert not table.repairs(table.TOPOLOGY_BLOCK, table.CONTROLLER)


def test_the_markdown_table_has_a_row_per_rule_with_its_quote() -> None:
    rendered = table.markdown_table()
    rows = [line for line in rendered.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [rule.check for rule in table.RULES]
    assert all(source.quote.replace("|", "\\|") in rendered for rule in table.RULES for source in rule.sources)
