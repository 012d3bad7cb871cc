"""Rules from AWS's provisioning, Slurm-configuration and resiliency pages (the AWS inventory's rows,
``data/aws_inventory``): the Slurm config strategy that keeps continuous provisioning open, the deep health check
that needs GPUs, node recovery, and the mode a deployed cluster cannot go back from. Each message quotes its page."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.quotes import (
    AUTO_RESUME_DOC,
    MIGRATION_DOC,
    NO_REVERT_QUOTE,
    RECOVERY_QUOTE,
    STRATEGY_QUOTE,
)
from hyperpod_cdk.model import NodeProvisioningMode, NodeRecovery, SlurmConfigStrategy, SlurmMode
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

rule = REGISTRY.rule


@rule(
    "CL-STRATEGY-MERGE",
    "cluster",
    "slurm_config_strategy",
    level=WARNING,
    source=f"{MIGRATION_DOC} (Choose a Slurm configuration strategy)",
)
def strategy_merge(view: ClusterView) -> Iterator[Problem]:
    """slurm_config_strategy other than Merge (the default) closes the way to continuous provisioning later."""
    if (
        "slurm_config_strategy" in view.given
        and view.mode == SlurmMode.API_DRIVEN
        and view.node_provisioning_mode != NodeProvisioningMode.CONTINUOUS
        and view.slurm_config_strategy != SlurmConfigStrategy.MERGE
    ):
        yield Problem(
            view.path("cluster", "slurm_config_strategy"),
            f"AWS ({MIGRATION_DOC}): {STRATEGY_QUOTE} Clusters on continuous provisioning support only Merge; "
            f"{view.slurm_config_strategy} also makes HyperPod enforce its own partition layout in slurm.conf",
            got=str(view.slurm_config_strategy),
            fix="leave slurm_config_strategy out (Merge), unless this cluster will never move to continuous "
            "provisioning",
        )


@rule("CL-MODE-NO-REVERT", "cluster", "mode", source=f"{MIGRATION_DOC} (Recovering from a failed migration)")
def mode_no_revert(view: ClusterView) -> Iterator[Problem]:
    """A deployed api-driven cluster cannot go back to lifecycle-driven mode (provisioning_parameters.json)."""
    previous = view.previous
    if previous is not None and previous.mode == SlurmMode.API_DRIVEN and view.mode == SlurmMode.LIFECYCLE_DRIVEN:
        yield Problem(
            view.path("cluster", "mode"),
            f"the deployed cluster is api-driven; AWS ({MIGRATION_DOC}): {NO_REVERT_QUOTE}",
            got=str(view.mode),
            fix="keep mode: api-driven, or create a new cluster for lifecycle-driven mode",
        )


@rule("CL-NODE-RECOVERY", "cluster", "node_recovery", level=WARNING, source=AUTO_RESUME_DOC)
def node_recovery(view: ClusterView) -> Iterator[Problem]:
    """node_recovery None: AWS recommends Automatic (faulty nodes are then only labelled, never replaced)."""
    if view.node_recovery == NodeRecovery.NONE:
        yield Problem(
            view.path("cluster", "node_recovery"),
            f"AWS ({AUTO_RESUME_DOC}): {RECOVERY_QUOTE} With None, HyperPod labels a faulty node and repairs nothing",
            got=str(view.node_recovery),
            fix="leave node_recovery out (Automatic)",
        )
