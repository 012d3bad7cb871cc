"""The inputs of slurm.conf: its nodes, partitions and settings (no rendering here).

The renderer (:mod:`.slurm_conf`) and its input checks (:mod:`.slurm_checks`) both import these, so neither
needs the other's types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from training_runtime.hardware import NodeHardware
from training_runtime.options import SlurmOptions
from training_runtime.paths import SLURM_LOG_DIR, SLURMCTLD_STATE_DIR, SLURMD_SPOOL_DIR
from training_runtime.team_model import Teams

_OPTIONS = SlurmOptions()
"""The runtime options' defaults are the renderer's (one definition)."""


@dataclass(frozen=True)
class SlurmNode:
    """A compute node: its Slurm name (the host name slurmd runs as), its address and its hardware."""

    name: str
    address: str
    hardware: Optional[NodeHardware]
    """None: only NodeName/NodeAddr are written and Slurm's defaults apply (1 CPU, RealMemory=1)."""


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: Tuple[str, ...]
    default: bool = False
    """At most one partition may be marked; when none is, the first one is the default."""
    all_nodes: bool = False
    """``Nodes=ALL``: every node of the file (``nodes`` stays empty), as HyperPod's universal ``dev`` partition."""
    billing_weights: Optional[str] = None
    """``TRESBillingWeights`` (e.g. ``CPU=8.5``: prices as Slurm billing, :mod:`training_runtime.billing_weights`);
    None: Slurm's default billing."""


@dataclass(frozen=True)
class Switch:
    """One switch of ``topology.conf`` (Slurm's topology/tree): its leaf nodes or its child switches."""

    name: str
    nodes: Tuple[str, ...] = ()
    switches: Tuple[str, ...] = ()


@dataclass(frozen=True)
class SlurmSettings:
    """Everything in slurm.conf apart from nodes and partitions. Defaults are Slurm's unless noted."""

    cluster_name: str
    """Written lower-cased, as Slurm and sacctmgr use it."""
    controller_name: str
    controller_address: str
    """The primary controller: the first ``SlurmctldHost`` line."""
    backup_controllers: Tuple[Tuple[str, str], ...] = ()
    """(name, address) of each backup controller, in takeover order: one more ``SlurmctldHost`` line each.
    With backups, ``state_save_location`` must be on storage every controller mounts."""
    accounting_host: Optional[str] = None
    """slurmdbd's host. None: no accounting (no slurmdbd, ``sacct`` says accounting is disabled)."""
    accounting_backup_host: Optional[str] = None
    """A second slurmdbd that slurmctld uses when ``accounting_host``'s does not answer
    (``AccountingStorageBackupHost``); both must use the same database."""
    accounting_include: Optional[str] = None
    """HyperPod's layout: the accounting keys live in this file, which slurm.conf ``include``s (the runtime's
    HyperPod path writes it when accounting is on: ``steps/slurm.py``), instead of in slurm.conf. A bare file
    name is relative to slurm.conf's directory (configless nodes are sent only includes given by name,
    slurm.conf(5)); else an absolute path. Not with ``accounting_host``. The emulated HyperPod platform
    (``hyperpod_local.hyperpod_platform``) renders this way."""
    teams: Optional[Teams] = None
    """The teams' enforcement and priority keys go with the accounting keys (:func:`.accounting_keys.team_keys`)."""
    state_save_location: str = SLURMCTLD_STATE_DIR
    slurmd_spool_dir: str = SLURMD_SPOOL_DIR
    log_dir: str = SLURM_LOG_DIR
    slurm_user: str = "slurm"
    proctrack: str = "proctrack/linuxproc"
    """linuxproc works everywhere, including hosts without a usable cgroup tree (the emulation)."""
    task_plugin: str = "task/none"
    """HyperPod's own slurm.conf uses task/none ("required for auto-resume")."""
    select_type_parameters: str = "CR_Core"
    mpi_default: str = "none"
    mail_prog: str = "/bin/true"
    """Not Slurm's default (/bin/mail, absent on the nodes: slurmctld logs "MailProg is invalid")."""
    log_level: str = "info"
    return_to_service: int = _OPTIONS.return_to_service
    """2: a DOWN node that registers again becomes available. 1 also detects unexpected reboots, but
    rebooted nodes then stay DOWN until something resumes them (docs/research/local-slurm.md §6.4)."""
    slurmd_timeout: int = _OPTIONS.slurmd_timeout
    slurmctld_timeout: int = _OPTIONS.slurmctld_timeout
    """Seconds the primary controller may be silent before a backup takes over."""
    message_timeout: int = _OPTIONS.message_timeout
    cred_expire: int = _OPTIONS.cred_expire
    """Also the delay before a requeued job may start again; at least 70 (docs/research/local-slurm.md §6.3)."""
    job_requeue: bool = True
    kill_wait: int = 30
    sched_interval: int = _OPTIONS.sched_interval
    bf_interval: int = 30
    health_check_program: Optional[str] = None
    health_check_interval: int = _OPTIONS.health_check_interval
    health_check_node_state: str = "ANY"
    prolog: Optional[str] = None
    epilog: Optional[str] = None
    prolog_flags: Optional[str] = None
    nohold_on_prolog_fail: bool = False
    """``SchedulerParameters=...,nohold_on_prolog_fail``: a batch job requeued because the prolog failed on
    a node runs elsewhere at once instead of being held (Slurm's default holds it)."""
    jwt_key: Optional[str] = None
    """Slurm's REST API: ``AuthAltTypes=auth/jwt`` with this HS256 key file (:mod:`.jwt_keys`). None: munge only."""
    configless: bool = False
    """``SlurmctldParameters=enable_configless``: nodes may fetch this file with ``slurmd --conf-server``."""
    extra_lines: Tuple[str, ...] = ()
    """Appended verbatim; may not set a key this file already sets (use the field instead)."""
    topology: Optional[Tuple[Switch, ...]] = None
    """The switch tree. Given: slurm.conf sets ``TopologyPlugin=topology/tree`` and the caller must write
    ``topology.conf`` from the same switches (:func:`~training_runtime.render.topology_conf.render_topology_conf`).
    None: no TopologyPlugin: a slurm.conf naming the plugin without the file breaks ``sbatch`` ("Requested
    topology configuration is not available"), so only this field can set it, never ``extra_lines``."""
    header: Optional[Tuple[str, ...]] = None
    """The comment lines at the top (without ``#``). None: the runtime's own note (it renders the file)."""

    @property
    def uses_cgroup(self) -> bool:
        """Whether a plugin here needs cgroup.conf's constraints (``render_cgroup_conf(constrain=...)``)."""
        return "cgroup" in self.proctrack or "cgroup" in self.task_plugin
