"""Teams: Slurm accounts with their users, fair-share, a QOS and a budget (issue #32).

The config's ``teams:`` and ``enforce_accounts:`` travel to the nodes in the parameters file
(``hyperpod_cdk.teams``); the controller's ``slurm-teams`` step applies them with ``sacctmgr``
(:mod:`training_runtime.steps.teams`). The same rules check a config at synth time (:func:`teams_problems`)
and the file on the node; the values they build are in :mod:`training_runtime.team_model`. Stdlib only
(Python 3.8+).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from training_runtime.directory import GROUP_NAME
from training_runtime.problems import WARNING, Problem, RuleBook
from training_runtime.team_model import (
    ACCOUNT_NAME,
    PERIODS,
    RESERVED_ACCOUNTS,
    RESERVED_QOS,
    Budget,
    Team,
    TeamQos,
    Teams,
    wall_seconds,
)

_UNKNOWN = "remove the field or correct its spelling"
_QOS_FIX = 'e.g. qos: {max_nodes: 8, max_wall: "2-00:00:00", priority: 10}'
TEAM_KEYS = ("name", "users", "directory_group", "default_for", "fairshare", "qos", "budget")
QOS_KEYS = ("max_nodes", "max_wall", "priority")
BUDGET_KEYS = ("amount", "period")


def teams_problems(
    raw: Any, enforce_accounts: Any = False, known_users: Optional[Sequence[str]] = None, path: str = "teams"
) -> List[Problem]:
    problems: List[Problem] = []
    _parse(raw, enforce_accounts, known_users, path, problems)
    return problems


def parse_teams(
    raw: Any, enforce_accounts: Any = False, known_users: Optional[Sequence[str]] = None, path: str = "teams"
) -> Teams:
    """The teams, checked; raises ValueError listing every error (warnings are not errors)."""
    problems: List[Problem] = []
    teams = _parse(raw, enforce_accounts, known_users, path, problems)
    found = [p for p in problems if p.level != WARNING]
    if found:
        raise ValueError("\n".join(found))
    return teams


def _int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _parse(raw: Any, enforce: Any, known_users: Optional[Sequence[str]], path: str, problems: List[Problem]) -> Teams:
    def add(where: str, expected: str, rule: str, fix: str = "", **got: Any) -> None:
        problems.append(Problem(where, expected, fix=fix, rule=rule, **got))

    if not isinstance(enforce, bool):
        add("enforce_accounts", "expected true or false", "TEAM-SHAPE", fix="write true or false", got=enforce)
        enforce = False
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        add(path, "expected a list of teams", "TEAM-SHAPE", fix="write - {name: ..., users: [...]} per team", got=raw)
        return Teams(enforce, ())
    parsed: List[Tuple[Team, Optional[Tuple[str, ...]]]] = []
    seen: Dict[str, str] = {}
    for index, item in enumerate(raw):
        where = "{}[{}]".format(path, index)
        if not isinstance(item, Mapping):
            add(
                where,
                "expected a mapping with name and users",
                "TEAM-SHAPE",
                fix="write {name: ..., users: [...]}",
                got=item,
            )
            continue
        for key in sorted(set(item) - set(TEAM_KEYS)):
            add(where + "." + key, "unknown field; allowed: " + ", ".join(TEAM_KEYS), "TEAM-SHAPE", fix=_UNKNOWN)
        name = item.get("name")
        if not isinstance(name, str) or not ACCOUNT_NAME.fullmatch(name) or name in RESERVED_ACCOUNTS:
            add(
                where + ".name",
                "a Slurm account name: a lower-case letter, then lower-case letters, digits, _ or -, at most 64; "
                "not root",
                "TEAM-NAME",
                fix="rename the team, e.g. {!r}".format(re.sub(r"[^a-z0-9_-]", "-", str(name).lower()) or "team"),
                got=name,
            )
        elif name in seen:
            add(
                where + ".name",
                "already the name of " + seen[name] + "; one account per team",
                "TEAM-UNIQUE",
                fix="merge the two teams or rename one",
                got=name,
            )
        else:
            seen[name] = where
        group = item.get("directory_group")
        if group is not None and (not isinstance(group, str) or not GROUP_NAME.fullmatch(group)):
            add(
                where + ".directory_group",
                "a directory group's name (letters, digits, _ . - and spaces, at most 64)",
                "TEAM-SHAPE",
                fix="give the group's name as getent group shows it",
                got=group,
            )
            group = None
        users = item.get("users", [] if "directory_group" in item else None)
        if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
            add(where + ".users", "expected a list of user names", "TEAM-SHAPE", fix="e.g. [alice, bob]", got=users)
            users = []
        elif not users and "directory_group" not in item:
            add(
                where + ".users",
                "an account without users: nobody could charge jobs to it",
                "TEAM-USERS",
                fix="list the team's users (names from users:), name its directory_group, or remove the team",
                got=users,
            )
        for position, user in enumerate(users):
            if known_users is not None and user not in known_users:
                add(
                    "{}.users[{}]".format(where, position),
                    "not a user of this config; known: {}".format(", ".join(known_users) or "none"),
                    "TEAM-USER-UNKNOWN",
                    fix="add the user to users: (name, uid) or correct the name",
                    got=user,
                )
        if len(set(users)) != len(users):
            add(where + ".users", "lists a user twice", "TEAM-SHAPE", fix="list each user once", got=users)
        default_for = item.get("default_for")
        if default_for is not None and (
            not isinstance(default_for, list) or not all(isinstance(u, str) and u in users for u in default_for)
        ):
            add(
                where + ".default_for",
                "expected a list of this team's users",
                "TEAM-DEFAULT",
                fix="name only users listed in this team's users",
                got=default_for,
            )
            default_for = None
        fairshare = item.get("fairshare")
        if fairshare is not None and not _int(fairshare, 1):
            add(
                where + ".fairshare",
                "expected a whole number of shares, 1 or more (sacctmgr Fairshare=)",
                "TEAM-QOS",
                fix="e.g. fairshare: 100, or leave it out for Slurm's 1",
                got=fairshare,
            )
        qos = _qos(item.get("qos"), where + ".qos", name, add)
        budget = _budget(item.get("budget"), where + ".budget", add)
        explicit = tuple(default_for) if default_for is not None else None
        team = Team(str(name), tuple(users), (), fairshare, qos, budget, group)
        parsed.append((team, explicit))
    teams = _resolve_defaults(parsed, path, add)
    _whole_cluster(teams, enforce, known_users, path, add)
    return Teams(enforce, tuple(teams))


def _qos(raw: Any, where: str, team: Any, add: Any) -> Optional[TeamQos]:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        add(where, "expected a mapping of max_nodes, max_wall, priority", "TEAM-SHAPE", fix=_QOS_FIX, got=raw)
        return None
    for key in sorted(set(raw) - set(QOS_KEYS)):
        add(where + "." + key, "unknown field; allowed: " + ", ".join(QOS_KEYS), "TEAM-SHAPE", fix=_UNKNOWN)
    if team in RESERVED_QOS:
        add(
            where,
            "the team's QOS is named after it, and 'normal' is Slurm's default QOS",
            "TEAM-NAME",
            fix="rename the team, or drop its qos",
            got=team,
        )
    max_nodes, max_wall, priority = (raw.get(k) for k in QOS_KEYS)
    if max_nodes is not None and not _int(max_nodes, 1):
        add(
            where + ".max_nodes", "expected a whole number of nodes, 1 or more", "TEAM-QOS", fix=_QOS_FIX, got=max_nodes
        )
    if max_wall is not None and (not isinstance(max_wall, str) or wall_seconds(max_wall) in (None, 0)):
        add(
            where + ".max_wall",
            "a Slurm time: minutes, HH:MM:SS or D-HH:MM:SS, above zero",
            "TEAM-QOS",
            fix='e.g. "2-00:00:00" for two days',
            got=max_wall,
        )
    if priority is not None and not _int(priority, 0):
        add(where + ".priority", "expected a whole number, 0 or more", "TEAM-QOS", fix=_QOS_FIX, got=priority)
    return TeamQos(max_nodes, max_wall, priority)


def _budget(raw: Any, where: str, add: Any) -> Optional[Budget]:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        add(
            where,
            "expected a mapping with amount and period",
            "TEAM-SHAPE",
            fix="e.g. {amount: 20000, period: month}",
            got=raw,
        )
        return None
    for key in sorted(set(raw) - set(BUDGET_KEYS)):
        add(where + "." + key, "unknown field; allowed: " + ", ".join(BUDGET_KEYS), "TEAM-SHAPE", fix=_UNKNOWN)
    amount, period = raw.get("amount"), raw.get("period", "month")
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
        add(
            where + ".amount",
            "a budget is an amount of the currency unit, zero or more",
            "TEAM-BUDGET",
            fix="give the team's spend per period, e.g. 20000",
            got=amount,
        )
        amount = 0
    if period not in PERIODS:
        add(
            where + ".period",
            "allowed: " + ", ".join(PERIODS),
            "TEAM-BUDGET",
            got=period,
            fix="use one of those; Slurm resets usage only monthly, weekly or daily (PriorityUsageResetPeriod)",
        )
        period = "month"
    elif period == "none":
        add(
            where + ".period",
            "none: Slurm never resets the team's usage, so the budget is a one-time allocation. "
            "slurm.conf(5) says PriorityDecayHalfLife=0 needs PriorityUsageResetPeriod set to an interval; "
            "slurmctld 22.05 accepts NONE (tried on the local cluster), other versions are unchecked",
            "TEAM-BUDGET-ONCE",
            got=period,
            fix="use month, week or day for a budget that renews; raise a used-up allocation with sacctmgr "
            "(docs/cost.md, Teams and budgets)",
            level=WARNING,
        )
    return Budget(float(amount), str(period))


def _resolve_defaults(teams: List[Tuple[Team, Optional[Tuple[str, ...]]]], path: str, add: Any) -> List[Team]:
    """Each user's default account: the team that names them in default_for, else their only team."""
    memberships: Dict[str, List[str]] = {}
    named: Dict[str, List[str]] = {}
    for team, explicit in teams:
        for user in team.users:
            memberships.setdefault(user, []).append(team.name)
        for user in explicit or ():
            named.setdefault(user, []).append(team.name)
    for user, accounts in sorted(named.items()):
        if len(accounts) > 1:
            add(
                path,
                "user {!r} has more than one default account: {}".format(user, ", ".join(accounts)),
                "TEAM-DEFAULT",
                fix="name the user in one team's default_for",
            )
    resolved = []
    for team, explicit in teams:
        chosen = [u for u in team.users if u in (explicit or ()) or (u not in named and len(memberships[u]) == 1)]
        resolved.append(dataclasses.replace(team, default_for=tuple(chosen)))
    for user, accounts in sorted(memberships.items()):
        if user not in named and not any(user in t.default_for for t in resolved):
            add(
                path,
                "user {!r} is in {} and no team is their default account (default_for), so Slurm would "
                "have no account for jobs that name none".format(user, ", ".join(accounts)),
                "TEAM-DEFAULT",
                fix="add {!r} to the default_for of one of those teams".format(user),
            )
    return resolved


