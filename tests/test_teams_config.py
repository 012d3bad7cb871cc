"""The config's teams and enforce_accounts (issue #32): every rule with its field path, value and fix, and the
teams in the parameters file the nodes read."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_cdk.core.config import ClusterConfig, parse_model
from hyperpod_cdk.core.deployment import deployment

USERS = [{"name": "alice", "uid": 2101}, {"name": "bob", "uid": 2102}]
GOOD = [
    {
        "name": "vision",
        "users": ["alice"],
        "qos": {"max_nodes": 8, "max_wall": "2-00:00:00", "priority": 10},
        "budget": {"amount": 20000, "period": "month"},
    },
    {"name": "nlp", "users": ["bob"], "fairshare": 100},
]


def problems(teams: Any, enforce: bool = True, **more: Any) -> dict[str, list[str]]:
    data = {"users": USERS, "teams": teams, "enforce_accounts": enforce, "runtime": {"accounting": {"enabled": True}}}
    found: dict[str, list[str]] = {}
    for p in parse_model({**data, **more}).problems():
        if p.rule.startswith("TEAM"):
            found.setdefault(p.rule, []).append(str(p))
    return found


def test_a_good_config_has_no_team_problems_and_reaches_the_nodes() -> None:
    assert problems(GOOD) == {}
    config = parse_model(
        {"users": USERS, "teams": GOOD, "enforce_accounts": True, "runtime": {"accounting": {"enabled": True}}}
    )
    teams = deployment(config).parameters.teams
    assert teams is not None and teams.enforce == "associations,limits,qos,safe"
    assert [(t.name, t.default_for) for t in teams.teams] == [("vision", ("alice",)), ("nlp", ("bob",))]
    assert "teams" not in deployment(ClusterConfig()).parameters.to_json()["hyperpod_cdk"]


@pytest.mark.parametrize(
    ("teams", "rule", "text"),
    [
        (
            [{"name": "vision", "users": ["alice", "mallory"]}, {"name": "nlp", "users": ["bob"]}],
            "TEAM-USER-UNKNOWN",
            "teams[0].users[1]: got 'mallory'; not a user of this config; known: alice, bob. Fix: add the user",
        ),
        (
            [{"name": "vision", "users": ["alice"]}, {"name": "vision", "users": ["bob"]}],
            "TEAM-UNIQUE",
            "teams[1].name: got 'vision'; already the name of teams[0]",
        ),
        (
            [{"name": "vision", "users": []}, {"name": "nlp", "users": ["alice", "bob"]}],
            "TEAM-USERS",
            "teams[0].users: got []; an account without users",
        ),
        ([{"name": "vision", "users": ["alice"]}], "TEAM-UNASSIGNED", "user 'bob' is in no team"),
        ([{"name": "Vision Team", "users": ["alice", "bob"]}], "TEAM-NAME", "teams[0].name: got 'Vision Team'"),
        ([{"name": "root", "users": ["alice", "bob"]}], "TEAM-NAME", "not root"),
        (
            [{"name": "v", "users": ["alice", "bob"], "budget": {"amount": -5}}],
            "TEAM-BUDGET",
            "teams[0].budget.amount: got -5; a budget is an amount of the currency unit, zero or more",
        ),
        (
            [{"name": "v", "users": ["alice", "bob"], "budget": {"amount": 5, "period": "year"}}],
            "TEAM-BUDGET",
            "teams[0].budget.period: got 'year'; allowed: month, week, day, none",
        ),
        (
            [
                {"name": "v", "users": ["alice"], "budget": {"amount": 5, "period": "week"}},
                {"name": "w", "users": ["bob"], "budget": {"amount": 5, "period": "month"}},
            ],
            "TEAM-BUDGET",
            "budgets with different periods (month, week)",
        ),
        (
            [{"name": "v", "users": ["alice", "bob"], "qos": {"max_wall": "two days"}}],
            "TEAM-QOS",
            "teams[0].qos.max_wall: got 'two days'; a Slurm time",
        ),
        (
            [{"name": "v", "users": ["alice", "bob"]}, {"name": "w", "users": ["bob"]}],
            "TEAM-DEFAULT",
            "user 'bob' is in v, w and no team is their default account",
        ),
    ],
)
def test_each_problem_names_the_field_the_value_and_the_fix(teams: Any, rule: str, text: str) -> None:
    found = problems(teams)
    assert rule in found, found
    assert any(text in p for p in found[rule]), found[rule]
    assert all("Fix: " in p for p in found[rule])


def test_a_budget_without_enforcement_is_an_error_not_implied() -> None:
    found = problems([{"name": "v", "users": ["alice", "bob"], "budget": {"amount": 1}}], enforce=False)
    assert found["TEAM-ENFORCE"] == [
        "enforce_accounts: got False; teams v have a budget or QOS limits, which Slurm enforces only with "
        "AccountingStorageEnforce=limits; that also makes every submitting user need an account. Fix: set "
        "enforce_accounts: true (and put every user in a team), or drop the budgets and qos"
    ]


def test_teams_need_the_runtimes_accounting() -> None:
    found = problems(GOOD, runtime={})
    assert "runtime.accounting is off" in found["TEAM-ACCOUNTING"][0]


def test_a_budget_that_never_renews_is_a_warning() -> None:
    config = parse_model(
        {
            "users": USERS,
            "enforce_accounts": True,
            "runtime": {"accounting": {"enabled": True}},
            "teams": [{"name": "v", "users": ["alice", "bob"], "budget": {"amount": 1, "period": "none"}}],
        }
    )
    found = [p for p in config.problems() if p.rule == "TEAM-BUDGET-ONCE"]
    assert len(found) == 1 and found[0].level == "warning"
