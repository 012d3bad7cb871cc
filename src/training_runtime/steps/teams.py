"""The config's teams in Slurm's accounting database: accounts, users, QOS and budgets, applied with sacctmgr.

Runs on the controller after the cluster is registered (``accounting-cluster``). It reads what slurmdbd has, applies
only what differs (:func:`training_runtime.slurm_accounts.plan`) and never deletes an account or a user: a team
removed from the config is reported and stays, with its history.
"""

from __future__ import annotations

from typing import List, Optional

from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.retry import NotReady
from training_runtime.slurm_accounts import (
    ASSOC_FORMAT,
    QOS_FORMAT,
    USER_FORMAT,
    Change,
    SlurmState,
    left_in_place,
    plan,
    read_state,
)
from training_runtime.steps import Step
from training_runtime.steps.slurm import slurm_cluster_name
from training_runtime.team_model import Teams


class SlurmTeams(Step):
    """Accounts with their fair-share, QOS and budget (``GrpTRESMins=billing=…``), users and default accounts."""

    name = "slurm-teams"

    def __init__(self, teams: Teams) -> None:
        self.teams = teams

    def _sacctmgr(self, node: Node, *args: str) -> Optional[str]:
        result = node.run([node.slurm.command("sacctmgr"), "-n", "-P", *args], check=False, timeout=60)
        return result.stdout if result.ok else None

    def _state(self, node: Node) -> Optional[SlurmState]:
        """What slurmdbd has for this cluster; None while it does not answer."""
        cluster = slurm_cluster_name(node)
        assocs = self._sacctmgr(node, "show", "assoc", "where", "cluster=" + cluster, "format=" + ASSOC_FORMAT)
        users = self._sacctmgr(node, "show", "user", "format=" + USER_FORMAT)
        qos = self._sacctmgr(node, "show", "qos", "format=" + QOS_FORMAT)
        if assocs is None or users is None or qos is None:
            return None
        return read_state(assocs, users, qos)

    def _plan(self, node: Node) -> Optional[List[Change]]:
        state = self._state(node)
        return None if state is None else plan(self.teams, state, slurm_cluster_name(node))

    def needed(self, node: Node) -> bool:
        changes = self._plan(node)
        return changes is None or bool(changes)

    def apply(self, node: Node) -> None:
        def answering() -> List[Change]:
            changes = self._plan(node)
            if changes is None:
                raise NotReady("slurmdbd is not answering yet")
            return changes

        for change in node.retry.call(answering, what="slurmdbd"):
            log("change", step=self.name, what=change.line)
            node.run([node.slurm.command("sacctmgr"), "-i", *change.args], timeout=60)

    def describe(self, node: Node) -> List[str]:
        changes = self._plan(node)
        if changes is None:
            return ["apply {} team(s) with sacctmgr once slurmdbd answers".format(len(self.teams.teams))]
        return [c.line for c in changes]

    def left_alone(self, node: Node) -> List[str]:
        state = self._state(node)
        return [] if state is None else left_in_place(self.teams, state)
