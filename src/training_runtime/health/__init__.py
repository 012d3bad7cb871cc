"""Node health checks: what Slurm runs as ``HealthCheckProgram`` and ``Prolog`` on compute nodes.

``python3 -m training_runtime health --periodic | --prolog | --report``

Each check compares the node with what its facts (:mod:`training_runtime.facts`, written at bootstrap)
say it should have, and returns ``ok``, ``skipped`` (the node is not expected to have that hardware, or
the check cannot run and fails open) or ``failed``. Hardware the instance type does not have is skipped,
never failed; expected hardware that is missing fails.

A failure in ``--periodic`` or ``--prolog`` mode takes the node out of service itself (Slurm ignores the
health program's exit status): on the generic platform a drain whose reason names the check
(``hyperpod-cdk:<check>: <detail>``); on HyperPod, hardware faults ask HyperPod to reboot, and on a
repeat replace, the node (``state=fail reason=Action:Reboot`` / ``Action:Replace``), other faults drain.
A node drained by these checks is resumed when they pass again; a node drained or failed by anyone else
is never touched. ``--report`` runs every check, prints the results and changes nothing.

Everything has a deadline: Slurm kills a HealthCheckProgram after 60 s, and a hung GPU or file system
must not hang the check, so the checks run in parallel threads and a check still running at the
deadline counts as failed.
"""

from training_runtime.health.checks import (
    CHECKS,
    Context,
    check_dcgm,
    check_disk,
    check_efa,
    check_gpu,
    check_neuron,
    check_shared_storage,
    efa_domains,
    neuron_device_count,
    run_checks,
    slurm_node_name,
)
from training_runtime.health.cli import (
    HEALTH_CONFIG,
    LOG_FILE,
    RECOVERY_FILE,
    apply_actions,
    check_and_act,
    load_health_options,
    main,
    situation,
)
from training_runtime.health.remedy import NodeState, Situation, hyperpod_action, parse_node_state, plan_actions
from training_runtime.health.results import (
    CHECK_NAMES,
    FAILED,
    OK,
    PERIODIC,
    PROLOG,
    REPORT,
    SKIPPED,
    CheckResult,
)

__all__ = [
    "CHECKS",
    "CHECK_NAMES",
    "FAILED",
    "HEALTH_CONFIG",
    "LOG_FILE",
    "OK",
    "PERIODIC",
    "PROLOG",
    "RECOVERY_FILE",
    "REPORT",
    "SKIPPED",
    "CheckResult",
    "Context",
    "NodeState",
    "Situation",
    "apply_actions",
    "check_and_act",
    "check_dcgm",
    "check_disk",
    "check_efa",
    "check_gpu",
    "check_neuron",
    "check_shared_storage",
    "efa_domains",
    "hyperpod_action",
    "load_health_options",
    "main",
    "neuron_device_count",
    "parse_node_state",
    "plan_actions",
    "run_checks",
    "situation",
    "slurm_node_name",
]
