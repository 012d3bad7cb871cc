"""``status --slurm``: each node's Slurm state, read on the controller through SSM Session Manager.

AWS's HyperPod API has no Slurm state: DescribeCluster and ListClusterNodes report instances
(``InstanceStatus``), never what slurmctld thinks of them. So this module runs one read-only command,
``scontrol -o show nodes``, on the controller, parses it with the runtime's one parser
(:func:`training_runtime.scaler.slurm_view.parse_nodes`, the scaler's) and joins each Slurm node to its instance.

How the command gets there: HyperPod nodes are reached with ``aws ssm start-session`` on the target
``sagemaker-cluster:<cluster-id>_<instance-group>-<instance-id>`` (SageMaker HyperPod developer guide, "Access your
SageMaker HyperPod cluster nodes",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-run-jobs-slurm-access-nodes.html; the AWS CLI's
start-session, https://docs.aws.amazon.com/cli/latest/reference/ssm/start-session.html). A command without a
terminal goes through the SSM document ``AWS-StartNonInteractiveCommand`` with ``{"command": [...]}``: AWS's own
HyperPod SSM skill (awslabs/agent-plugins, ``plugins/sagemaker-ai/skills/hyperpod-ssm/SKILL.md``) does this and
states that ``aws ssm send-command`` does not accept ``sagemaker-cluster:`` targets. The HyperPod developer guide
itself shows only interactive sessions; the document is Session Manager's, not HyperPod's [inferred from those two
sources]. The session needs the AWS CLI v2, the Session Manager plugin and ``ssm:StartSession`` on the cluster.

The join is the runtime's one naming rule (:mod:`training_runtime.node_names`): a node whose Slurm name is
``ip-a-b-c-d`` is the instance whose ``PrivateDnsHostname`` has that address; where the cluster names Slurm nodes
by instance name (``UseInstanceNames``), the Slurm node's ``NodeAddr`` is the instance's address.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperpod_cdk.aws.errors import OpsError
from hyperpod_cdk.ops.access import start_session_argv
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.lookup import Cluster, Node, pick_node
from training_runtime.node_names import IP_NAMES, address_of, slurm_name
from training_runtime.scaler.slurm_view import BUSY_STATES, NodeRecord, parse_nodes

NON_INTERACTIVE_DOCUMENT = "AWS-StartNonInteractiveCommand"
SLURM_COMMAND = "scontrol -o show nodes; scontrol --version"
"""Read-only; one ``Key=Value`` line per node, printed alike by Slurm 22.05 through 25.11 (slurm_view), each with
the node's slurmd ``Version=``; then the controller's own release (``slurm 24.11.0``), for the security gate."""
VERSION_LINE = re.compile(r"^slurm\s+(\d+\.\d+\S*)\s*$", re.MULTILINE)
TIMEOUT_S = 60.0
NOT_LISTED = "not in Slurm"
"""What a node Slurm does not list shows (the controller and login nodes are not Slurm nodes; a node still
booting has not joined yet)."""


@dataclass
class SlurmView:
    """Each listed instance's Slurm node (by instance id), or why there is none at all (``note``)."""

    records: dict[str, NodeRecord] = field(default_factory=dict)
    note: str | None = None
    controller_version: str | None = None
    """``scontrol --version`` on the controller."""
    every: tuple[NodeRecord, ...] = ()
    """Every Slurm node listed, joined to an instance or not."""

    def versions(self) -> dict[str, list[str]]:
        """Each Slurm release running -> where: ``controller`` and the Slurm nodes whose slurmd reports it."""
        found: dict[str, list[str]] = {}
        if self.controller_version:
            found.setdefault(self.controller_version, []).append("controller")
        for record in self.every:
            if record.version:
                found.setdefault(record.version, []).append(record.name)
        return found

    def cell(self, node: Node) -> str:
        record = self.records.get(node.instance_id)
        if record is None:
            return NOT_LISTED
        text = f"{record.name} {label(record)}"
        return f"{text} ({record.reason})" if record.reason else text

    def as_json(self, node: Node) -> dict[str, Any]:
        record = self.records.get(node.instance_id)
        if record is None:
            return {"listed": False}
        return {"listed": True, "name": record.name, "state": label(record), "reason": record.reason}


def label(record: NodeRecord) -> str:
    """sinfo's long state name: ``drained`` (drain, nothing running), ``draining`` (drain, still busy), else the
    base state; ``*`` when slurmctld does not hear from the node (sinfo's mark)."""
    if record.drain:
        text = "draining" if record.state in BUSY_STATES or record.cpu_alloc > 0 else "drained"
    else:
        text = record.state
    return text if record.responding else text + "*"


def join(records: Sequence[NodeRecord], nodes: Sequence[Node]) -> dict[str, NodeRecord]:
    """Instance id -> its Slurm node, by the one naming rule over the instance's address."""
    by_name = {r.name: r for r in records}
    by_address = {r.address: r for r in records if r.address}
    joined: dict[str, NodeRecord] = {}
    for node in nodes:
        address = address_of(node.hostname)
        if not node.instance_id or address is None:
            continue
        record = by_name.get(slurm_name(IP_NAMES, "", address)) or by_address.get(address)
        if record is not None:
            joined[node.instance_id] = record
    return joined


def session_argv(target: str, args: argparse.Namespace) -> list[str]:
    parameters = json.dumps({"command": [SLURM_COMMAND]}, separators=(",", ":"))
    return start_session_argv(target, args, "--document-name", NON_INTERACTIVE_DOCUMENT, "--parameters", parameters)


def read(args: argparse.Namespace, ctx: OpsContext, cluster: Cluster, everyone: Sequence[Node]) -> SlurmView:
    """The Slurm view of ``everyone`` (every node of the cluster: the controller is among them). Never raises for
    a cluster it cannot read: the view's ``note`` says why."""
    try:
        controller = pick_node(cluster, everyone, None, None)
    except OpsError as error:
        return SlurmView(note=f"no controller to ask: {error}")
    target = cluster.ssm_target(controller)
    answer = ctx.capture(session_argv(target, args), TIMEOUT_S)
    records = parse_nodes(answer.stdout)
    if not records:
        said = (answer.stderr.strip() or answer.stdout.strip() or "no output").splitlines()[-1]
        how = f"exited {answer.code}" if answer.code else "printed no Slurm node"
        return SlurmView(note=f"`aws ssm start-session` to {target} {how}: {said}")
    # The plugin can exit non-zero after the command ran (AWS's skill notes it): parsed lines are the answer.
    own = VERSION_LINE.search(answer.stdout.replace("\r\n", "\n"))
    return SlurmView(
        records=join(records, everyone), controller_version=own.group(1) if own else None, every=tuple(records)
    )
