"""HyperPod's dev partition and automatic topology, on the runtime's side: a login node drains itself for batch
jobs (not in slurm.conf, not with HyperPod's Action: words), the renderer sets TopologyPlugin only with a switch
tree, and the plan reports HyperPod's topology without touching it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runtime_fakes import FakeHost, RecordingRunner, fake_node, touch
from training_runtime.health.remedy import NodeState, Situation, plan_actions
from training_runtime.health.results import HYPERPOD_REASONS, LOGIN_REASON, PERIODIC, ok
from training_runtime.options import parse_options
from training_runtime.plan import describe_plan
from training_runtime.render import Partition, RenderError, SlurmNode, SlurmSettings, render_slurm_conf
from training_runtime.render.slurm_types import Switch
from training_runtime.render.topology_conf import automatic_topology, render_topology_conf, switches_from_layers
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.login_node import ABSENT, LoginNodeJobs, login_node_commands
from training_runtime.steps.topology import HyperPodTopology, topology_notes

SCONTROL = "/opt/slurm/bin/scontrol"
IDLE = NodeState("IDLE")
DRAINED_BY_US = NodeState("IDLE+DRAIN", LOGIN_REASON)
DRAINED_BY_OTHERS = NodeState("IDLE+DRAIN", "patching")


# --- the drain decision -----------------------------------------------------------------------------------------


def test_a_login_node_drains_itself_with_a_reason_hyperpod_does_not_act_on() -> None:
    (command,) = login_node_commands(SCONTROL, "ip-10-1-0-5", False, IDLE)
    assert command[:4] == [SCONTROL, "update", "nodename=ip-10-1-0-5", "state=drain"]
    reason = command[4].split("=", 1)[1]
    assert reason == LOGIN_REASON and not reason.startswith("Action:")
    assert reason not in HYPERPOD_REASONS.values()


@pytest.mark.parametrize(
    "current",
    [DRAINED_BY_US, DRAINED_BY_OTHERS, NodeState("DOWN+FAIL", "x"), NodeState("IDLE+DRAIN", "Action:Reboot"), ABSENT],
    ids=["drained-by-us", "drained-by-others", "failing", "hyperpod-acting", "not-a-slurm-node"],
)
def test_nothing_to_do_when_drained_failing_or_hyperpod_is_acting(current: NodeState) -> None:
    assert login_node_commands(SCONTROL, "n", False, current) == []


def test_with_jobs_allowed_only_our_own_drain_is_lifted() -> None:
    assert login_node_commands(SCONTROL, "n", True, DRAINED_BY_US) == [
        [SCONTROL, "update", "nodename=n", "state=resume"]
    ]
    assert login_node_commands(SCONTROL, "n", True, DRAINED_BY_OTHERS) == []
    assert login_node_commands(SCONTROL, "n", True, IDLE) == []
    assert parse_options({"slurm": {"login_node_jobs": True}}).slurm.login_node_jobs
    assert not parse_options({}).slurm.login_node_jobs, "the default keeps jobs off login nodes"


def test_the_health_checks_never_take_the_login_drain_for_theirs() -> None:
    assert not DRAINED_BY_US.ours
    situation = Situation("n", SCONTROL, PERIODIC, hyperpod=True, on_hyperpod="recover", now=0.0)
    assert plan_actions(situation, [ok("gpu")], DRAINED_BY_US) == []


# --- the step on a HyperPod login node ---------------------------------------------------------------------------


def show_node(state: str, reason: str = "") -> str:
    lines = ["NodeName=login-1 Arch=x86_64 CoresPerSocket=1", f"   State={state} ThreadsPerCore=1"]
    if reason:
        lines.append(f"   Reason={reason} [root@2026-11-25T22:00:00]")
    return "\n".join(lines) + "\n"


def hyperpod_node(tmp_path: Path, instance: str, runner: RecordingRunner, jobs: bool = False):  # type: ignore[no-untyped-def]
    node = fake_node(
        tmp_path, instance=instance, mode="api-driven", runner=runner, options={"slurm": {"login_node_jobs": jobs}}
    )
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
    return node


def test_the_step_drains_an_idle_login_node_once(tmp_path: Path) -> None:
    runner = RecordingRunner({(SCONTROL, "show", "node"): (0, show_node("IDLE"))})
    node = hyperpod_node(tmp_path, "login-1", runner)
    step = LoginNodeJobs()
    assert step.needed(node)
    step.apply(node)
    (drain,) = runner.ran(SCONTROL, "update")
    assert drain == [SCONTROL, "update", "nodename=login-1", "state=drain", "reason=" + LOGIN_REASON]
    runner.respond[(SCONTROL, "show", "node")] = (0, show_node("IDLE+DRAIN", LOGIN_REASON))
    assert not step.needed(node), "a re-run changes nothing"


def test_the_step_resumes_its_own_drain_when_jobs_are_allowed(tmp_path: Path) -> None:
    runner = RecordingRunner({(SCONTROL, "show", "node"): (0, show_node("IDLE+DRAIN", LOGIN_REASON))})
    node = hyperpod_node(tmp_path, "login-1", runner, jobs=True)
    step = LoginNodeJobs()
    assert step.needed(node)
    step.apply(node)
    assert runner.ran(SCONTROL, "update") == [[SCONTROL, "update", "nodename=login-1", "state=resume"]]
    runner.respond[(SCONTROL, "show", "node")] = (0, show_node("IDLE"))
    assert not step.needed(node)


def test_a_login_node_that_is_no_slurm_node_needs_nothing(tmp_path: Path) -> None:
    runner = RecordingRunner({(SCONTROL, "show", "node"): (1, "Node login-1 not found")})
    assert not LoginNodeJobs().needed(hyperpod_node(tmp_path, "login-1", runner))


def test_a_login_node_named_by_its_instance_name_in_slurm_is_found(tmp_path: Path) -> None:
    """HyperPod's other naming mode: Slurm knows the node as its instance name, not its ip-a-b-c-d host name."""
    runner = RecordingRunner(
        {
            (SCONTROL, "show", "node"): (1, "Node not found"),
            (SCONTROL, "show", "node", "login-1"): (0, show_node("IDLE")),
        }
    )
    node = hyperpod_node(tmp_path, "login-1", runner)
    node.host = FakeHost("ip-10-1-0-5")
    LoginNodeJobs().apply(node)
    assert runner.ran(SCONTROL, "update") == [
        [SCONTROL, "update", "nodename=login-1", "state=drain", "reason=" + LOGIN_REASON]
    ]


