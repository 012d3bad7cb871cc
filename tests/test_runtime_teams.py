"""The slurm-teams step (issue #32): the sacctmgr plan against a fake sacctmgr, idempotence, nothing deleted, the
slurm.conf keys budgets need, and the teams' trip through the parameters file. Runs on Python 3.8 too."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from runtime_fakes import RecordingRunner, fake_node
from training_runtime.billing import billing_minutes
from training_runtime.params import ProvisioningParameters
from training_runtime.render.accounting_keys import accounting_keys
from training_runtime.run import Result
from training_runtime.slurm_accounts import plan, read_state
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.slurm import accounting_lines, rendered_files
from training_runtime.steps.teams import SlurmTeams
from training_runtime.team_model import Teams
from training_runtime.teams import parse_teams

ACCOUNTING = {"accounting": {"enabled": True}}
TEAMS: list[dict[str, Any]] = [
    {
        "name": "vision",
        "users": ["alice", "bob"],
        "default_for": ["alice", "bob"],
        "fairshare": 100,
        "qos": {"max_nodes": 8, "max_wall": "2-00:00:00", "priority": 10},
        "budget": {"amount": 20000, "period": "month"},
    },
    {"name": "nlp", "users": ["bob", "carol"]},
]
USERS = ["alice", "bob", "carol"]


def teams(raw: list | None = None) -> Teams:  # type: ignore[type-arg]
    return parse_teams(TEAMS if raw is None else raw, True, USERS)


class FakeSacctmgr:
    """sacctmgr over an in-memory database: ``show`` lists it, ``-i add/modify`` change it."""

    def __init__(self) -> None:
        self.assocs: dict[tuple[str, str], dict[str, str]] = {("root", ""): {}, ("root", "root"): {}}
        self.defaults: dict[str, str] = {"root": "root"}
        self.qos: dict[str, dict[str, str]] = {"normal": {"Priority": "0"}}
        self.changes: list[list[str]] = []

    def __call__(self, argv: list[str]) -> Result | None:
        if not argv[0].endswith("sacctmgr"):
            return None
        if argv[1] == "-i":
            self.changes.append(argv[2:])
            self._change(argv[2:])
            return Result(argv, 0, "", "")
        what = argv[4]
        if what == "assoc":
            rows = [
                "|".join(
                    [
                        a,
                        u,
                        s.get("Fairshare", "1"),
                        s.get("GrpTRESMins", ""),
                        s.get("QOS", "normal"),
                        s.get("DefaultQOS", ""),
                    ]
                )
                for (a, u), s in sorted(self.assocs.items())
            ]
        elif what == "user":
            rows = [f"{u}|{a}" for u, a in sorted(self.defaults.items())]
        else:
            rows = [
                "|".join([n, s.get("GrpTRES", ""), s.get("MaxWall", ""), s.get("Priority", "0")])
                for n, s in sorted(self.qos.items())
            ]
        return Result(argv, 0, "\n".join(rows) + "\n", "")

    def _change(self, args: list[str]) -> None:
        verb, kind = args[0], args[1]
        settings = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith(("name=", "cluster=")))
        if verb == "add" and kind == "qos":
            self.qos[args[2]] = settings
        elif verb == "modify" and kind == "qos":
            self.qos[args[3][5:]].update(settings)
        elif verb == "add" and kind == "account":
            self.assocs[(args[2], "")] = settings
        elif verb == "modify" and kind == "account":
            self.assocs[(args[3][5:], "")].update(settings)
        elif verb == "add" and kind == "user":
            self.assocs[(settings["Account"], args[2])] = {}
            self.defaults.setdefault(args[2], settings.get("DefaultAccount", settings["Account"]))
        elif verb == "modify" and kind == "user":
            self.defaults[args[3][5:]] = settings["DefaultAccount"]


def teams_node(tmp_path: Path, raw: list | None = None, db: FakeSacctmgr | None = None):  # type: ignore[no-untyped-def,type-arg]
    runner = RecordingRunner()
    if db is not None:
        runner.run = _responding(runner, db)  # type: ignore[method-assign]
    node = fake_node(tmp_path, instance="controller-1", options=ACCOUNTING, runner=runner)
    return dataclasses.replace(node, params=dataclasses.replace(node.params, teams=teams(raw))), runner


def _responding(runner: RecordingRunner, db: FakeSacctmgr):  # type: ignore[no-untyped-def]
    def run(argv, **kwargs):  # type: ignore[no-untyped-def]
        runner.commands.append(list(argv))
        return db(list(argv)) or Result(list(argv), 0, "", "")

    return run


def test_a_new_cluster_gets_qos_accounts_then_users_with_their_default_accounts() -> None:
    empty = read_state("root|||||\nroot|root|1||normal|\n", "root|root\n", "normal|||0\n")
    changes = plan(teams(), empty, "test")
    assert [c.args for c in changes] == [
        ("add", "qos", "vision", "GrpTRES=node=8", "MaxWall=2-00:00:00", "Priority=10"),
        (
            "add",
            "account",
            "vision",
            "cluster=test",
            "Fairshare=100",
            f"GrpTRESMins=billing={billing_minutes(20000)}",
            "QOS=vision",
            "DefaultQOS=vision",
        ),
        ("add", "account", "nlp", "cluster=test"),
        ("add", "user", "alice", "Account=vision", "cluster=test", "DefaultAccount=vision"),
        ("add", "user", "bob", "Account=vision", "cluster=test", "DefaultAccount=vision"),
        ("add", "user", "bob", "Account=nlp", "cluster=test"),
        ("add", "user", "carol", "Account=nlp", "cluster=test", "DefaultAccount=nlp"),
    ]
    assert (
        changes[1].line == "+ account vision (fairshare 100, budget 20000 per month "
        f"(GrpTRESMins=billing={billing_minutes(20000)}), qos vision)"
    )


def test_the_step_converges_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    db = FakeSacctmgr()
    node, _runner = teams_node(tmp_path, db=db)
    step = SlurmTeams(node.params.teams)
    assert step.needed(node)
    step.apply(node)
    assert not step.needed(node) and step.describe(node) == []
    done = len(db.changes)
    step.apply(node)
    assert len(db.changes) == done


def test_only_what_differs_is_modified_and_nothing_is_deleted(tmp_path: Path) -> None:
    db = FakeSacctmgr()
    node, _ = teams_node(tmp_path, db=db)
    SlurmTeams(node.params.teams).apply(node)
    db.changes.clear()
    raw = [
        dict(TEAMS[0], fairshare=50, budget={"amount": 10, "period": "month"}, users=["alice"], default_for=["alice"]),
        {"name": "nlp", "users": ["bob", "carol"]},
    ]
    node2, _ = teams_node(tmp_path / "again", raw, db=db)
    step = SlurmTeams(node2.params.teams)
    assert step.describe(node2) == [
        f"~ account vision (fairshare 50, budget 10 per month (GrpTRESMins=billing={billing_minutes(10)}))",
        "~ user bob: default account nlp (was vision)",
    ]
    step.apply(node2)
    assert db.changes == [
        [
            "modify",
            "account",
            "where",
            "name=vision",
            "cluster=test",
            "set",
            "Fairshare=50",
            f"GrpTRESMins=billing={billing_minutes(10)}",
        ],
        ["modify", "user", "where", "name=bob", "cluster=test", "set", "DefaultAccount=nlp"],
    ]
    assert not any(c[0] == "delete" for c in db.changes)
    assert step.left_alone(node2) == ["user bob in account vision is not in the config: left in place"]
    gone, _ = teams_node(tmp_path / "gone", [{"name": "nlp", "users": ["alice", "bob", "carol"]}], db=db)
    assert "account vision is not in the config: left in place with its history" in SlurmTeams(
        gone.params.teams
    ).left_alone(gone)


def test_a_removed_budget_is_cleared_not_left_behind() -> None:
    state = read_state("vision||1|billing=5000|normal|\n", "", "")
    changes = plan(parse_teams([{"name": "vision", "users": ["alice"]}]), state, "c")
    assert changes[0].args[-1] == "GrpTRESMins=billing=-1" and changes[0].line == "~ account vision (no budget)"


def test_the_step_waits_while_slurmdbd_does_not_answer(tmp_path: Path) -> None:
    node, _ = teams_node(tmp_path)
    node = dataclasses.replace(node, runner=RecordingRunner({("sacctmgr", "-n"): (1, "")}))
    step = SlurmTeams(node.params.teams)
    assert step.needed(node)
    assert step.describe(node) == ["apply 2 team(s) with sacctmgr once slurmdbd answers"]


def test_budgets_render_enforcement_multifactor_and_the_reset_period() -> None:
    keys = {k.key: k.value for k in accounting_keys("c", teams=teams())}
    assert keys["AccountingStorageEnforce"] == "associations,limits,qos,safe"
    assert keys["PriorityType"] == "priority/multifactor"
    assert (keys["PriorityDecayHalfLife"], keys["PriorityUsageResetPeriod"]) == ("0", "MONTHLY")
    weekly = parse_teams([dict(TEAMS[0], budget={"amount": 1, "period": "week"}), TEAMS[1]], True, USERS)
    assert {k.key: k.value for k in accounting_keys("c", teams=weekly)}["PriorityUsageResetPeriod"] == "WEEKLY"
    no_budget = parse_teams([{"name": "nlp", "users": ["bob"]}], False, ["bob"])
    plain = {k.key for k in accounting_keys("c", teams=no_budget)}
    assert "AccountingStorageEnforce" not in plain and "PriorityDecayHalfLife" not in plain
    assert "PriorityType" in plain
    assert not {k.key for k in accounting_keys("c")} & {"AccountingStorageEnforce", "PriorityType"}


def test_teams_survive_the_parameters_file_and_add_the_step_on_the_controller(tmp_path: Path) -> None:
    node, _ = teams_node(tmp_path)
    again = ProvisioningParameters.loads(node.params.dumps())
    assert again.teams == node.params.teams
    assert [s.name for s in steps_for(node)].index("slurm-teams") == [s.name for s in steps_for(node)].index(
        "accounting-cluster"
    ) + 1
    worker = fake_node(tmp_path / "w", options=ACCOUNTING, params=again)
    assert "slurm-teams" not in [s.name for s in steps_for(worker)]


def test_both_platforms_get_the_teams_keys(tmp_path: Path) -> None:
    """The generic slurm.conf carries them; on HyperPod they go in the accounting.conf its slurm.conf includes."""
    node, _ = teams_node(tmp_path)
    slurm_conf = next(text for path, text, _, _ in rendered_files(node) if path.endswith("slurm.conf"))
    include = accounting_lines(node)
    for text in (slurm_conf, include):
        assert "AccountingStorageEnforce=associations,limits,qos,safe\n" in text
        assert "PriorityUsageResetPeriod=MONTHLY\n" in text and "PriorityDecayHalfLife=0\n" in text
