"""Rules on multi-head controllers: a controller group of two or more instances (a primary slurmctld and backups).

HyperPod's model: one controller group with ``InstanceCount`` 2 or more; the first instance is the primary, the
others take over when it stops answering. Their state directory is on the shared FSx for Lustre file system and
their accounting database is outside the controllers (the ``slurm_configurations`` of provisioning_parameters.json,
which the API-driven model has no equivalent of). The shared file system needs no rule of its own: MH-MODE asks
for lifecycle-driven mode, where CL-STORAGE-NEEDED already asks for FSx (the runtime puts StateSaveLocation there).
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.model import NodeRole, SlurmMode
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

MULTIHEAD_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-multihead-slurm-setup.html"
MIGRATION_DOC = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-slurm-api-config-migration.html"
    "#sagemaker-hyperpod-slurm-api-config-migration-multihead"
)

rule = REGISTRY.rule


def multi_head(view: ClusterView) -> tuple[int, int] | None:
    """(index, count) of the controller group when it has backup controllers (two or more instances)."""
    for index, group in enumerate(view.groups):
        if group.role == NodeRole.CONTROLLER and view.concrete(group.count):
            count = group.count
            if not isinstance(count, bool) and isinstance(count, int) and count > 1:
                return index, count
    return None


@rule("MH-MODE", "instance_groups", "instance_groups[*].count", needs=("cluster",), source=MIGRATION_DOC)
def multihead_mode(view: ClusterView) -> Iterator[Problem]:
    """Two or more controllers need mode lifecycle-driven: API-driven SlurmConfig has no controller failover."""
    found = multi_head(view)
    if found is None or view.mode == SlurmMode.LIFECYCLE_DRIVEN:
        return
    index, count = found
    yield Problem(
        group_path(view, index, "count"),
        f"{count} controllers (a primary and backups) need mode lifecycle-driven: HyperPod's API-driven Slurm "
        "configuration has no equivalent of the multi-head settings, so the backups would never take over",
        got=count,
        fix=f"set {view.path('cluster', 'mode')}: lifecycle-driven, or give the controller group count 1",
    )


@rule("MH-ACCOUNTING", "instance_groups", "runtime.accounting.database", needs=("runtime",), source=MULTIHEAD_DOC)
def multihead_accounting(view: ClusterView) -> Iterator[Problem]:
    """With two or more controllers, accounting uses an external database (a MariaDB on one controller dies with it)."""
    options = view.runtime_options
    if multi_head(view) is None or options is None:
        return
    accounting = options.accounting
    if accounting.enabled and accounting.database != "external":
        yield Problem(
            view.path("runtime", "accounting.database"),
            "with backup controllers every controller runs slurmdbd on one shared database; a local MariaDB "
            "lives on one controller and goes down with it (HyperPod's multi-head setup uses an RDS database)",
            got=accounting.database,
            fix="use database: external with host and password_secret_arn (e.g. Amazon RDS for MariaDB), or "
            "turn accounting off",
        )