def step_names(node) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.name for s in steps_for(node)]


def test_only_hyperpods_login_nodes_run_the_step_after_slurmd_and_its_controller_reports_topology(
    tmp_path: Path,
) -> None:
    login = step_names(hyperpod_node(tmp_path / "login", "login-1", RecordingRunner()))
    assert login.index("slurm-login-node-jobs") == login.index("daemon:slurmd") + 1
    assert "slurm-login-node-jobs" not in step_names(hyperpod_node(tmp_path / "w", "workers-1", RecordingRunner()))
    assert "slurm-login-node-jobs" not in step_names(fake_node(tmp_path / "generic", instance="login-1"))
    assert "slurm-topology" in step_names(hyperpod_node(tmp_path / "c", "controller-1", RecordingRunner()))
    assert "slurm-topology" not in step_names(fake_node(tmp_path / "gc", instance="controller-1"))


# --- topology: the renderer and the plan ------------------------------------------------------------------------

NODES = [SlurmNode(n, f"10.1.0.{i}", None) for i, n in enumerate(("a1", "a2", "b1", "login"), 10)]
SETTINGS = SlurmSettings(cluster_name="c", controller_name="ctl", controller_address="10.1.0.2")
LAYERS = {"a1": ["s", "g", "la"], "a2": ["s", "g", "la"], "b1": ["s", "g", "lb"], "login": ["s", "g", "lb"]}


