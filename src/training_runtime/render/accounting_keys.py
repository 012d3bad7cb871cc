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

GATHER_FREQUENCY_S = 30


@dataclass(frozen=True)
class AccountingKey:
    key: str
    value: str
    field: str
    """The ``SlurmSettings`` field the key comes from ('' when fixed)."""
    comment: Tuple[str, ...] = ()


def accounting_keys(
    host: Optional[str], backup_host: Optional[str] = None, gpu_tres: bool = False
) -> List[AccountingKey]:
    """slurm.conf's accounting keys for slurmdbd at ``host`` (None: accounting off, sacct disabled).

    ``gpu_tres`` adds ``AccountingStorageTRES=gres/gpu`` so ``sacct``/``sreport`` show each job's GPUs.
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
    return keys
