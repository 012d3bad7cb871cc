"""The teams as Slurm has them, and the sacctmgr changes that make Slurm match the config: pure functions.

:func:`read_state` parses ``sacctmgr -n -P`` listings; :func:`plan` compares them with the teams and returns the
changes in the order sacctmgr needs them (a QOS before the account that uses it, an account before its users, a
user's association before it becomes their default). Nothing is ever deleted: what the config no longer names is
reported by :func:`left_in_place` and stays, with its usage history (sacctmgr(1)). Stdlib only (Python 3.8+).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from training_runtime.team_model import Team, Teams, wall_seconds

ASSOC_FORMAT = "account,user,fairshare,grptresmins,qos,defaultqos"
USER_FORMAT = "user,defaultaccount"
QOS_FORMAT = "name,grptres,maxwall,priority"
UNSET = "-1"
"""sacctmgr's value that clears a limit ("To clear a previously set value use the modify command with a new value
of -1")."""


@dataclass(frozen=True)
class AccountState:
    fairshare: Optional[int] = None
    grp_tres_mins: Dict[str, str] = field(default_factory=dict)
    qos: Tuple[str, ...] = ()
    default_qos: str = ""


@dataclass(frozen=True)
class QosState:
    grp_tres: Dict[str, str] = field(default_factory=dict)
    max_wall_s: Optional[int] = None
    priority: int = 0


@dataclass(frozen=True)
class SlurmState:
    """The accounts (their own associations), users' associations, default accounts and QOS of one cluster."""

    accounts: Dict[str, AccountState]
    memberships: Set[Tuple[str, str]]
    """(user, account) associations."""
    defaults: Dict[str, str]
    qos: Dict[str, QosState]


@dataclass(frozen=True)
class Change:
    """One sacctmgr command and the plan line that says what it does."""

    line: str
    args: Tuple[str, ...]
    """sacctmgr's arguments after ``-i`` (commit without asking)."""


def _tres(text: str) -> Dict[str, str]:
    return dict(part.split("=", 1) for part in text.split(",") if "=" in part)


def _fields(line: str, count: int) -> List[str]:
    parts = line.split("|")
    return (parts + [""] * count)[:count]


def read_state(assocs: str, users: str, qos: str) -> SlurmState:
    """The state from the three listings (formats :data:`ASSOC_FORMAT`, :data:`USER_FORMAT`, :data:`QOS_FORMAT`)."""
    accounts: Dict[str, AccountState] = {}
    memberships: Set[Tuple[str, str]] = set()
    for line in filter(None, (raw.strip() for raw in assocs.splitlines())):
        account, user, share, mins, qos_list, default_qos = _fields(line, 6)
        if user:
            memberships.add((user, account))
        else:
            accounts[account] = AccountState(
                fairshare=int(share) if share.isdigit() else None,
                grp_tres_mins=_tres(mins),
                qos=tuple(sorted(q for q in qos_list.split(",") if q)),
                default_qos=default_qos,
            )
    defaults = {}
    for line in filter(None, (raw.strip() for raw in users.splitlines())):
        user, account = _fields(line, 2)
        defaults[user] = account
    qos_states = {}
    for line in filter(None, (raw.strip() for raw in qos.splitlines())):
        name, grp_tres, max_wall, priority = _fields(line, 4)
        qos_states[name] = QosState(
            grp_tres=_tres(grp_tres),
            max_wall_s=wall_seconds(max_wall) if max_wall else None,
            priority=int(priority) if priority.strip().isdigit() else 0,
        )
    return SlurmState(accounts, memberships, defaults, qos_states)


def _qos_settings(team: Team, current: Optional[QosState]) -> List[Tuple[str, str, str]]:
    """(setting, value, plan text) of the team's QOS that differ from ``current`` (None: a new QOS)."""
    assert team.qos is not None
    qos, now = team.qos, current or QosState()
    found = []
    if (str(qos.max_nodes) if qos.max_nodes else None) != now.grp_tres.get("node"):
        value = "node={}".format(qos.max_nodes if qos.max_nodes else UNSET)
        found.append(("GrpTRES", value, "max nodes {}".format(qos.max_nodes or "unlimited")))
    wall = wall_seconds(qos.max_wall) if qos.max_wall else None
    if wall != now.max_wall_s:
        found.append(("MaxWall", qos.max_wall or UNSET, "max wall {}".format(qos.max_wall or "unlimited")))
    if (qos.priority or 0) != now.priority:
        found.append(("Priority", str(qos.priority or 0), "priority {}".format(qos.priority or 0)))
    if current is None:
        found = [f for f in found if f[1] not in (UNSET, "node=" + UNSET, "0")]
    return found