def test_the_renderer_sets_topology_tree_only_with_a_switch_tree() -> None:
    partitions = [Partition("dev", (), default=True, all_nodes=True), Partition("cpu", ("a1", "a2"))]
    plain = render_slurm_conf(SETTINGS, NODES, partitions)
    assert "TopologyPlugin" not in plain
    assert "PartitionName=dev Nodes=ALL Default=YES MaxTime=INFINITE State=UP" in plain.splitlines()
    assert "PartitionName=cpu Nodes=a[1-2] Default=NO MaxTime=INFINITE State=UP" in plain.splitlines()
    with pytest.raises(RenderError, match=r"set SlurmSettings\.topology instead"):
        extra = dataclasses.replace(SETTINGS, extra_lines=("TopologyPlugin=topology/tree",))
        render_slurm_conf(extra, NODES, partitions)
    switches = switches_from_layers(LAYERS)
    tree = render_slurm_conf(dataclasses.replace(SETTINGS, topology=switches), NODES, partitions)
    assert "TopologyPlugin=topology/tree" in tree.splitlines()
    assert render_topology_conf(switches).splitlines()[1:] == [
        "SwitchName=la Nodes=a[1-2]",
        "SwitchName=lb Nodes=b1,login",
        "SwitchName=g Switches=la,lb",
        "SwitchName=s Switches=g",
    ]


def test_automatic_topology_is_none_without_a_node_with_layers() -> None:
    """A cluster whose compute groups are all at 0 has no switch: no tree (None: no TopologyPlugin), never an
    empty one (topology/tree cannot run over no switches: "No switches configured")."""
    assert automatic_topology({}) is None
    assert automatic_topology({"a1": ()}) is None
    assert automatic_topology(LAYERS) == switches_from_layers(LAYERS) != ()


def test_the_renderer_names_every_problem_of_a_switch_tree_and_of_an_all_nodes_partition() -> None:
    bad = (Switch("la", nodes=("a1", "ghost")), Switch("g", switches=("la", "missing")), Switch("x"))
    with pytest.raises(RenderError) as raised:
        render_slurm_conf(
            dataclasses.replace(SETTINGS, topology=bad), NODES, [Partition("dev", ("a1",), all_nodes=True)]
        )
    text = str(raised.value)
    for part in ("'ghost' not among the nodes", "'missing' not defined", "(x): give nodes or child switches",
                 "all_nodes with nodes"):  # fmt: skip
        assert part in text
    with pytest.raises(RenderError, match="no switches"):
        render_slurm_conf(dataclasses.replace(SETTINGS, topology=()), NODES, [Partition("cpu", ("a1",))])


def test_the_plan_warns_when_hyperpods_slurm_conf_names_the_tree_without_its_file(tmp_path: Path) -> None:
    where = "/opt/slurm/etc/topology.conf"
    (warning,) = topology_notes("TopologyPlugin=topology/tree\n", None, where)
    assert warning.startswith("WARNING") and "Requested topology configuration is not available" in warning
    (found,) = topology_notes("topologyplugin = topology/tree\n", "SwitchName=a Nodes=x\nSwitchName=b Nodes=y\n", where)
    assert "2 switches" in found and "left alone" in found
    (empty,) = topology_notes("TopologyPlugin=topology/tree\n", "# no switches yet\n", where)
    assert empty.startswith("WARNING") and "has no switches" in empty
    assert "no TopologyPlugin" in topology_notes("ClusterName=c\n", None, where)[0]
    node = hyperpod_node(tmp_path, "controller-1", RecordingRunner())
    touch(tmp_path, "/opt/slurm/etc/slurm.conf", "SlurmctldHost=x\nTopologyPlugin=topology/tree\n")
    (row,) = describe_plan(node, [HyperPodTopology()])
    assert row["needed"] is False and row["left_alone"][0].startswith("WARNING")
