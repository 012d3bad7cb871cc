"""Rules on the LDAP directory (``directory:``) and the teams that name its groups (issue #41).

The runtime's own rules (``training_runtime.directory.DIRECTORY_RULES``) are registered here, so the config is checked
with the code the nodes use. The rules that join the directory with the teams live here.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.directory import DIRECTORY_RULES, directory_problems
from training_runtime.problems import Problem

rule = REGISTRY.rule


def _register_book() -> None:
    for book_rule in DIRECTORY_RULES.rules:

        def check(view: ClusterView, _id: str = book_rule.id) -> list[Problem]:
            return [p for p in directory_problems(view.directory, view.path("directory")) if p.rule == _id]

        check.__doc__ = book_rule.doc
        rule(book_rule.id, "directory", book_rule.field, source=book_rule.source)(check)


_register_book()


def _group_teams(view: ClusterView) -> list[tuple[int, object]]:
    return [
        (index, team.get("directory_group"))
        for index, team in enumerate(view.teams)
        if isinstance(team, dict) and team.get("directory_group") is not None
    ]


@rule("DIR-TEAM-DIRECTORY", "directory", "teams[*].directory_group", needs=("teams",), source="hyperpod-cdk")
def group_needs_directory(view: ClusterView) -> Iterator[Problem]:
    """A team's directory_group names a group of the config's directory, so the cluster needs one."""
    if view.directory is not None:
        return
    for index, group in _group_teams(view):
        yield Problem(
            view.path("teams", f"[{index}].directory_group"),
            "a directory group, but the config has no directory: section, so no node can resolve its members",
            got=group,
            fix="add directory: (uris, search_base, bind_dn, bind_password_secret_arn), or list the team's users",
        )


@rule(
    "DIR-TEAM-ENFORCE",
    "directory",
    "enforce_accounts",
    needs=("teams",),
    source="slurm.conf(5) AccountingStorageEnforce; sacctmgr(1) MaxSubmitJobs",
)
def group_needs_enforcement(view: ClusterView) -> Iterator[Problem]:
    """A team with a directory_group needs enforce_accounts: a member who leaves the group is refused new jobs by
    their association's MaxSubmitJobs=0, which Slurm enforces only with AccountingStorageEnforce=limits."""
    groups = _group_teams(view)
    if groups and view.enforce_accounts is not True:
        yield Problem(
            view.path("cluster", "enforce_accounts"),
            "teams {} follow directory groups; without enforce_accounts Slurm neither needs an association to submit "
            "nor enforces the limit that refuses a leaver's new jobs".format(
                ", ".join(str(view.teams[i].get("name")) for i, _ in groups)
            ),
            got=view.enforce_accounts,
            fix="set enforce_accounts: true",
        )