def _account_settings(team: Team, current: Optional[AccountState]) -> List[Tuple[str, str, str]]:
    now = current or AccountState()
    found = []
    if team.fairshare is not None and team.fairshare != now.fairshare:
        found.append(("Fairshare", str(team.fairshare), "fairshare {}".format(team.fairshare)))
    wanted = str(team.budget.billing_minutes) if team.budget is not None else None
    if wanted != now.grp_tres_mins.get("billing"):
        if team.budget is not None:
            text = "budget {:g} per {} (GrpTRESMins=billing={})".format(team.budget.amount, team.budget.period, wanted)
        else:
            text = "no budget"
        found.append(("GrpTRESMins", "billing={}".format(wanted if wanted is not None else UNSET), text))
    if team.qos is not None and (now.qos != (team.name,) or now.default_qos != team.name):
        found.append(("QOS", team.name, "qos {}".format(team.name)))
        found.append(("DefaultQOS", team.name, ""))
    if current is None:
        found = [f for f in found if f[1] != "billing=" + UNSET]
    return found


def _describe(settings: List[Tuple[str, str, str]]) -> str:
    texts = [text for _, _, text in settings if text]
    return " ({})".format(", ".join(texts)) if texts else ""


def plan(teams: Teams, state: SlurmState, cluster: str) -> List[Change]:
    """The changes that make ``state`` match ``teams``, in the order sacctmgr must run them; none when it does."""
    where = "cluster=" + cluster
    changes: List[Change] = []
    for team in teams.teams:
        if team.qos is None:
            continue
        current = state.qos.get(team.name)
        settings = _qos_settings(team, current)
        assigned = tuple("{}={}".format(k, v) for k, v, _ in settings)
        if current is None:
            changes.append(Change("+ qos " + team.name + _describe(settings), ("add", "qos", team.name, *assigned)))
        elif settings:
            changes.append(
                Change(
                    "~ qos " + team.name + _describe(settings),
                    ("modify", "qos", "where", "name=" + team.name, "set", *assigned),
                )
            )
    for team in teams.teams:
        current_account = state.accounts.get(team.name)
        settings = _account_settings(team, current_account)
        assigned = tuple("{}={}".format(k, v) for k, v, _ in settings)
        if current_account is None:
            changes.append(
                Change("+ account " + team.name + _describe(settings), ("add", "account", team.name, where, *assigned))
            )
        elif settings:
            changes.append(
                Change(
                    "~ account " + team.name + _describe(settings),
                    ("modify", "account", "where", "name=" + team.name, where, "set", *assigned),
                )
            )
    changes += _user_changes(teams, state, where)
    return changes


def _user_changes(teams: Teams, state: SlurmState, where: str) -> List[Change]:
    changes: List[Change] = []
    known = set(state.defaults)
    # A user's default account first: a user's first association becomes their default account.
    ordered = sorted(
        ((user, team.name) for team in teams.teams for user in team.users),
        key=lambda pair: (pair[0], pair[1] != teams.default_account(pair[0])),
    )
    for user, account in ordered:
        if (user, account) in state.memberships:
            continue
        default = teams.default_account(user)
        extra: Tuple[str, ...] = ()
        if user not in known:
            extra = ("DefaultAccount=" + default,)
            known.add(user)
        changes.append(
            Change(
                "+ user {} in account {}".format(user, account),
                ("add", "user", user, "Account=" + account, where, *extra),
            )
        )
    for user in sorted({u for t in teams.teams for u in t.users}):
        default = teams.default_account(user)
        current = state.defaults.get(user)
        if current is not None and current != default:
            changes.append(
                Change(
                    "~ user {}: default account {} (was {})".format(user, default, current),
                    ("modify", "user", "where", "name=" + user, where, "set", "DefaultAccount=" + default),
                )
            )
    return changes


def left_in_place(teams: Teams, state: SlurmState) -> List[str]:
    """What Slurm has and the config no longer names: reported, never deleted (its jobs' history stays)."""
    names = {t.name for t in teams.teams}
    members = {(u, t.name) for t in teams.teams for u in t.users}
    lines = [
        "account {} is not in the config: left in place with its history".format(a)
        for a in sorted(state.accounts)
        if a not in names and a != "root"
    ]
    lines += [
        "user {} in account {} is not in the config: left in place".format(u, a)
        for u, a in sorted(state.memberships)
        if a in names and (u, a) not in members
    ]
    return lines
