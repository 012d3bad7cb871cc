"""Directory groups as teams (issue #41): the sacctmgr plan that follows a group's members, and one cycle of the
controller's sync service against a recording runner (sss_cache before getent, each change applied and logged)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from runtime_fakes import RecordingRunner, fake_node
from training_runtime.directory import group_members
from training_runtime.directory_accounts import Associations, plan, read_associations
from training_runtime.directory_sync import GroupSync, SyncConfig
from training_runtime.params import ProvisioningParameters
from training_runtime.steps.catalog import steps_for
from training_runtime.team_model import Team, Teams

VISION = Team("vision", ("root-admin",), directory_group="vision-researchers")
NLP = Team("nlp", (), directory_group="nlp")
WHERE = "cluster=c"


def lines(members: dict[str, Sequence[str] | None], state: Associations, teams: Sequence[Team] = (VISION,)) -> list:
    return [c.line for c in plan(teams, members, state, "c")]


def state(limits: dict[tuple, str], defaults: dict[str, str]) -> Associations:
    return Associations(limits, defaults)


def test_a_new_member_joins_the_account_with_it_as_default() -> None:
    (change,) = plan([VISION], {"vision-researchers": ["alice"]}, state({}, {}), "c")
    assert change.args == ("add", "user", "alice", "Account=vision", WHERE, "DefaultAccount=vision")
    assert "member of directory group vision-researchers" in change.line


def test_a_user_slurm_knows_keeps_their_default_account() -> None:
    (change,) = plan([VISION], {"vision-researchers": ["alice"]}, state({("alice", "nlp"): ""}, {"alice": "nlp"}), "c")
    assert change.args == ("add", "user", "alice", "Account=vision", WHERE)


def test_a_leaver_is_blocked_from_new_jobs_not_deleted() -> None:
    known = state({("alice", "vision"): "", ("bob", "vision"): ""}, {"alice": "vision", "bob": "vision"})
    (change,) = plan([VISION], {"vision-researchers": ["alice"]}, known, "c")
    assert change.args == (
        "modify", "user", "where", "name=bob", "account=vision", WHERE, "set", "MaxSubmitJobs=0"
    )  # fmt: skip
    assert "running jobs and history kept" in change.line
    assert not any(c.args[0] == "delete" for c in plan([VISION], {"vision-researchers": []}, known, "c"))


def test_a_returning_member_may_submit_again_and_a_blocked_one_is_not_blocked_twice() -> None:
    blocked = state({("bob", "vision"): "0"}, {"bob": "vision"})
    (change,) = plan([VISION], {"vision-researchers": ["bob"]}, blocked, "c")
    assert change.args[-1] == "MaxSubmitJobs=-1"
    assert plan([VISION], {"vision-researchers": []}, blocked, "c") == []


def test_users_the_config_lists_in_the_team_are_never_blocked() -> None:
    listed = state({("root-admin", "vision"): ""}, {"root-admin": "vision"})
    assert plan([VISION], {"vision-researchers": []}, listed, "c") == []


def test_an_unreadable_group_changes_nothing() -> None:
    known = state({("alice", "vision"): ""}, {"alice": "vision"})
    assert plan([VISION], {"vision-researchers": None}, known, "c") == []


def test_a_leaver_of_their_default_teams_group_gets_their_other_team_as_default() -> None:
    known = state({("alice", "vision"): "", ("alice", "nlp"): ""}, {"alice": "vision"})
    changes = plan([VISION, NLP], {"vision-researchers": [], "nlp": ["alice"]}, known, "c")
    assert [c.args[-1] for c in changes] == ["MaxSubmitJobs=0", "DefaultAccount=nlp"]


def test_sacctmgr_listings_and_getent_lines_are_read() -> None:
    found = read_associations("vision||\nvision|alice|\nvision|bob|0\n", "alice|vision\nbob|vision\n")
    assert found.limits == {("alice", "vision"): "", ("bob", "vision"): "0"} and found.blocked("bob", "vision")
    assert group_members("vision-researchers:*:5001:carol,alice\n") == ("alice", "carol")
    assert group_members("empty:*:5002:\n") == () and group_members("nonsense") is None


def test_one_cycle_reads_the_directory_afresh_then_applies_and_logs_each_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = RecordingRunner(
        {
            ("getent", "group", "vision-researchers"): (0, "vision-researchers:*:5001:alice\n"),
            ("/opt/slurm/bin/sacctmgr", "-n", "-P", "show", "assoc"): (0, "vision|bob|\n"),
            ("/opt/slurm/bin/sacctmgr", "-n", "-P", "show", "user"): (0, "bob|vision\n"),
        }
    )
    config = SyncConfig("c", (VISION,), "/opt/slurm/bin", 5.0)
    assert SyncConfig.loads(config.dumps()) == config
    status = tmp_path / "status.json"
    done = GroupSync(config, runner, status_file=status).cycle()
    assert [c.args[2] for c in done] == ["alice", "where"]
    order = [c[0] for c in runner.commands]
    assert order.index("sss_cache") < order.index("getent")
    assert runner.ran("/opt/slurm/bin/sacctmgr", "-i", "add", "user", "alice")
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [e["what"] for e in logged if e.get("event") == "change"] == [c.line for c in done]
    assert json.loads(status.read_text())["groups"] == {"vision-researchers": ["alice"]}


def test_the_sync_runs_on_the_controller_only_after_the_teams(tmp_path: Path) -> None:
    from runtime_fakes import CLUSTER_GROUPS
    from test_runtime_directory import RAW
    from training_runtime.directory import parse_directory

    params = ProvisioningParameters(
        cluster_name="test",
        mode="lifecycle-driven",
        groups=CLUSTER_GROUPS,
        options={"accounting": {"enabled": True}},
        teams=Teams(True, (VISION,)),
        directory=parse_directory(RAW),
    )
    names = [s.name for s in steps_for(fake_node(tmp_path / "c", instance="controller-1", params=params))]
    assert names.index("slurm-teams") < names.index("directory-sync")
    assert "directory-sync" not in [s.name for s in steps_for(fake_node(tmp_path / "w", params=params))]
