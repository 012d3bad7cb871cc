"""Who runs slurmdbd on the controller, decided once from the config: HyperPod or the node runtime.

One setting, ``runtime.accounting``, describes the external accounting database. HyperPod takes it through the
API (``Orchestrator.Slurm.AccountingDatabase``) only in API-driven mode and only with continuous node provisioning
(the API reference's ClusterAccountingDatabase: "Supported only with Continuous node provisioning"); then HyperPod
configures slurmdbd itself. Everywhere else the runtime's controller steps do, as they always have. The constructs
render ``AccountingDatabase``, the parameters file tells the node (``hyperpod_cdk.slurmdbd_owner``) and the rules
warn where a config cannot take the API path, all from :func:`slurmdbd_owner`.

No ``aws_cdk`` import: the rules and the parameters builder use it too.
"""

from __future__ import annotations

from hyperpod_cdk.model import NodeProvisioningMode, SlurmMode
from training_runtime.options import AccountingOptions
from training_runtime.params import SLURMDBD_BY_HYPERPOD, SLURMDBD_BY_RUNTIME

EXTERNAL_ACCOUNTING_DOC = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html"
)
ACCOUNTING_DATABASE_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ClusterAccountingDatabase.html"


def external_database(accounting: AccountingOptions) -> bool:
    """Accounting is on and its database is external (an endpoint and a secret, RT-ACCOUNTING-EXTERNAL)."""
    return accounting.enabled and accounting.database == "external"


def slurmdbd_owner(mode: str, node_provisioning_mode: str | None, accounting: AccountingOptions) -> str:
    """``hyperpod`` for an external database in API-driven mode with continuous provisioning, else ``runtime``."""
    if (
        mode == SlurmMode.API_DRIVEN
        and node_provisioning_mode == NodeProvisioningMode.CONTINUOUS
        and external_database(accounting)
    ):
        return SLURMDBD_BY_HYPERPOD
    return SLURMDBD_BY_RUNTIME
