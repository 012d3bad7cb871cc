"""Rules from AWS's provisioning, Slurm-configuration and resiliency pages (the AWS inventory's rows,
``data/aws_inventory``): the Slurm config strategy that keeps continuous provisioning open, and the deep health check
that needs GPUs. Each message quotes its page."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_quotes import CONNECTIVITY_QUOTE, DEEP_HEALTH_DOC, MIGRATION_DOC, STRATEGY_QUOTE
from hyperpod_cdk.model import DeepHealthCheck, NodeProvisioningMode, SlurmConfigStrategy, SlurmMode
from hyperpod_cdk.rules.groups import group_path
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


@rule(
    "GRP-DHC-CONNECTIVITY-GPU",
    "instance_groups",
    "instance_groups[*].deep_health_checks",
    needs=("hardware",),
    source=f"{DEEP_HEALTH_DOC} (Deep health check types)",
)
def connectivity_needs_gpus(view: ClusterView) -> Iterator[Problem]:
    """InstanceConnectivity (NCCL across nodes) only on instance types with NVIDIA GPUs."""
    for index, group in enumerate(view.groups):
        if DeepHealthCheck.INSTANCE_CONNECTIVITY not in group.deep_health_checks:
            continue
        # Judged on the catalogue's GPU count (training_runtime.hardware): AWS does not define "multi-node GPU
        # communication capabilities" further, so only types without any GPU are refused.
        plain = [t for t in view.types_of(group) if (h := view.hardware(t)) is not None and not h.gpus]
        if plain:
            yield Problem(
                group_path(view, index, "deep_health_checks"),
                f"AWS ({DEEP_HEALTH_DOC}): {CONNECTIVITY_QUOTE} {', '.join(plain)} "
                f"{'has' if len(plain) == 1 else 'have'} no GPU",
                got=[str(c) for c in group.deep_health_checks],
                fix="remove InstanceConnectivity from this group (keep InstanceStress if you want the "
                "instance-level checks)",
            )

