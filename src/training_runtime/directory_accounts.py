"""Teams that follow a directory group: the sacctmgr changes that keep their Slurm associations in step (pure).

The controller's group sync (:mod:`training_runtime.directory_sync`) reads each team's ``directory_group`` members
through SSSD (``getent group``) and Slurm's associations (``sacctmgr show assoc``), and :func:`plan` says what to
change:

* a member without the team's association gets one (``add user``; the team becomes their default account when Slurm
  does not know them yet), and can submit under the account at once (no restart: slurmctld reads associations from
  slurmdbd as they change);
* a member whose association was blocked (they had left and came back) is unblocked (``MaxSubmitJobs=-1``, sacctmgr's
  "no limit");
* a user who left the group keeps the association, its usage and its jobs' history, but ``MaxSubmitJobs=0``: new jobs
  are refused at submission, running and pending ones go on (sacctmgr(1): "MaxSubmitJobs= The maximum number of jobs
  able to be submitted to the system at any given time from this association"). Users the config lists in the team's
  ``users`` are never blocked.
* a user whose default account is one they were blocked in gets the first team they still belong to as default.

A group whose members could not be read (the directory is down, SSSD offline) changes nothing: an empty answer is a
group without members, no answer is no news. Stdlib only (Python 3.8+).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from training_runtime.slurm_accounts import Change
from training_runtime.team_model import Team

ASSOC_FORMAT = "account,user,maxsubmit"
USER_FORMAT = "user,defaultaccount"
BLOCKED = "0"
UNBLOCKED = "-1"


@dataclass(frozen=True)
class Associations:
    """The users' associations of one cluster: (user, account) -> MaxSubmitJobs ("" when unset), and defaults."""

    limits: Dict[Tuple[str, str], str]
    defaults: Dict[str, str]

    def blocked(self, user: str, account: str) -> bool:
        return self.limits.get((user, account)) == BLOCKED


def read_associations(assocs: str, users: str) -> Associations:
    """From ``sacctmgr -n -P show assoc format=account,user,maxsubmit`` and ``show user format=user,defaultaccount``."""
    limits: Dict[Tuple[str, str], str] = {}
    for line in filter(None, (raw.strip() for raw in assocs.splitlines())):
        account, user, limit = ([*line.split("|"), "", "", ""])[:3]
        if user:
            limits[(user, account)] = limit.strip()
    defaults = {}
    for line in filter(None, (raw.strip() for raw in users.splitlines())):
        user, account = ([*line.split("|"), "", ""])[:2]
        defaults[user] = account
    return Associations(limits, defaults)


def plan(
    teams: Sequence[Team], members: Mapping[str, Optional[Sequence[str]]], state: Associations, cluster: str
) -> List[Change]:
    """The changes that make the associations of ``teams`` follow their groups' ``members`` (group -> names, None:
    not read this time), in the order sacctmgr needs them."""
    where = "cluster=" + cluster
    changes: List[Change] = []
    known = set(state.defaults)
    active: Dict[str, List[str]] = {}
    blocked_now: Set[Tuple[str, str]] = set()
    for team in teams:
        group = team.directory_group
        if group is None or members.get(group) is None:
            continue
        current = set(members[group] or ())
        for user in sorted(current):
            active.setdefault(user, []).append(team.name)
            if (user, team.name) not in state.limits:
                extra: Tuple[str, ...] = ()
                if user not in known:
                    extra = ("DefaultAccount=" + team.name,)
                    known.add(user)
                changes.append(
                    Change(
                        "+ user {} in account {} (member of directory group {})".format(user, team.name, group),
                        ("add", "user", user, "Account=" + team.name, where, *extra),
                    )
                )
            elif state.blocked(user, team.name):
                changes.append(
                    Change(
                        "~ user {} in account {}: may submit again (back in directory group {})".format(
                            user, team.name, group
                        ),
                        _limit(user, team.name, where, UNBLOCKED),
                    )
                )
        for user, account in sorted(state.limits):
            if account != team.name or user in current or user in team.users or state.blocked(user, account):
                continue
            blocked_now.add((user, account))
            changes.append(
                Change(
                    "- user {} in account {}: new jobs refused (left directory group {}; running jobs and "
                    "history kept)".format(user, account, group),
                    _limit(user, account, where, BLOCKED),
                )
            )
    for user, accounts in sorted(active.items()):
        default = state.defaults.get(user)
        if default is None or default in accounts:
            continue
        if (user, default) in blocked_now or state.blocked(user, default):
            changes.append(
                Change(
                    "~ user {}: default account {} (was {}, where they left the group)".format(
                        user, accounts[0], default
                    ),
                    ("modify", "user", "where", "name=" + user, where, "set", "DefaultAccount=" + accounts[0]),
                )
            )
    return changes


def _limit(user: str, account: str, where: str, value: str) -> Tuple[str, ...]:
    return (
        "modify",
        "user",
        "where",
        "name=" + user,
        "account=" + account,
        where,
        "set",
        "MaxSubmitJobs=" + value,
    )
