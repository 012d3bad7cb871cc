"""The health checks on a compute node: the programs Slurm runs, their options, and (HyperPod) a timer.

On the generic platform the runtime renders slurm.conf, which names :data:`HEALTH_CHECK` as
``HealthCheckProgram`` and :data:`PROLOG` as ``Prolog`` (``steps/slurm.py``); slurmd runs them. On
HyperPod, HyperPod owns slurm.conf and the runtime must not edit it, so a systemd timer runs the periodic
check instead, every ``slurm.health_check_interval`` seconds; there is no prolog there.

With ``runtime.observability.dcgm_exporter`` on a generic-platform cluster whose compute groups have GPUs,
the same prolog first records the job's GPUs for dcgm-exporter (``training_runtime.metrics.gpu_jobs``,
which never fails a job), and an epilog removes them; the health check runs after it unchanged.

The programs run ``python3 -m training_runtime.health`` from the installed copy of the runtime (not the
``training_runtime`` command line, whose other tools it need not import: a prolog gates every job).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import List, Tuple

from training_runtime import services
from training_runtime.files import file_matches, write_file
from training_runtime.hardware import hardware_for
from training_runtime.health import HEALTH_CONFIG, PERIODIC, PROLOG
from training_runtime.node import GENERIC, HYPERPOD, Node
from training_runtime.paths import BIN_DIR, HEALTH_CHECK, INSTALL_DIR
from training_runtime.steps import Step
from training_runtime.steps.installed import PACKAGE_NAME, program

GPU_JOBS_MODULE = PACKAGE_NAME + ".metrics.gpu_jobs"

PROLOG_PROGRAM = BIN_DIR + "/prolog"
EPILOG_PROGRAM = BIN_DIR + "/epilog"
UNIT_DIR = "/etc/systemd/system"
SERVICE = "hyperpod-cdk-health.service"
TIMER = "hyperpod-cdk-health.timer"


def health_program(mode: str) -> str:
    """A wrapper that runs the health checks in ``mode`` from the installed copy of the runtime."""
    return program("--" + mode, module=PACKAGE_NAME + ".health")


def gpu_job_mapping(node: Node) -> bool:
    """Whether the prolog and epilog keep the GPU-to-job mapping: the same answer on every node (slurm.conf
    is the cluster's), so it depends on the options and the compute groups' hardware only."""
    metrics = node.options.observability
    if node.platform != GENERIC or not (metrics.enabled and metrics.dcgm_exporter):
        return False
    overrides = node.options.node_hardware
    for group in node.params.groups:
        if group.role != "compute":
            continue
        # a flexible group's candidates (any of them may come up), else its one type
        types = group.instance_types or ((group.instance_type,) if group.instance_type else ())
        for instance_type in types:
            hardware = hardware_for(instance_type, overrides, group.threads_per_core)
            if hardware is not None and hardware.gpus > 0:
                return True
    return False


def prolog_program(node: Node) -> str:
    """The prolog: the GPU-to-job mapping (when kept; its exit status is ignored), then the health check."""
    health = node.options.health.enabled
    if not gpu_job_mapping(node):
        return health_program(PROLOG)
    lines = [
        "#!/bin/sh",
        "# Installed by hyperpod-cdk.",
        "PYTHONPATH={} python3 -m {} --prolog".format(INSTALL_DIR, GPU_JOBS_MODULE),
    ]
    lines.append(health_program(PROLOG).splitlines()[-1] if health else "exit 0")
    return "\n".join(lines) + "\n"


def epilog_program() -> str:
    return "#!/bin/sh\n# Installed by hyperpod-cdk.\nPYTHONPATH={} python3 -m {} --epilog\nexit 0\n".format(
        INSTALL_DIR, GPU_JOBS_MODULE
    )


def service_unit() -> str:
    return (
        "# Installed by hyperpod-cdk: the periodic node health check (HyperPod owns slurm.conf, so no\n"
        "# HealthCheckProgram there).\n"
        "[Unit]\nDescription=hyperpod-cdk node health check\nAfter=slurmd.service\n\n"
        "[Service]\nType=oneshot\nExecStart={}\nTimeoutStartSec=120\n".format(HEALTH_CHECK)
    )


def timer_unit(interval_s: int) -> str:
    return (
        "# Installed by hyperpod-cdk: runs {service} every runtime.slurm.health_check_interval seconds.\n"
        "[Unit]\nDescription=hyperpod-cdk node health check every {interval} s\n\n"
        "[Timer]\nOnBootSec={interval}s\nOnUnitActiveSec={interval}s\nRandomizedDelaySec={spread}s\n\n"
        "[Install]\nWantedBy=timers.target\n".format(service=SERVICE, interval=interval_s, spread=min(60, interval_s))
    )


def health_config(node: Node) -> str:
    return json.dumps(asdict(node.options.health), indent=2, sort_keys=True) + "\n"


class HealthPrograms(Step):
    """Writes the health check and prolog programs and their options; on HyperPod, runs the timer."""

    name = "health-checks"

    def uses_timer(self, node: Node) -> bool:
        return node.platform == HYPERPOD and node.has_systemd and node.options.health.enabled

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        """(path, content, mode) of every file this step owns on this node."""
        files = []
        if node.options.health.enabled:
            files += [(HEALTH_CHECK, health_program(PERIODIC), 0o755), (HEALTH_CONFIG, health_config(node), 0o644)]
        files.append((PROLOG_PROGRAM, prolog_program(node), 0o755))
        if gpu_job_mapping(node):
            files.append((EPILOG_PROGRAM, epilog_program(), 0o755))
        if node.platform == HYPERPOD and node.options.health.enabled:
            files += [
                ("{}/{}".format(UNIT_DIR, SERVICE), service_unit(), 0o644),
                ("{}/{}".format(UNIT_DIR, TIMER), timer_unit(node.options.slurm.health_check_interval), 0o644),
            ]
        return files

    def stale(self, node: Node) -> List[str]:
        return [path for path, content, mode in self.files(node) if not file_matches(node, path, content, mode)]

    def timer_running(self, node: Node) -> bool:
        return services.unit_enabled(node, TIMER) and services.unit_active(node, TIMER)

    def needed(self, node: Node) -> bool:
        return bool(self.stale(node)) or (self.uses_timer(node) and not self.timer_running(node))

    def apply(self, node: Node) -> None:
        changed = False
        for path, content, mode in self.files(node):
            changed = write_file(node, path, content, mode=mode) or changed
        if not self.uses_timer(node):
            return
        if changed:
            node.run(["systemctl", "daemon-reload"], timeout=120)
        if not self.timer_running(node):
            node.run(["systemctl", "enable", "--now", TIMER], timeout=120)
        elif changed:
            node.run(["systemctl", "restart", TIMER], timeout=120)

    def describe(self, node: Node) -> List[str]:
        actions = ["write " + path for path in self.stale(node)]
        if self.uses_timer(node):
            actions.append(
                "systemctl enable --now {} (every {} s)".format(TIMER, node.options.slurm.health_check_interval)
            )
        return actions


class HealthTimerRemoved(Step):
    """On HyperPod with ``health.enabled: false``: the timer an earlier bootstrap installed is stopped."""

    name = "health-checks"

    def needed(self, node: Node) -> bool:
        return node.path("{}/{}".format(UNIT_DIR, TIMER)).exists()

    def apply(self, node: Node) -> None:
        if node.has_systemd:
            node.run(["systemctl", "disable", "--now", TIMER], check=False, timeout=120)
        for unit in (TIMER, SERVICE):
            node.path("{}/{}".format(UNIT_DIR, unit)).unlink(missing_ok=True)
        if node.has_systemd:
            node.run(["systemctl", "daemon-reload"], timeout=120)

    def describe(self, node: Node) -> List[str]:
        return ["systemctl disable --now {}; remove its units (health.enabled is false)".format(TIMER)]


def health_steps(node: Node) -> List[Step]:
    """The health step for this node: compute nodes only (they run slurmd and jobs)."""
    if not node.is_compute:
        return []
    if node.options.health.enabled or gpu_job_mapping(node):
        return [HealthPrograms()]
    if node.platform == HYPERPOD and node.path("{}/{}".format(UNIT_DIR, TIMER)).exists():
        return [HealthTimerRemoved()]
    return []