def _whole_cluster(teams: List[Team], enforce: bool, known_users: Optional[Sequence[str]], path: str, add: Any) -> None:
    periods = sorted({t.budget.period for t in teams if t.budget is not None})
    if len(periods) > 1:
        add(
            path,
            "budgets with different periods ({}): Slurm resets every account's usage at one cluster-wide "
            "PriorityUsageResetPeriod".format(", ".join(periods)),
            "TEAM-BUDGET",
            fix="give every budget the same period (scale the amounts to it)",
        )
    limited = [t.name for t in teams if t.budget is not None or t.qos is not None]
    if limited and not enforce:
        add(
            "enforce_accounts",
            "teams {} have a budget or QOS limits, which Slurm enforces only with "
            "AccountingStorageEnforce=limits; that also makes every submitting user need an account".format(
                ", ".join(limited)
            ),
            "TEAM-ENFORCE",
            got=enforce,
            fix="set enforce_accounts: true (and put every user in a team), or drop the budgets and qos",
        )
    if enforce and known_users is not None:
        members = {u for t in teams for u in t.users}
        for user in known_users:
            if user not in members:
                add(
                    path,
                    "user {!r} is in no team; with enforce_accounts Slurm refuses their jobs".format(user),
                    "TEAM-UNASSIGNED",
                    fix="add {!r} to a team's users, or set enforce_accounts: false".format(user),
                )


