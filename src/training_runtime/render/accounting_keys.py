"""The Slurm accounting keys, one definition for both platforms.

The generic platform writes them into the slurm.conf it renders (:mod:`.slurm_conf`); on HyperPod they go
into ``accounting.conf``, the file HyperPod's slurm.conf includes (``training_runtime.steps.slurm``). The
values follow AWS's own accounting setup for HyperPod (``setup_mariadb_accounting.sh`` in the HyperPod
lifecycle-script samples, https://github.com/aws-samples/awsome-distributed-training/tree/main/1.architectures/
5.sagemaker-hyperpod/LifecycleScripts/base-config): slurmdbd on port 6819, job steps sampled every 30 s,
and GPU use recorded per job (``AccountingStorageTRES=gres/gpu``; cpu, mem and node are always recorded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from training_runtime.hyperpod_facts import SLURMDBD_PORT
from training_runtime.team_model import Teams

GATHER_FREQUENCY_S = 30
PRIORITY_WEIGHT = 10000
"""``PriorityWeightFairshare`` and ``PriorityWeightQOS`` with teams: the teams' shares and QOS priorities order
pending jobs (Slurm's default weights are 0, which makes multifactor priority ignore both)."""


@dataclass(frozen=True)
class AccountingKey:
    key: str
    value: str
    field: str
    """The ``SlurmSettings`` field the key comes from ('' when fixed)."""
    comment: Tuple[str, ...] = ()


def accounting_keys(
    host: Optional[str], backup_host: Optional[str] = None, gpu_tres: bool = False, teams: Optional[Teams] = None
) -> List[AccountingKey]:
    """slurm.conf's accounting keys for slurmdbd at ``host`` (None: accounting off, sacct disabled).

    ``gpu_tres`` adds ``AccountingStorageTRES=gres/gpu`` so ``sacct``/``sreport`` show each job's GPUs;
    ``teams`` adds the enforcement and priority keys they need (:func:`team_keys`).
    """
    if host is None:
        return [
            AccountingKey(
                "AccountingStorageType",
                "accounting_storage/none",
                "accounting_host",
                ("No slurmdbd: sacct is disabled.",),
            ),
            AccountingKey("JobAcctGatherType", "jobacct_gather/none", "accounting_host"),
        ]
    keys = [
        AccountingKey("AccountingStorageType", "accounting_storage/slurmdbd", "accounting_host"),
        AccountingKey("AccountingStorageHost", host, "accounting_host"),
    ]
    if backup_host is not None:
        keys.append(AccountingKey("AccountingStorageBackupHost", backup_host, "accounting_backup_host"))
    keys.append(AccountingKey("AccountingStoragePort", str(SLURMDBD_PORT), ""))
    if gpu_tres:
        keys.append(
            AccountingKey(
                "AccountingStorageTRES",
                "gres/gpu",
                "",
                ("Record GPU use per job (cpu, mem, node are always recorded).",),
            )
        )
    keys += [
        AccountingKey("JobAcctGatherType", "jobacct_gather/linux", "accounting_host"),
        AccountingKey(
            "JobAcctGatherFrequency",
            str(GATHER_FREQUENCY_S),
            "",
            ("Seconds between samples of each job step's CPU and memory use.",),
        ),
    ]
    return keys + team_keys(teams)


def team_keys(teams: Optional[Teams]) -> List[AccountingKey]:
    """What the teams need from slurm.conf (slurm.conf(5)): ``AccountingStorageEnforce`` with
    ``enforce_accounts``; multifactor priority weighing fair-share and QOS with any team; with a budget, usage that
    never decays (``PriorityDecayHalfLife=0``) and is reset at the budget's period (``PriorityUsageResetPeriod``),
    so ``GrpTRESMins`` is an allocation per period ("This is used if you want to enforce hard limits of time usage
    per association")."""
    if teams is None:
        return []
    keys = []
    if teams.enforce is not None:
        keys.append(
            AccountingKey(
                "AccountingStorageEnforce",
                teams.enforce,
                "enforce_accounts",
                (
                    "enforce_accounts: jobs need an account; QOS limits and budgets hold; safe: a job starts",
                    "against a budget only if it can run to completion within it (never killed at the limit).",
                ),
            )
        )
    if teams.teams:
        keys += [
            AccountingKey("PriorityType", "priority/multifactor", "teams", ("Teams: fair-share and QOS priority.",)),
            AccountingKey("PriorityWeightFairshare", str(PRIORITY_WEIGHT), "teams"),
            AccountingKey("PriorityWeightQOS", str(PRIORITY_WEIGHT), "teams"),
        ]
    period = teams.reset_period
    if period is not None:
        keys += [
            AccountingKey(
                "PriorityDecayHalfLife",
                "0",
                "teams",
                ("Budgets: usage never decays and is reset every period, so GrpTRESMins is a per-period cap.",),
            ),
            AccountingKey("PriorityUsageResetPeriod", period, "teams"),
            AccountingKey(
                "PriorityCalcPeriod",
                "1",
                "teams",
                (
                    "Minutes between usage updates (Slurm's default 5): a finished job counts against its budget",
                    "within a minute.",
                ),
            ),
        ]
    return keys
