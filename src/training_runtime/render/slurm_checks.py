"""The renderer's checks on its inputs: every problem at once, before a line is written.

The values a config decides (timeouts, cred_expire, return_to_service, names) are checked before deploy by
the option and group rules; these checks re-assert them with the same constants, and check what only the
node assembles (node names and addresses, partitions, extra lines).
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Mapping, Sequence, Set, Tuple

from training_runtime.groups import MAX_PARTITION_LENGTH
from training_runtime.options import MAX_SLURM_SECONDS, MIN_CRED_EXPIRE, RETURN_TO_SERVICE
from training_runtime.render.jwt_keys import KEY_PATH
from training_runtime.render.slurm_types import Partition, SlurmNode, SlurmSettings
from training_runtime.render.topology_conf import topology_problems
from training_runtime.users import USER_NAME

NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
ADDRESS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}$")
PARTITION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,%d}$" % (MAX_PARTITION_LENGTH - 1))
CLUSTER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
PLUGIN_WORD = re.compile(r"^[A-Za-z0-9_]+$")

PROCTRACK_PLUGINS = ("proctrack/linuxproc", "proctrack/cgroup", "proctrack/pgid")
TASK_PLUGINS = ("task/none", "task/affinity", "task/cgroup")
LOG_LEVELS = ("quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5")
HEALTH_CHECK_NODE_STATES = ("ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE")
"""NONDRAINED_IDLE needs Slurm 23.02 or newer."""
PROLOG_FLAGS = ("Alloc", "Contain", "DeferBatch", "ForceRequeueOnFail", "NoHold", "RunInJob", "Serial", "X11")
"""ForceRequeueOnFail and RunInJob need Slurm 23.x or newer."""
REPEATABLE_KEYS = ("nodename", "partitionname", "nodeset", "downnodes", "slurmctldhost", "include")
"""Keys an extra line may repeat (they describe one entity per line, or add a backup controller)."""


def problems(
    settings: SlurmSettings, nodes: Sequence[SlurmNode], partitions: Sequence[Partition], managed: Mapping[str, str]
) -> List[str]:
    """Every problem :func:`render_slurm_conf` would refuse, in one list."""
    problems = _settings_problems(settings)
    names: Dict[str, int] = {}
    checked: Set[int] = set()
    for index, node in enumerate(nodes):
        where = "nodes[{}]".format(index)
        if not isinstance(node.name, str) or not NODE_NAME.fullmatch(node.name) or node.name.lower() == "default":
            problems.append(
                "{}.name: got {!r}; use 1-63 letters, digits, '.', '_' and '-', starting with a letter or digit "
                "('DEFAULT' is reserved)".format(where, node.name)
            )
        elif node.name in names:
            problems.append(
                "{}.name: {!r} is already used by nodes[{}]; node names must be unique".format(
                    where, node.name, names[node.name]
                )
            )
        else:
            names[node.name] = index
        if not isinstance(node.address, str) or not ADDRESS.fullmatch(node.address):
            problems.append("{}.address: got {!r}; expected an IP address or host name".format(where, node.address))
        if node.hardware is not None and id(node.hardware) not in checked:  # each distinct object once
            checked.add(id(node.hardware))
            problems.extend(node.hardware.problems("{}.hardware ({})".format(where, node.name)))
    problems.extend(_partition_problems(partitions, names))
    if isinstance(settings.topology, tuple):
        problems.extend(topology_problems(settings.topology, set(names)))
    elif settings.topology is not None:
        problems.append("settings.topology: got {!r}; expected a tuple of switches or None".format(settings.topology))
    problems.extend(_extra_line_problems(settings.extra_lines, managed))
    return problems


def _settings_problems(s: SlurmSettings) -> List[str]:
    problems: List[str] = []

    def bad(field: str, value: object, allowed: str) -> None:
        problems.append("settings.{}: got {!r}; {}".format(field, value, allowed))

    if not isinstance(s.cluster_name, str) or not CLUSTER_NAME.fullmatch(s.cluster_name.lower()):
        bad("cluster_name", s.cluster_name, "use 1-64 letters, digits, '_' and '-', starting with a letter or digit")
    if not isinstance(s.controller_name, str) or not NODE_NAME.fullmatch(s.controller_name):
        bad("controller_name", s.controller_name, "expected a host name (letters, digits, '.', '_', '-')")
    for index, backup in enumerate(s.backup_controllers):
        name, address = backup if isinstance(backup, tuple) and len(backup) == 2 else (None, None)
        if not isinstance(name, str) or not NODE_NAME.fullmatch(name) or name == s.controller_name:
            bad("backup_controllers[{}]".format(index), backup, "expected (host name, address) of another host")
        elif not isinstance(address, str) or not ADDRESS.fullmatch(address):
            bad("backup_controllers[{}]".format(index), backup, "expected an IP address or host name as address")
    for field in ("controller_address", "accounting_host", "accounting_backup_host"):
        value = getattr(s, field)
        if (value is not None or field == "controller_address") and (
            not isinstance(value, str) or not ADDRESS.fullmatch(value)
        ):
            bad(field, value, "expected an IP address or host name")
    for field in ("state_save_location", "slurmd_spool_dir", "log_dir", "mail_prog"):
        _check_path(s, field, False, bad)
    for field in ("health_check_program", "prolog", "epilog"):
        _check_path(s, field, True, bad)
    if s.jwt_key is not None and (not isinstance(s.jwt_key, str) or not KEY_PATH.match(s.jwt_key)):
        bad("jwt_key", s.jwt_key, "expected an absolute path of letters, digits, '.', '_', '-' and '/'")
    include = s.accounting_include
    if include is not None and not (isinstance(include, str) and re.fullmatch(r"^[A-Za-z0-9._-]+$", include)):
        _check_path(s, "accounting_include", True, bad)  # not a bare file name: an absolute path, then
    if include is not None and s.accounting_host is not None:
        bad("accounting_include", s.accounting_include, "give it or accounting_host, not both")
    if not isinstance(s.slurm_user, str) or not USER_NAME.fullmatch(s.slurm_user):
        bad("slurm_user", s.slurm_user, "expected a Linux user name")
    if s.proctrack not in PROCTRACK_PLUGINS:
        bad("proctrack", s.proctrack, "allowed: " + ", ".join(PROCTRACK_PLUGINS))
    tasks = s.task_plugin.split(",") if isinstance(s.task_plugin, str) else [None]
    if any(t not in TASK_PLUGINS for t in tasks) or ("task/none" in tasks and len(tasks) > 1):
        bad("task_plugin", s.task_plugin, "allowed: task/none, or a comma-separated list of task/affinity, task/cgroup")
    if not isinstance(s.select_type_parameters, str) or not all(
        PLUGIN_WORD.fullmatch(t) for t in s.select_type_parameters.split(",")
    ):
        bad("select_type_parameters", s.select_type_parameters, "expected comma-separated words such as CR_Core_Memory")
    if not isinstance(s.mpi_default, str) or not PLUGIN_WORD.fullmatch(s.mpi_default):
        bad("mpi_default", s.mpi_default, "expected a plugin name such as none, pmi2 or pmix")
    if s.log_level not in LOG_LEVELS:
        bad("log_level", s.log_level, "allowed: " + ", ".join(LOG_LEVELS))
    if s.return_to_service not in RETURN_TO_SERVICE or isinstance(s.return_to_service, bool):
        bad("return_to_service", s.return_to_service, "allowed: 0, 1, 2")
    for field in (
        "slurmd_timeout",
        "slurmctld_timeout",
        "message_timeout",
        "kill_wait",
        "sched_interval",
        "bf_interval",
        "health_check_interval",
    ):
        value = getattr(s, field)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SLURM_SECONDS:
            bad(field, value, "expected whole seconds from 1 to {}".format(MAX_SLURM_SECONDS))
    cred = s.cred_expire
    if isinstance(cred, bool) or not isinstance(cred, int) or cred < MIN_CRED_EXPIRE:
        bad(
            "cred_expire",
            cred,
            "must be at least {} s. When a node fails, slurmctld retries the RPCs that failed against it "
            "about 60 s later; a requeued job (same job and step ids) that already restarted sooner is killed "
            "by that stale signal. cred_expire + 1 s is the requeue delay, so >= {} makes the retry arrive "
            "first (docs/research/local-slurm.md §6.3)".format(MIN_CRED_EXPIRE, MIN_CRED_EXPIRE),
        )
    if not isinstance(s.job_requeue, bool):
        bad("job_requeue", s.job_requeue, "expected true or false")
    if not isinstance(s.configless, bool):
        bad("configless", s.configless, "expected true or false")
    if not isinstance(s.nohold_on_prolog_fail, bool):
        bad("nohold_on_prolog_fail", s.nohold_on_prolog_fail, "expected true or false")
    states = s.health_check_node_state.split(",") if isinstance(s.health_check_node_state, str) else [None]
    if any(not isinstance(t, str) or t.upper() not in HEALTH_CHECK_NODE_STATES for t in states):
        bad(
            "health_check_node_state",
            s.health_check_node_state,
            "comma-separated, from: " + ", ".join(HEALTH_CHECK_NODE_STATES),
        )
    if s.prolog_flags is not None:
        flags = s.prolog_flags.split(",") if isinstance(s.prolog_flags, str) else [None]
        known = {f.lower() for f in PROLOG_FLAGS}
        if any(not isinstance(f, str) or f.lower() not in known for f in flags):
            bad("prolog_flags", s.prolog_flags, "comma-separated, from: " + ", ".join(PROLOG_FLAGS))
        elif {f.lower() for f in flags if f} & {"contain", "runinjob", "x11"} and s.proctrack != "proctrack/cgroup":
            bad(
                "prolog_flags",
                s.prolog_flags,
                "Contain (also implied by RunInJob and X11) needs proctrack/cgroup to hold the job's processes; "
                "set proctrack or drop the flag",
            )
    if not isinstance(s.extra_lines, tuple):
        bad("extra_lines", s.extra_lines, "expected a tuple of lines")
    return problems


_Bad = Callable[[str, object, str], None]


def _check_path(s: SlurmSettings, field: str, optional: bool, bad: _Bad) -> None:
    value = getattr(s, field)
    if value is None and optional:
        return
    if (
        not isinstance(value, str)
        or not value.startswith("/")
        or re.search(r"[\s#]", value)
        or (len(value) > 1 and value.endswith("/"))
    ):
        bad(field, value, "expected an absolute path without whitespace, '#' or a trailing '/'")


def _partition_problems(partitions: Sequence[Partition], nodes: Dict[str, int]) -> List[str]:
    problems: List[str] = []
    if not partitions:
        problems.append("partitions: none given; Slurm needs at least one partition for jobs to run in")
    seen: Set[str] = set()
    defaults = []
    for index, partition in enumerate(partitions):
        where = "partitions[{}]".format(index)
        name = partition.name
        if not isinstance(name, str) or not PARTITION_NAME.fullmatch(name) or name.lower() == "default":
            problems.append(
                "{}.name: got {!r}; use 1-128 letters, digits, '_' and '-', starting with a letter or digit "
                "('DEFAULT' is reserved)".format(where, name)
            )
        elif name in seen:
            problems.append("{}.name: {!r} is used twice; partition names must be unique".format(where, name))
        if isinstance(name, str):
            seen.add(name)
        if partition.default:
            defaults.append("{} ({})".format(where, name))
        if partition.all_nodes and partition.nodes:
            problems.append("{}: all_nodes with nodes {}; give one of them".format(where, list(partition.nodes)))
        unknown = sorted({n for n in partition.nodes if n not in nodes})
        if unknown:
            shown = ", ".join(repr(n) for n in unknown[:5])
            more = " and {} more".format(len(unknown) - 5) if len(unknown) > 5 else ""
            problems.append(
                "{}.nodes: {}{} not among the nodes; a partition can only hold declared nodes".format(
                    where, shown, more
                )
            )
    if len(defaults) > 1:
        problems.append(
            "partitions: {} are all marked default; at most one may be (none: the first is)".format(", ".join(defaults))
        )
    return problems


def _extra_line_problems(lines: Tuple[str, ...], keys: Mapping[str, str]) -> List[str]:
    problems: List[str] = []
    if not isinstance(lines, tuple):
        return problems
    for index, line in enumerate(lines):
        where = "settings.extra_lines[{}]".format(index)
        if not isinstance(line, str) or "\n" in line or "\r" in line:
            problems.append("{}: got {!r}; expected one line of text".format(where, line))
            continue
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if "=" not in text and not text.lower().startswith("include "):
            problems.append("{}: got {!r}; expected Key=Value (or a comment)".format(where, line))
            continue
        key = text.split("=", 1)[0].strip().lower()
        if key in keys and key not in REPEATABLE_KEYS:
            field = keys[key]
            fix = "set SlurmSettings.{} instead".format(field) if field else "it is fixed by hyperpod-cdk"
            problems.append(
                "{}: {!r} sets {}, which this file already sets; {}".format(where, line, text.split("=", 1)[0], fix)
            )
    return problems
