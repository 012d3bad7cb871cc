"""The teams as the node reads them: Slurm accounts with their users, fair-share, a QOS and a budget (issue #32).

:mod:`training_runtime.teams` checks and builds them from the config; the controller's ``slurm-teams`` step applies
them (:mod:`training_runtime.steps.teams`). Stdlib only (Python 3.8+).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from training_runtime.billing import billing_minutes

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
    directory_group: Optional[str] = None
    """A group of the cluster's ``directory``: its members join the account too, and leavers are blocked from new
    jobs, kept in step by the controller (:mod:`training_runtime.directory_accounts`). Default: none."""


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

    @property
    def directory_teams(self) -> Tuple[Team, ...]:
        """The teams that name a directory group."""
        return tuple(t for t in self.teams if t.directory_group is not None)

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
    if team.directory_group is not None:
        data["directory_group"] = team.directory_group
    return data


def wall_seconds(text: str) -> Optional[int]:
    """Seconds of a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS); None if not one."""
    found = WALL_TIME.fullmatch(text.strip())
    if not found:
        return None
    days, first, second, third = found.groups()
    if days is None:
        if third is not None:
            return int(first) * 3600 + int(second) * 60 + int(third)
        return int(first) * 60 + int(second or 0)
    return int(days) * 86400 + int(first) * 3600 + int(second or 0) * 60 + int(third or 0)
