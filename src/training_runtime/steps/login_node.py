"""Batch jobs stay off HyperPod's login nodes: each login node drains itself in Slurm.

HyperPod puts every node in its universal ``dev`` partition ("All nodes are automatically added to the universal
``dev`` partition in addition to their specified partition": AWS, sagemaker-hyperpod-ref, ``SlurmConfig``), login
nodes included (they run slurmd), and ``dev`` is the default partition (a HyperPod cluster's ``sinfo`` lists
``dev*``: docs/node-runtime.md), so a job submitted without ``-p`` can land on a login node.

The runtime may not change that in slurm.conf: HyperPod owns the file, and its drift detection fails
``UpdateCluster`` when a node's partitions differ from what the API expects (sagemaker-hyperpod-ref,
``SlurmConfigStrategy: Managed``); continuous provisioning rewrites its partition lines (sagemaker-hyperpod-scaling-
slurm). A drain lives in slurmctld's state instead, not in slurm.conf, and keeps every new job off the node.
HyperPod's agent acts only on the exact reasons ``Action:Reboot`` and ``Action:Replace`` (AWS: "Manually replace
or reboot a node using Slurm"), so a drain with our reason (:data:`~training_runtime.health.results.LOGIN_REASON`)
asks it for nothing, as the health checks' drains already rely on. Each login node acts on itself only (no race
between login nodes), and its bootstrap re-runs after a replacement (HyperPod re-runs the lifecycle script on the
new instance), so the drain comes back with it. AWS does not say whether its automatic patching or a controller
change resumes drained nodes: docs/node-runtime.md warns.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.health.remedy import NodeState, parse_node_state
from training_runtime.health.results import HYPERPOD_REASON_PREFIX, LOGIN_REASON, LOGIN_REASON_START
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.run import CommandError
from training_runtime.steps import Step

ABSENT = NodeState(state="ABSENT")
"""Slurm has no such node (``scontrol show node``: "not found"): no job can land on it, nothing to do."""
SLURM_WAIT = RetryPolicy(attempts=None, base_s=1.0, cap_s=5.0, deadline_s=300.0)
"""slurmd was just started: give slurmctld up to five minutes to know the node."""


def login_node_commands(scontrol: str, node_name: str, jobs_allowed: bool, current: NodeState) -> List[List[str]]:
    """The scontrol commands that bring a login node's Slurm state in line with ``jobs_allowed``. Pure.

    Never touches a node whose state HyperPod is acting on (failing, or an ``Action:`` reason), nor one drained
    for another reason (the drain keeps jobs off anyway, and it is not ours to lift)."""
    if current is ABSENT or current.failing or current.reason.startswith(HYPERPOD_REASON_PREFIX):
        return []
    node = "nodename=" + node_name
    ours = current.drained and current.reason.startswith(LOGIN_REASON_START)
    if jobs_allowed:
        return [[scontrol, "update", node, "state=resume"]] if ours else []
    if current.drained:
        return []
    return [[scontrol, "update", node, "state=drain", "reason=" + LOGIN_REASON]]


def slurm_names(node: Node) -> List[str]:
    """The names this login node may have in Slurm, in the order tried: its host name (``ip-a-b-c-d``, the health
    checks' rule too), then its instance name (``<group>-<n>``, HyperPod's other naming mode)."""
    return list(dict.fromkeys([node.hostname, node.instance.name]))


class LoginNodeJobs(Step):
    """HyperPod login nodes: drained for batch jobs unless ``runtime.slurm.login_node_jobs`` (then resumed)."""

    name = "slurm-login-node-jobs"

    def _state(self, node: Node) -> Tuple[str, Optional[NodeState]]:
        """(the node's Slurm name, its state): :data:`ABSENT` when Slurm knows none of its names, None when Slurm
        does not answer."""
        names = slurm_names(node)
        for name in names:
            try:
                result = node.run([node.slurm.command("scontrol"), "show", "node", name], check=False, timeout=30)
            except CommandError:
                return name, None
            if result.ok:
                return name, parse_node_state(result.stdout)
            if "not found" not in (result.stdout + result.stderr).lower():
                return name, None
        return names[0], ABSENT

    def _commands(self, node: Node, name: str, current: NodeState) -> List[List[str]]:
        allowed = node.options.slurm.login_node_jobs
        return login_node_commands(node.slurm.command("scontrol"), name, allowed, current)

    def needed(self, node: Node) -> bool:
        name, current = self._state(node)
        return current is None or bool(self._commands(node, name, current))

    def apply(self, node: Node) -> None:
        def known() -> Tuple[str, NodeState]:
            name, current = self._state(node)
            if current is None:
                raise NotReady("slurmctld does not answer for node {} yet".format(name))
            return name, current

        try:
            name, current = SLURM_WAIT.call(known, what="slurmctld to know this login node")
        except NotReady as error:
            raise StepFailed(
                "{}; so batch jobs could land on this login node through HyperPod's dev partition. Fix: check that "
                "slurmd runs here (`systemctl status slurmd`) and that `scontrol show node {}` answers, then re-run "
                "the bootstrap".format(error, slurm_names(node)[0])
            ) from None
        for argv in self._commands(node, name, current):
            node.run(argv, timeout=60)
            if "state=drain" in argv:
                log(
                    "login_node_drained",
                    node=name,
                    warning="AWS does not document whether HyperPod resumes a drained node that is not failing "
                    "(automatic patching, UpdateCluster); the login node's next bootstrap drains it again",
                )

    def describe(self, node: Node) -> List[str]:
        name, current = self._state(node)
        if current is None:
            return ["wait for slurmctld to know {}, then drain it for batch jobs".format(name)]
        return [" ".join(argv) for argv in self._commands(node, name, current)]
