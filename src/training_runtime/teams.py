"""Teams: Slurm accounts with their users, fair-share, a QOS and a budget (issue #32).

The config's ``teams:`` and ``enforce_accounts:`` travel to the nodes in the parameters file
(``hyperpod_cdk.teams``); the controller's ``slurm-teams`` step applies them with ``sacctmgr``
(:mod:`training_runtime.steps.teams`). The same rules check a config at synth time (:func:`teams_problems`)
and the file on the node. Stdlib only (Python 3.8+).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from training_runtime.billing import billing_minutes
from training_runtime.problems import WARNING, Problem, RuleBook

ACCOUNT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
"""Lower-case (sacctmgr(1): "The content's of Slurm's database are maintained in lower case"), no character that
sacctmgr's own syntax uses (``=``, ``,``, ``|``, spaces, quotes)."""
RESERVED_ACCOUNTS = ("root",)
"""Slurm's root account holds every association; a team cannot be it."""
RESERVED_QOS = ("normal",)
"""Slurm's default QOS; a team's QOS (named after the team) must not rewrite it."""
PERIODS = {"month": "MONTHLY", "week": "WEEKLY", "day": "DAILY", "none": "NONE"}
"""A budget's period and the ``PriorityUsageResetPeriod`` that resets usage at its end (slurm.conf(5))."""
ENFORCE = "associations,limits,qos,safe"
"""``AccountingStorageEnforce`` with ``enforce_accounts``: a user in no account cannot submit, association and QOS
limits hold, and (``safe``) a job starts against a GrpTRESMins budget only if it can run to completion."""
WALL_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?$")
TEAM_KEYS = ("name", "users", "default_for", "fairshare", "qos", "budget")
QOS_KEYS = ("max_nodes", "max_wall", "priority")
BUDGET_KEYS = ("amount", "period")


@dataclass(frozen=True)
class TeamQos:
    """The QOS named after the team: the team's jobs run in it (the account's default and only QOS)."""

    max_nodes: Optional[int] = None
    """Most nodes the team's running jobs hold together (``GrpTRES=node=N``)."""
    max_wall: Optional[str] = None
    """Longest run time of one job, in Slurm's time format (``MaxWall``), e.g. 2-00:00:00."""
    priority: Optional[int] = None
    """The QOS's priority (``Priority``), weighted by ``PriorityWeightQOS``."""


@dataclass(frozen=True)
class Budget:
    """A spending cap per period that Slurm enforces: new jobs wait (AssocGrpBillingMinutes) once it is used."""

    amount: float
    """Currency units per period; Slurm's limit is ``GrpTRESMins=billing=<billing_minutes(amount)>``."""
    period: str = "month"
    """month, week, day or none (never reset)."""

    @property
    def billing_minutes(self) -> int:
        return billing_minutes(self.amount)


@dataclass(frozen=True)
class Team:
    name: str
    """The Slurm account."""
    users: Tuple[str, ...]
    """Its members: names from the config's ``users``."""
    default_for: Tuple[str, ...] = ()
    """Users whose default account this is: those the config names in ``default_for``, and those in no other
    team."""
    fairshare: Optional[int] = None
    """The account's shares (``Fairshare``), weighted by ``PriorityWeightFairshare``. Default: Slurm's, 1."""
    qos: Optional[TeamQos] = None
    budget: Optional[Budget] = None


@dataclass(frozen=True)
class Teams:
    """Every team, and whether Slurm refuses jobs of users in no account."""

    enforce_accounts: bool
    teams: Tuple[Team, ...]

    @property
    def enforce(self) -> Optional[str]:
        """``AccountingStorageEnforce``, or None (Slurm's default: nothing enforced)."""
        return ENFORCE if self.enforce_accounts else None

    @property
    def reset_period(self) -> Optional[str]:
        """``PriorityUsageResetPeriod`` when a team has a budget (the one period of the cluster), else None."""
        periods = sorted({t.budget.period for t in self.teams if t.budget is not None})
        return PERIODS[periods[0]] if periods else None

    def default_account(self, user: str) -> str:
        return next(t.name for t in self.teams if user in t.default_for)

    def to_json(self) -> Dict[str, Any]:
        return {"enforce_accounts": self.enforce_accounts, "teams": [_team_json(t) for t in self.teams]}


