"""slurm.conf from the cluster's nodes and partitions: a pure function, the same output on every node.

The settings' defaults are the runtime options' (``training_runtime.options.SlurmOptions``: Slurm's own
except where noted there); the local cluster sets fast failure detection through those options
(``hyperpod_local/layout.py``, docs/research/local-slurm.md §6.6).
The file is valid for Slurm 22.05 (Debian, the emulation) and 24.11/25.11 (HyperPod): the ``*/none``
plugin names that 23.11 removed are still accepted there and mean "no plugin".

Runs on the node's system Python (3.8 and newer), so: stdlib only, ``typing`` generics.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

from training_runtime.hardware import NodeHardware
from training_runtime.options import MIN_CRED_EXPIRE, SlurmOptions
from training_runtime.render import slurm_checks
from training_runtime.render.hostlist import compress

_OPTIONS = SlurmOptions()
"""The runtime options' defaults are the renderer's (one definition)."""

# The value rules (timeouts, cred_expire, return_to_service, names) are checked before deploy by the
# options and group rules; the renderer re-asserts them on its inputs with the same constants.


class RenderError(ValueError):
    """The inputs cannot make a valid file; ``problems`` lists every one of them."""

    def __init__(self, what: str, problems: List[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            "cannot render {} ({} problem{}):\n{}".format(
                what,
                len(self.problems),
                "" if len(self.problems) == 1 else "s",
                "\n".join("  - " + p for p in self.problems),
            )
        )


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
    state_save_location: str = "/var/spool/slurmctld"
    slurmd_spool_dir: str = "/var/spool/slurmd"
    log_dir: str = "/var/log/slurm"
    run_dir: str = "/run"
    """Where slurmctld.pid and slurmd.pid go."""
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
    configless: bool = False
    """``SlurmctldParameters=enable_configless``: nodes may fetch this file with ``slurmd --conf-server``."""
    extra_lines: Tuple[str, ...] = ()
    """Appended verbatim; may not set a key this file already sets (use the field instead)."""
    header: Optional[Tuple[str, ...]] = None
    """The comment lines at the top (without ``#``). None: the runtime's own note (it renders the file)."""

    @property
    def uses_cgroup(self) -> bool:
        """Whether a plugin here needs cgroup.conf's constraints (``render_cgroup_conf(constrain=...)``)."""
        return "cgroup" in self.proctrack or "cgroup" in self.task_plugin


def render_slurm_conf(settings: SlurmSettings, nodes: Sequence[SlurmNode], partitions: Sequence[Partition]) -> str:
    """The complete slurm.conf. Raises :class:`RenderError` listing every problem in the inputs."""
    problems = slurm_conf_problems(settings, nodes, partitions)
    if problems:
        raise RenderError("slurm.conf", problems)
    gpu_nodes = [n for n in nodes if n.hardware is not None and n.hardware.gpus > 0]
    lines, _ = _global_lines(settings, bool(gpu_nodes))
    lines.append("")
    lines.append("# --- nodes")
    unknown = sum(1 for n in nodes if n.hardware is None)
    if unknown:
        lines.append("# {} node(s) below have no hardware figures (instance type not in hyperpod-cdk's".format(unknown))
        lines.append("# table, no node_hardware option): Slurm gives them CPUs=1 RealMemory=1 until one is set.")
    lines.extend(_node_lines(nodes))
    lines.append("")
    lines.append("# --- partitions")
    default_index = next((i for i, p in enumerate(partitions) if p.default), 0)
    for index, partition in enumerate(partitions):
        members = " Nodes=" + compress(partition.nodes) if partition.nodes else ""
        lines.append(
            "PartitionName={}{} Default={} MaxTime=INFINITE State=UP".format(
                partition.name, members, "YES" if index == default_index else "NO"
            )
        )
    if settings.extra_lines:
        lines.append("")
        lines.append("# --- extra lines (SlurmSettings.extra_lines)")
        lines.extend(settings.extra_lines)
    return "\n".join(lines) + "\n"


def _node_lines(nodes: Sequence[SlurmNode]) -> List[str]:
    described: Dict[int, str] = {}  # id(hardware) -> the line's hardware part; nodes of a group share one object
    lines = []
    for node in nodes:
        hw = node.hardware
        if hw is None:
            lines.append("NodeName={} NodeAddr={}".format(node.name, node.address))
            continue
        figures = described.get(id(hw))
        if figures is None:
            gres = ""
            if hw.gpus:
                gres = " Gres=gpu:{}:{}".format(hw.gpu_type, hw.gpus) if hw.gpu_type else " Gres=gpu:{}".format(hw.gpus)
            figures = described[id(hw)] = (
                "CPUs={} Sockets={} CoresPerSocket={} ThreadsPerCore={} RealMemory={}{}".format(
                    hw.cpus, hw.sockets, hw.cores_per_socket, hw.threads_per_core, hw.slurm_memory_mib, gres
                )
            )
        lines.append("NodeName={} NodeAddr={} {} State=UNKNOWN".format(node.name, node.address, figures))
    return lines


def _global_lines(settings: SlurmSettings, any_gpu: bool) -> Tuple[List[str], Dict[str, str]]:
    """The settings part of the file, and which SlurmSettings field sets each key (lower-cased key)."""
    s = settings
    lines = (
        ["# " + line for line in s.header]
        if s.header is not None
        else [
            "# slurm.conf for cluster {}, generated by hyperpod-cdk (training_runtime.render.slurm_conf).".format(
                s.cluster_name.lower()
            ),
            "# Every node renders this same file and rewrites it whenever the cluster's nodes change, so edits",
            "# made here are lost: change hyperpod-cdk's runtime options instead.",
        ]
    )
    fields: Dict[str, str] = {}

    def put(key: str, value: object, field: str, *comment: str) -> None:
        lines.extend("# " + c for c in comment)
        lines.append("{}={}".format(key, value))
        fields[key.lower()] = field

    def section(title: str) -> None:
        lines.append("")
        lines.append("# --- " + title)

    section("identity and authentication")
    put("ClusterName", s.cluster_name.lower(), "cluster_name")
    put("SlurmctldHost", "{}({})".format(s.controller_name, s.controller_address), "controller_name")
    for index, (name, address) in enumerate(s.backup_controllers):
        note = ("Backup controllers, in takeover order; they share StateSaveLocation with the primary.",)
        put("SlurmctldHost", "{}({})".format(name, address), "backup_controllers", *(note if index == 0 else ()))
    put("SlurmUser", s.slurm_user, "slurm_user")
    put("AuthType", "auth/munge", "")
    put("CredType", "cred/munge", "")
    put(
        "AuthInfo",
        "cred_expire={}".format(s.cred_expire),
        "cred_expire",
        "A requeued job waits cred_expire + 1 s before it may start again. Keep it >= {}: slurmctld re-sends".format(
            MIN_CRED_EXPIRE
        ),
        "RPCs that failed against a dead node about 60 s later, and a stale signal kills the restarted job.",
    )
    if s.configless:
        put("SlurmctldParameters", "enable_configless", "configless", "Nodes may run slurmd --conf-server.")

    section("paths")
    put("StateSaveLocation", s.state_save_location, "state_save_location")
    put("SlurmdSpoolDir", s.slurmd_spool_dir, "slurmd_spool_dir")
    put("SlurmctldPidFile", s.run_dir + "/slurmctld.pid", "run_dir")
    put("SlurmdPidFile", s.run_dir + "/slurmd.pid", "run_dir")
    put("SlurmctldLogFile", s.log_dir + "/slurmctld.log", "log_dir")
    put("SlurmdLogFile", s.log_dir + "/slurmd.log", "log_dir")
    put("SlurmctldDebug", s.log_level, "log_level")
    put("SlurmdDebug", s.log_level, "log_level")

    section("plugins and scheduling")
    put(
        "MailProg", s.mail_prog, "mail_prog", "No mail server on the nodes; Slurm's default, /bin/mail, does not exist."
    )
    put("MpiDefault", s.mpi_default, "mpi_default")
    put("ProctrackType", s.proctrack, "proctrack")
    put("TaskPlugin", s.task_plugin, "task_plugin")
    put("SelectType", "select/cons_tres", "")
    put("SelectTypeParameters", s.select_type_parameters, "select_type_parameters")
    put("SchedulerType", "sched/backfill", "")
    scheduler = "sched_interval={},bf_interval={}".format(s.sched_interval, s.bf_interval)
    notes = [
        "How often (s) the main and backfill schedulers run; a requeued job whose begin time has passed",
        "waits up to sched_interval to start.",
    ]
    if s.nohold_on_prolog_fail:
        scheduler += ",nohold_on_prolog_fail"
        notes.append("nohold_on_prolog_fail: a batch job requeued because a prolog failed is not held.")
    put("SchedulerParameters", scheduler, "sched_interval", *notes)
    if any_gpu:
        put("GresTypes", "gpu", "", "GPUs are declared per node below and in gres.conf.")

    section("accounting")
    if s.accounting_include is not None:
        lines.append("# The accounting keys are in the included file (empty while accounting is off).")
        lines.append("include {}".format(s.accounting_include))
    elif s.accounting_host is None:
        put("AccountingStorageType", "accounting_storage/none", "accounting_host", "No slurmdbd: sacct is disabled.")
        put("JobAcctGatherType", "jobacct_gather/none", "accounting_host")
    else:
        put("AccountingStorageType", "accounting_storage/slurmdbd", "accounting_host")
        put("AccountingStorageHost", s.accounting_host, "accounting_host")
        if s.accounting_backup_host is not None:
            put("AccountingStorageBackupHost", s.accounting_backup_host, "accounting_backup_host")
        if any_gpu:
            put("AccountingStorageTRES", "gres/gpu", "", "Record GPU use per job (cpu, mem, node are always recorded).")
        put("JobAcctGatherType", "jobacct_gather/linux", "accounting_host")
        put("JobAcctGatherFrequency", 30, "", "Seconds between samples of each job step's CPU and memory use.")
    put("JobCompType", "jobcomp/none", "")

    section("failure detection and recovery")
    put(
        "SlurmdTimeout",
        s.slurmd_timeout,
        "slurmd_timeout",
        "A node that has not answered for this many seconds is set DOWN and its jobs are requeued.",
    )
    put("SlurmctldTimeout", s.slurmctld_timeout, "slurmctld_timeout")
    put("MessageTimeout", s.message_timeout, "message_timeout", "Seconds to wait for an RPC's reply.")
    put(
        "ReturnToService",
        s.return_to_service,
        "return_to_service",
        "2: any DOWN node becomes available when it registers again with a valid configuration.",
        "1: only nodes set DOWN for not responding do; unexpected reboots are detected and the node stays",
        "DOWN until resumed (scontrol update nodename=... state=resume). 0: DOWN nodes stay DOWN.",
    )
    put(
        "JobRequeue",
        1 if s.job_requeue else 0,
        "job_requeue",
        "1: batch jobs on a failed node are requeued (sbatch --no-requeue opts out).",
    )
    put("KillWait", s.kill_wait, "kill_wait", "Seconds between SIGTERM and SIGKILL when a job ends or is cancelled.")
    put("InactiveLimit", 0, "")
    put("MinJobAge", 300, "")
    if s.health_check_program is not None:
        put("HealthCheckProgram", s.health_check_program, "health_check_program")
        put("HealthCheckInterval", s.health_check_interval, "health_check_interval")
        put("HealthCheckNodeState", s.health_check_node_state, "health_check_node_state")
    if s.prolog is not None:
        put("Prolog", s.prolog, "prolog")
    if s.epilog is not None:
        put("Epilog", s.epilog, "epilog")
    if s.prolog_flags is not None:
        put("PrologFlags", s.prolog_flags, "prolog_flags")
    return lines, fields


def slurm_conf_problems(
    settings: SlurmSettings, nodes: Sequence[SlurmNode], partitions: Sequence[Partition]
) -> List[str]:
    """Every problem :func:`render_slurm_conf` would refuse, in one list (see :mod:`.slurm_checks`)."""
    return slurm_checks.problems(settings, nodes, partitions, managed_keys())


@lru_cache(maxsize=1)
def managed_keys() -> Dict[str, str]:
    """Every key this renderer can write (lower-cased), with the SlurmSettings field that sets it ('' if fixed)."""
    everything = SlurmSettings(
        cluster_name="c",
        controller_name="c",
        controller_address="c",
        accounting_host="c",
        accounting_backup_host="c",
        backup_controllers=(("c", "c"),),
        health_check_program="/c",
        prolog="/c",
        epilog="/c",
        prolog_flags="Alloc",
        configless=True,
    )
    return _global_lines(everything, any_gpu=True)[1]
