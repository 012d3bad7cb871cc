"""A scaled group at 0 (docs/scaler.md, "A group at 0"): the job_submit script the runtime renders, the step that
installs it on the controller, and the service that releases the jobs the script held (and only those).

The Lua script itself runs in slurmctld in the drills (tests/test_local_scaler.py: plain ``sbatch``/``salloc``
with the group at 0); the node roots have Lua 5.1's library for the plugin but no ``lua`` interpreter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_fakes import fake_node, touch
from test_runtime_scaler_service import World
from training_runtime.groups import GroupSpec
from training_runtime.node import HYPERPOD_MARKER, Node
from training_runtime.scaler.job_submit import (
    BLOCK,
    HELD_START,
    SCRIPT_HEADER,
    held_by_scaler,
    held_comment,
    plugins_set_elsewhere,
    render_script,
    with_block,
    without_block,
)
from training_runtime.scaler.policy import DRAIN_REASON_START
from training_runtime.scaling import ScalingSpec
from training_runtime.steps.scaler import JobSubmitHold, JobSubmitPush, job_submit_files, scaler_steps
from training_runtime.steps.slurm import HyperPodAccounting

SLURM_CONF = "/opt/slurm/etc/slurm.conf"
SCALED = (
    GroupSpec("controller", "controller", "ml.m5.xlarge"),
    GroupSpec("login", "login", "ml.m5.large"),
    GroupSpec("workers", "compute", "ml.trn1.32xlarge", "trn", scaling=ScalingSpec(0, 8, 15)),
)


# --- the script -------------------------------------------------------------------------------------
def test_the_mark_is_the_scalers_reason_prefix_and_only_it_counts() -> None:
    assert HELD_START.startswith(DRAIN_REASON_START)
    assert held_comment("gpu") == "hyperpod-cdk:scaler: held until group gpu has nodes"
    assert held_by_scaler(held_comment("gpu"))
    assert not held_by_scaler(None) and not held_by_scaler("")
    assert not held_by_scaler("hyperpod-cdk:scaler: adding nodes to gpu")  # the scaler's other comments
    assert not held_by_scaler("held by the admin until the outage ends")


def test_the_script_names_the_scaled_partitions_holds_and_marks() -> None:
    script = render_script([("trn", "workers"), ("burst", "burst"), ("trn", "workers")])
    assert script.startswith(SCRIPT_HEADER)
    assert script == render_script([("burst", "burst"), ("trn", "workers")])  # deterministic, order-free
    table = script.split("local SCALED = {\n", 1)[1].split("}\n", 1)[0]
    assert table == '  ["burst"] = "burst",\n  ["trn"] = "workers",\n'
    assert "job_desc.priority = 0\n" in script  # as --hold does
    assert f'local HELD = "{HELD_START}"' in script
    assert 'job_desc.admin_comment = HELD .. group .. " has nodes"' in script
    assert "if job_desc.priority == 0 or job_desc.admin_comment ~= nil then\n    return slurm.SUCCESS" in script
    assert "part.total_nodes > 0" in script and "part.flag_default ~= 0" in script  # the default partition
    assert "function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)\n  return slurm.SUCCESS" in script
    assert render_script([('a"b', "g")]).count('["a\\"b"]') == 1  # quoted as a Lua string


def test_the_block_is_added_once_and_found() -> None:
    text = "# Accounting settings\nAccountingStorageType=accounting_storage/slurmdbd"
    once = with_block(text)
    assert once == text + "\n" + BLOCK
    assert with_block(once) == once and without_block(once) == text + "\n"
    assert not plugins_set_elsewhere(once)  # the runtime's own key
    assert plugins_set_elsewhere("JobSubmitPlugins=require_timelimit\n")
    assert plugins_set_elsewhere(once + "jobsubmitplugins = lua\n")


# --- the step ---------------------------------------------------------------------------------------
def hyperpod_controller(tmp_path: Path, slurm_conf: str = "ClusterName=test\ninclude accounting.conf\n") -> Node:
    touch(tmp_path, HYPERPOD_MARKER + "/marker")
    touch(tmp_path, SLURM_CONF, slurm_conf)
    touch(tmp_path, "/opt/slurm/etc/accounting.conf", "# Accounting settings\n")
    return fake_node(tmp_path, groups=SCALED, instance="controller-1")


def test_the_step_writes_the_script_and_the_key_then_converges(tmp_path: Path) -> None:
    node = hyperpod_controller(tmp_path)
    assert [s.name for s in scaler_steps(node)][1:3] == ["scaler-job-submit", "scaler-job-submit-reconfigure"]
    step = JobSubmitHold()
    assert step.needed(node) and step.left_alone(node) == []
    step.apply(node)
    script, include = job_submit_files(node)
    assert script == "/opt/slurm/etc/job_submit.lua"
    written = node.path(script)
    assert written.read_text() == render_script([("trn", "workers")])
    assert written.stat().st_mode & 0o777 == 0o644
    assert node.path(include).read_text() == "# Accounting settings\n" + BLOCK
    assert not step.needed(node)
    push = JobSubmitPush(job_submit_files(node))
    assert push.needed(node)
    push.apply(node)
    assert ["/opt/slurm/bin/scontrol", "reconfigure"] in node.runner.commands
    assert not push.needed(node)


def test_the_accounting_step_keeps_the_block(tmp_path: Path) -> None:
    node = hyperpod_controller(tmp_path)
    JobSubmitHold().apply(node)
    HyperPodAccounting().apply(node)
    text = node.path("/opt/slurm/etc/accounting.conf").read_text()
    assert text.endswith(BLOCK) and "AccountingStorageType=" in text
    assert not JobSubmitHold().needed(node) and not HyperPodAccounting().needed(node)


@pytest.mark.parametrize(
    ("slurm_conf", "script", "why"),
    [
        ("include accounting.conf\nJobSubmitPlugins=pbs\n", None, "already sets JobSubmitPlugins"),
        ("include accounting.conf\n", "-- the site's own\nfunction slurm_job_submit() end\n", "is not hyperpod-cdk's"),
        ("ClusterName=test\n", None, "does not include accounting.conf"),
    ],
)
def test_someone_elses_plugin_or_script_is_left_alone(tmp_path: Path, slurm_conf: str, script: str, why: str) -> None:
    node = hyperpod_controller(tmp_path, slurm_conf)
    if script is not None:
        touch(tmp_path, "/opt/slurm/etc/job_submit.lua", script)
    step = JobSubmitHold()
    assert not step.needed(node)
    (note,) = step.left_alone(node)
    assert why in note and "--hold" in note
    assert not JobSubmitPush(job_submit_files(node)).needed(node)
    assert node.path("/opt/slurm/etc/accounting.conf").read_text() == "# Accounting settings\n"
    if script is not None:
        assert node.path("/opt/slurm/etc/job_submit.lua").read_text() == script


# --- the service ------------------------------------------------------------------------------------
@pytest.fixture()
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.fake.close()


def test_a_job_the_script_held_is_released_and_scales_the_group(world: World) -> None:
    world.slurm.pending = ["7|gpu|2|JobHeldUser"]
    world.slurm.admin_comments["7"] = held_comment("gpu")
    world.slurm.release_exit = 1  # Slurm 24.11 releases it and exits 1 in a partition with no node
    beat = world.scaler().cycle()
    assert world.slurm.released == ["7"]
    assert beat.status != "error" and beat.pending == 2
    assert world.fake.groups["gpu"] == [0, 2]  # counted as demand in the same cycle


def test_a_job_held_by_its_user_or_an_admin_is_never_released(world: World) -> None:
    world.slurm.pending = ["7|gpu|2|JobHeldUser", "8|gpu|1|JobHeldAdmin", "9|gpu|1|JobHeldAdmin"]
    world.slurm.admin_comments["8"] = "held for maintenance"
    world.slurm.admin_comments["9"] = "hyperpod-cdk:scaler: adding nodes to gpu"
    world.scaler().cycle()
    assert world.slurm.released == []
    assert world.fake.calls("BatchAddClusterNodes") == []


def test_a_marked_job_in_an_unscaled_partition_is_left_alone(world: World) -> None:
    world.slurm.pending = ["7|cpu|1|JobHeldUser"]
    world.slurm.admin_comments["7"] = held_comment("gpu")
    world.scaler().cycle()
    assert world.slurm.released == []


def test_a_job_named_like_the_held_mark_is_never_released(world: World) -> None:
    # A user's job, held by its user, whose name (or comment) carries the mark the job_submit script writes.
    world.slurm.pending = ["7|gpu|2|JobHeldUser", "8|gpu|1|JobHeldUser"]
    world.slurm.job_names["7"] = "x AdminComment=" + held_comment("gpu")
    world.slurm.job_names["8"] = "x\nAdminComment=" + held_comment("gpu")
    world.scaler().cycle()
    assert world.slurm.released == []
    assert world.fake.calls("BatchAddClusterNodes") == []


def test_a_pending_line_whose_id_is_not_a_job_id_is_never_acted_on(world: World) -> None:
    world.slurm.pending = ["7;id|gpu|2|JobHeldUser", "jobname=x|gpu|2|JobHeldUser", "9_2|gpu|1|JobHeldUser"]
    for job in ("7;id", "jobname=x", "9_2"):
        world.slurm.admin_comments[job] = held_comment("gpu")
    world.scaler().cycle()
    assert world.slurm.released == ["9_2"]