def _team_json(team: Team) -> Dict[str, Any]:
    data: Dict[str, Any] = {"name": team.name, "users": list(team.users), "default_for": list(team.default_for)}
    if team.fairshare is not None:
        data["fairshare"] = team.fairshare
    if team.qos is not None:
        data["qos"] = {k: v for k, v in team.qos.__dict__.items() if v is not None}
    if team.budget is not None:
        data["budget"] = {"amount": team.budget.amount, "period": team.budget.period}
    return data


def wall_seconds(text: str) -> Optional[int]:
    """Seconds of a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS); None if not one."""
    found = WALL_TIME.match(text.strip())
    if not found:
        return None
    days, first, second, third = found.groups()
    if days is None:
        if third is not None:
            return int(first) * 3600 + int(second) * 60 + int(third)
        return int(first) * 60 + int(second or 0)
    return int(days) * 86400 + int(first) * 3600 + int(second or 0) * 60 + int(third or 0)


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
        add("enforce_accounts", "expected true or false", "TEAM-SHAPE", got=enforce)
        enforce = False
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        add(path, "expected a list of teams", "TEAM-SHAPE", got=raw)
        return Teams(enforce, ())
    parsed: List[Tuple[Team, Optional[Tuple[str, ...]]]] = []
    seen: Dict[str, str] = {}
    for index, item in enumerate(raw):
        where = "{}[{}]".format(path, index)
        if not isinstance(item, Mapping):
            add(where, "expected a mapping with name and users", "TEAM-SHAPE", got=item)
            continue
        for key in sorted(set(item) - set(TEAM_KEYS)):
            add(where + "." + key, "unknown field; allowed: " + ", ".join(TEAM_KEYS), "TEAM-SHAPE")
        name = item.get("name")
        if not isinstance(name, str) or not ACCOUNT_NAME.match(name) or name in RESERVED_ACCOUNTS:
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
        users = item.get("users")
        if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
            add(where + ".users", "expected a list of user names", "TEAM-SHAPE", got=users)
            users = []
        elif not users:
            add(
                where + ".users",
                "an account without users: nobody could charge jobs to it",
                "TEAM-USERS",
                fix="list the team's users (names from users:), or remove the team",
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
            add(where + ".users", "lists a user twice", "TEAM-SHAPE", got=users)
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
                got=fairshare,
            )
        qos = _qos(item.get("qos"), where + ".qos", name, add)
        budget = _budget(item.get("budget"), where + ".budget", add)
        explicit = tuple(default_for) if default_for is not None else None
        parsed.append((Team(str(name), tuple(users), (), fairshare, qos, budget), explicit))
    teams = _resolve_defaults(parsed, path, add)
    _whole_cluster(teams, enforce, known_users, path, add)
    return Teams(enforce, tuple(teams))


def _qos(raw: Any, where: str, team: Any, add: Any) -> Optional[TeamQos]:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        add(where, "expected a mapping of max_nodes, max_wall, priority", "TEAM-SHAPE", got=raw)
        return None
    for key in sorted(set(raw) - set(QOS_KEYS)):
        add(where + "." + key, "unknown field; allowed: " + ", ".join(QOS_KEYS), "TEAM-SHAPE")
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
        add(where + ".max_nodes", "expected a whole number of nodes, 1 or more", "TEAM-QOS", got=max_nodes)
    if max_wall is not None and (not isinstance(max_wall, str) or wall_seconds(max_wall) in (None, 0)):
        add(
            where + ".max_wall",
            "a Slurm time: minutes, HH:MM:SS or D-HH:MM:SS, above zero",
            "TEAM-QOS",
            fix='e.g. "2-00:00:00" for two days',
            got=max_wall,
        )
    if priority is not None and not _int(priority, 0):
        add(where + ".priority", "expected a whole number, 0 or more", "TEAM-QOS", got=priority)
    return TeamQos(max_nodes, max_wall, priority)


def _budget(raw: Any, where: str, add: Any) -> Optional[Budget]:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        add(where, "expected a mapping with amount and period", "TEAM-SHAPE", got=raw)
        return None
    for key in sorted(set(raw) - set(BUDGET_KEYS)):
        add(where + "." + key, "unknown field; allowed: " + ", ".join(BUDGET_KEYS), "TEAM-SHAPE")
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
        resolved.append(Team(team.name, team.users, tuple(chosen), team.fairshare, team.qos, team.budget))
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
    ("TEAM-USERS", "teams[*].users", "A team has at least one user.", "error"),
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
