"""Slurm: configuration files, accounting and daemons.

Generic platform: every node renders the same slurm.conf from the resource config (pure generators,
so all nodes agree without copying files around); the controller runs slurmctld (after slurmdbd when
accounting is on), compute nodes run slurmd, login nodes only need munge and the clients.

HyperPod platform (``/opt/sagemaker_cluster``): HyperPod writes /opt/slurm/etc/slurm.conf on the controller
and owns its node and partition lines; the runtime waits for the file, never rewrites it, and makes sure the
role's daemon runs. Compute and login nodes run slurmd configless (``--conf-server``) and read the
controller's file and its includes (docs/node-runtime.md, "Configless compute and login nodes").
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, file_matches, read_text, write_file
from training_runtime.files import with_block as files_with_block
from training_runtime.hardware import NodeHardware, hardware_for
from training_runtime.hyperpod_facts import SLURMCTLD_PID_FILE, SLURMD_PID_FILE, SLURMDBD_PID_FILE
from training_runtime.node import Node
from training_runtime.paths import HEALTH_CHECK, SLURM_LOG_DIR, SLURMCTLD_STATE_DIR, SLURMD_SPOOL_DIR
from training_runtime.render.accounting_keys import accounting_keys, team_keys
from training_runtime.render.cgroup_conf import render_cgroup_conf
from training_runtime.render.gres_conf import render_gres_conf
from training_runtime.render.jwt_keys import JWT_KEY_PATH, jwt_lines
from training_runtime.render.slurm_conf import render_slurm_conf
from training_runtime.render.slurm_types import Partition, SlurmNode, SlurmSettings
from training_runtime.resources import instance_type_of
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.scaler.job_submit import BLOCK_START, with_block
from training_runtime.services import Daemon
from training_runtime.steps import Step
from training_runtime.steps.billing import billing_weights
from training_runtime.steps.health import EPILOG_PROGRAM, PROLOG_PROGRAM, gpu_job_mapping

SLURM_USER = "slurm"


def slurm_cluster_name(node: Node) -> str:
    """Slurm lower-cases ClusterName; use that form everywhere (sacctmgr compares it)."""
    return node.params.cluster_name.lower()


def conf_path(node: Node, name: str) -> str:
    return "{}/{}".format(node.slurm.conf_dir, name)


def slurm_nodes(node: Node) -> List[SlurmNode]:
    """Every compute node with the figures of its own instance type (a flexible group's nodes differ)."""
    nodes = []
    unknown: List[str] = []
    figures: Dict[Tuple[str, int], Optional[NodeHardware]] = {}  # one object per type: shared node lines
    for group in node.params.groups:
        if group.role != "compute":
            continue
        for instance in node.resources.instances(group.name):
            instance_type = node.instance_type if instance == node.instance else instance_type_of(node.params, instance)
            if instance_type is None:
                unknown.append(instance.name)
                continue
            key = (instance_type, group.threads_per_core)
            if key not in figures:
                hardware = hardware_for(instance_type, node.options.node_hardware, group.threads_per_core)
                if hardware is not None and node.params.emulated_hardware:
                    # Declared GPUs have no device files, and Slurm drains a node whose GPUs it cannot find
                    # ("gres/gpu count reported lower than configured"): on emulated hardware it sees none.
                    hardware = dataclasses.replace(hardware, gpus=0, gpu_type=None)
                figures[key] = hardware
            nodes.append(SlurmNode(name=instance.name, address=instance.address, hardware=figures[key]))
    if unknown:
        raise StepFailed(
            "the resource config names no InstanceType for {} of a flexible group, so slurm.conf cannot size "
            "them. Fix: on the generic platform the resource config must give Instances[].InstanceType for every "
            "instance of a flexible group".format(", ".join(unknown))
        )
    return nodes


def partitions(node: Node) -> List[Partition]:
    result: List[Partition] = []
    weights = billing_weights(node)[0] if node.params.prices else {}
    for worker in node.params.worker_groups:
        names = tuple(i.name for i in node.resources.instances(worker.instance_group_name))
        if names:
            part = worker.partition_name
            result.append(Partition(name=part, nodes=names, default=not result, billing_weights=weights.get(part)))
    return result


LOCAL_STATE_DIR = SLURMCTLD_STATE_DIR
"""slurmctld's state with one controller: on the controller's own disk."""


def state_save_location(node: Node) -> str:
    """Where slurmctld keeps its state: the controller's disk, or with backup controllers a directory on the
    shared file system that every controller mounts (a backup takes over from the state the primary saved)."""
    return node.shared_dir + "/slurmctld" if node.multi_head else LOCAL_STATE_DIR


HEALTH_CHECK_NODE_STATE = "ANY,CYCLE"
"""Check nodes in every state (a busy node can lose a GPU too), spread over the interval rather than all
at once (the shared file system sees one probe write at a time, not one per node at the same moment)."""


def settings(node: Node) -> SlurmSettings:
    slurm = node.options.slurm
    primary, backups = node.controllers[0], node.controllers[1:]
    health = node.options.health.enabled
    mapping = gpu_job_mapping(node)
    accounting = node.options.accounting.enabled
    return SlurmSettings(
        cluster_name=slurm_cluster_name(node),
        controller_name=primary.name,
        controller_address=primary.address,
        backup_controllers=tuple((b.name, b.address) for b in backups),
        # Every controller runs a slurmdbd on the one (external) database; slurmctld falls back to the backup's.
        accounting_host=primary.address if accounting else None,
        accounting_backup_host=backups[0].address if accounting and backups else None,
        teams=node.params.teams if accounting else None,
        state_save_location=state_save_location(node),
        slurmctld_timeout=slurm.slurmctld_timeout,
        return_to_service=slurm.return_to_service,
        slurmd_timeout=slurm.slurmd_timeout,
        message_timeout=slurm.message_timeout,
        cred_expire=slurm.cred_expire,
        job_requeue=slurm.requeue,
        sched_interval=slurm.sched_interval,
        health_check_interval=slurm.health_check_interval,
        health_check_program=HEALTH_CHECK if health else None,
        health_check_node_state=HEALTH_CHECK_NODE_STATE,
        prolog=PROLOG_PROGRAM if health or mapping else None,
        epilog=EPILOG_PROGRAM if mapping else None,
        prolog_flags="Alloc" if health or mapping else None,
        nohold_on_prolog_fail=health,
        jwt_key=JWT_KEY_PATH if node.params.rest_api is not None else None,
    )


def rendered_files(node: Node) -> List[Tuple[str, str, int, str]]:
    """(path, content, mode, owner) of every Slurm file this node should have (generic platform)."""
    nodes = slurm_nodes(node)
    parts = partitions(node)
    if not parts:
        raise StepFailed(
            "no compute group has instances in the resource config, so Slurm would have no partition. "
            "Fix: give at least one compute group an instance count above zero"
        )
    files = [
        (conf_path(node, "slurm.conf"), render_slurm_conf(settings(node), nodes, parts), 0o644, "root"),
        (conf_path(node, "cgroup.conf"), render_cgroup_conf(constrain=False), 0o644, "root"),
        (conf_path(node, "gres.conf"), render_gres_conf(nodes), 0o644, "root"),
    ]
    return files


ACCOUNTING_INCLUDE = "accounting.conf"


def accounting_lines(node: Node) -> str:
    """HyperPod's slurm.conf includes accounting.conf; the runtime owns that file when accounting is on.

    The keys are the generic slurm.conf's (:func:`~training_runtime.render.accounting_keys.accounting_keys`),
    with GPU use always recorded as AWS's own accounting.conf does: the node lines (and their GPUs) are
    HyperPod's. Compute and login nodes read this file too: HyperPod runs their slurmd configless, and
    slurmctld sends them slurm.conf with the files it includes (see :func:`slurmd`).
    """
    lines = ["# Managed by hyperpod-cdk (runtime option accounting); edits are overwritten."]
    for key in accounting_keys(node.hostname, gpu_tres=True) + team_keys(node.params.teams):
        lines += ["# " + c for c in key.comment] + ["{}={}".format(key.key, key.value)]
    return "\n".join(lines) + "\n"


REST_BLOCK = "rest-api"
"""The managed block (:func:`training_runtime.files.with_block`) of ``auth/jwt`` keys in ``accounting.conf``."""
_INCLUDES_ACCOUNTING = re.compile(
    r"^[ \t]*include[ \t]+(\S*/)?" + re.escape(ACCOUNTING_INCLUDE) + r"[ \t]*$", re.MULTILINE | re.IGNORECASE
)


def includes_accounting(slurm_conf: str) -> bool:
    """Whether HyperPod's slurm.conf text includes ``accounting.conf``."""
    return bool(_INCLUDES_ACCOUNTING.search(slurm_conf))


def with_rest_block(node: Node, text: str) -> str:
    """``text`` (accounting.conf) with the REST API's ``auth/jwt`` keys in their block when ``rest_api`` is on
    (:mod:`training_runtime.render.jwt_keys`), else as it is."""
    if node.params.rest_api is None:
        return text
    return files_with_block(text, REST_BLOCK, jwt_lines(JWT_KEY_PATH).rstrip("\n"))


class HyperPodAccounting(Step):
    name = "slurm-accounting-include"

    def _content(self, node: Node) -> str:
        """The accounting keys, the REST API's block (steps/rest_api.py) and the scaler's block where the scaler step
        added it (steps/scaler.py)."""
        current = read_text(node, conf_path(node, ACCOUNTING_INCLUDE)) or ""
        lines = with_rest_block(node, accounting_lines(node))
        return with_block(lines) if BLOCK_START in current else lines

    def needed(self, node: Node) -> bool:
        return read_text(node, conf_path(node, ACCOUNTING_INCLUDE)) != self._content(node)

    def apply(self, node: Node) -> None:
        write_file(node, conf_path(node, ACCOUNTING_INCLUDE), self._content(node))

    def describe(self, node: Node) -> List[str]:
        return ["write " + conf_path(node, ACCOUNTING_INCLUDE)]


class SlurmConfig(Step):
    name = "slurm-config"

    def needed(self, node: Node) -> bool:
        return any(not file_matches(node, p, c, mode, owner) for p, c, mode, owner in rendered_files(node))

    def apply(self, node: Node) -> None:
        for path, content, mode, owner in rendered_files(node):
            write_file(node, path, content, mode=mode, owner=owner)
        for directory in (SLURM_LOG_DIR, state_save_location(node) if node.is_controller else None):
            if directory:
                ensure_dir(node, directory, mode=0o755, owner=SLURM_USER, group=SLURM_USER)
        if node.is_compute:
            ensure_dir(node, SLURMD_SPOOL_DIR, mode=0o755)

    def describe(self, node: Node) -> List[str]:
        return [
            "write {} ({} nodes, {} partitions)".format(p, len(slurm_nodes(node)), len(partitions(node)))
            if p.endswith("slurm.conf")
            else "write " + p
            for p, c, mode, owner in rendered_files(node)
            if not file_matches(node, p, c, mode, owner)
        ]


HYPERPOD_CONF_WAIT = RetryPolicy(attempts=None, base_s=2.0, cap_s=10.0, deadline_s=600.0)
"""Up to ten minutes, checking at most every 10 s: the deadline binds, so the failure message's figure is true."""


class HyperPodSlurmConfig(Step):
    """Waits for the slurm.conf HyperPod writes; never edits it."""

    name = "slurm-config"

    def _ready(self, node: Node) -> bool:
        text = read_text(node, conf_path(node, "slurm.conf")) or ""
        return "SlurmctldHost" in text or "ControlMachine" in text

    def needed(self, node: Node) -> bool:
        return not self._ready(node) and node.is_controller

    def apply(self, node: Node) -> None:
        def ready() -> None:
            if not self._ready(node):
                raise NotReady("HyperPod has not written {} yet".format(conf_path(node, "slurm.conf")))

        try:
            HYPERPOD_CONF_WAIT.call(ready, what="HyperPod's slurm.conf")
        except NotReady:
            raise StepFailed(
                "HyperPod did not write {} within {} s; the cluster's Slurm configuration may be invalid "
                "(check the cluster events in the SageMaker console)".format(
                    conf_path(node, "slurm.conf"), int(HYPERPOD_CONF_WAIT.deadline_s)
                )
            ) from None

    def describe(self, node: Node) -> List[str]:
        return ["wait for HyperPod to write " + conf_path(node, "slurm.conf")]


# --- daemons ----------------------------------------------------------------------------------------


def slurmctld(node: Node) -> Daemon:
    return Daemon("slurmctld", "slurmctld", (node.slurm.command("slurmctld", daemon=True),), SLURMCTLD_PID_FILE)


def conf_servers(node: Node) -> str:
    """``slurmd --conf-server``'s value on HyperPod: every controller's address, the primary first."""
    return ",".join(c.address for c in node.controllers)


def slurmd(node: Node) -> Daemon:
    """slurmd as each platform runs it. Generic: from the slurm.conf every node renders, under the instance's
    name. HyperPod: configless, from the controller (``--conf-server``), as HyperPod's cluster agent and AWS's
    lifecycle scripts (``start_slurm.sh``) start it on compute and login nodes; the controller's slurm.conf has
    ``SlurmctldParameters=enable_configless`` (docs/node-runtime.md, "Configless compute and login nodes")."""
    argv = [node.slurm.command("slurmd", daemon=True)]
    if node.platform == "generic":
        argv += ["-N", node.instance.name]
    else:
        argv += ["--conf-server", conf_servers(node)]
    return Daemon("slurmd", "slurmd", tuple(argv), SLURMD_PID_FILE, needs_controller=node.platform != "generic")


def slurmdbd(node: Node) -> Daemon:
    return Daemon("slurmdbd", "slurmdbd", (node.slurm.command("slurmdbd", daemon=True),), SLURMDBD_PID_FILE)


def slurm_config_files(node: Node) -> List[str]:
    return [conf_path(node, n) for n in ("slurm.conf", "cgroup.conf", "gres.conf")]


class SlurmdOptions(Step):
    """With systemd on the generic platform, slurmd gets its node name through /etc/default/slurmd."""

    name = "slurmd-options"

    def _content(self, node: Node) -> str:
        return 'SLURMD_OPTIONS="-N {}"\n'.format(node.instance.name)

    def needed(self, node: Node) -> bool:
        return read_text(node, "/etc/default/slurmd") != self._content(node)

    def apply(self, node: Node) -> None:
        write_file(node, "/etc/default/slurmd", self._content(node))
