"""What a health check found, and the fixed vocabulary of checks, statuses and remedies."""

from __future__ import annotations

from dataclasses import dataclass

GPU, DCGM, NEURON, EFA, SHARED_STORAGE, DISK = "gpu", "dcgm", "neuron", "efa", "shared-storage", "disk"
CHECK_NAMES = (GPU, DCGM, NEURON, EFA, SHARED_STORAGE, DISK)
"""The names drain reasons use (``hyperpod-cdk:<name>: ...``); a fixed vocabulary other tools may match."""

OK, SKIPPED, FAILED = "ok", "skipped", "failed"

DRAIN, REBOOT, REPLACE = "drain", "reboot", "replace"
"""What a failure asks for on HyperPod (with ``on_hyperpod: recover``); the generic platform always drains."""
SEVERITY = {DRAIN: 0, REBOOT: 1, REPLACE: 2}
REMEDY = {GPU: REBOOT, DCGM: REBOOT, NEURON: REBOOT, EFA: REBOOT, SHARED_STORAGE: DRAIN, DISK: DRAIN}
"""Count mismatches and DCGM failures are hardware faults a reboot often clears (HyperPod's own agent
reboots on a GPU or Neuron count mismatch); one that comes back after our reboot is escalated to a
replacement (:data:`ESCALATE_WITHIN_S`). Storage and disk faults are not the instance's: rebooting would
not fix them and replacing would destroy the root volume, so they only drain."""
HYPERPOD_REASON_PREFIX = "Action:"
"""What HyperPod's reasons start with: a reason beginning so is left to HyperPod (never changed or resumed by us)."""
HYPERPOD_REASONS = {REBOOT: HYPERPOD_REASON_PREFIX + "Reboot", REPLACE: HYPERPOD_REASON_PREFIX + "Replace"}
"""The exact, case-sensitive reasons HyperPod acts on (AWS: "Manually replace or reboot a node using Slurm")."""
ESCALATE_WITHIN_S = 24 * 3600
"""A check that asked for a reboot fails again within this time: ask for a replacement instead."""

PERIODIC, PROLOG, REPORT = "periodic", "prolog", "report"
REASON_PREFIX = "hyperpod-cdk:"
REASON_MAX = 200
SPOT_RECLAIM = "spot-reclaim"
SPOT_REASON = REASON_PREFIX + SPOT_RECLAIM
"""The drain reason's start when EC2 reclaims a Spot node (``training_runtime.spot``); the health checks never
resume such a node or change its reason: it is going away."""
LOGIN_NODE = "login-node"
LOGIN_REASON_START = REASON_PREFIX + LOGIN_NODE + ":"
LOGIN_REASON = LOGIN_REASON_START + " no batch jobs on login nodes (runtime option slurm.login_node_jobs)"
"""The drain reason a HyperPod login node's bootstrap gives itself (:mod:`training_runtime.steps.login_node`): not
a fault, so not HyperPod's ``Action:`` words, and the health checks never resume it or take it for theirs."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    @property
    def remedy(self) -> str:
        return REMEDY[self.name]


def ok(name: str, detail: str = "") -> CheckResult:
    return CheckResult(name, OK, detail)


def skipped(name: str, why: str) -> CheckResult:
    return CheckResult(name, SKIPPED, why)


def failed(name: str, detail: str) -> CheckResult:
    return CheckResult(name, FAILED, detail)