TEAM_RULES = RuleBook("teams")
"""The teams rules; one parsing pass checks them all (:func:`teams_problems`)."""
for _id, _field, _doc, _level in (
    ("TEAM-SHAPE", "teams[*]", "teams is a list of mappings with the known fields and value types.", "error"),
    (
        "TEAM-NAME",
        "teams[*].name",
        "A team's name is a Slurm account name: lower-case, not root; with a qos, not normal.",
        "error",
    ),
    ("TEAM-UNIQUE", "teams[*].name", "Each team is its own account: no two teams share a name.", "error"),
    ("TEAM-USERS", "teams[*].users", "A team has at least one user or a directory_group.", "error"),
    ("TEAM-USER-UNKNOWN", "teams[*].users", "A team's users are users of the config.", "error"),
    ("TEAM-DEFAULT", "teams[*].default_for", "Every user has exactly one default account.", "error"),
    (
        "TEAM-QOS",
        "teams[*].{fairshare,qos}",
        "Fair-share and QOS limits are positive; max_wall is a Slurm time.",
        "error",
    ),
    (
        "TEAM-BUDGET",
        "teams[*].budget",
        "A budget is zero or more per month, week, day or none; one period for the cluster.",
        "error",
    ),
    ("TEAM-BUDGET-ONCE", "teams[*].budget.period", "A budget with period none is never renewed.", WARNING),
    ("TEAM-ENFORCE", "enforce_accounts", "Budgets and QOS limits need enforce_accounts (Slurm's limits).", "error"),
    ("TEAM-UNASSIGNED", "teams", "With enforce_accounts every user is in a team.", "error"),
):
    TEAM_RULES.declare(
        _id,
        "teams",
        _field,
        _doc,
        teams_problems,
        level=_level,
        source="slurm.conf(5) AccountingStorageEnforce, PriorityUsageResetPeriod; sacctmgr(1)",
    )
