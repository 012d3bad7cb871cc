"""Rules from AWS's provisioning, Slurm-configuration and resiliency pages (the AWS inventory's rows,
``data/aws_inventory``): the Slurm config strategy that keeps continuous provisioning open, the deep health check
that needs GPUs, node recovery, the mode a deployed cluster cannot go back from, and the Slurm CLI page's
instance groups (how many, a new group's count, a controller group's nodes). Each message quotes its page."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.inventory import row
from hyperpod_cdk.aws_data.quotes import (
    AUTO_RESUME_DOC,
    MIGRATION_DOC,
    NO_REVERT_QUOTE,
    RECOVERY_QUOTE,
    STRATEGY_QUOTE,
)
from hyperpod_cdk.model import NodeProvisioningMode, NodeRecovery, NodeRole, SlurmConfigStrategy, SlurmMode
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.hyperpod_facts import INSTANCE_GROUPS_MAX
from training_runtime.problems import WARNING, Problem

rule = REGISTRY.rule
CLI_COMMAND_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-operate-slurm-cli-command.html"


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


# --- The Slurm CLI page (sagemaker-hyperpod-operate-slurm-cli-command): its rows name these rules and give their words.

GUIDE_GROUPS_MAX = 20
"""The instance groups the Slurm CLI page says a cluster can have ("up to 20"); the API reference says 100."""


@rule("GRP-COUNT-GUIDE", "instance_groups", "instance_groups", level=WARNING, source=CLI_COMMAND_DOC)
def group_count_guide(view: ClusterView) -> Iterator[Problem]:
    """More than 20 instance groups: the Slurm CLI page says up to 20, the API reference 100 (AWS's pages disagree)."""
    if GUIDE_GROUPS_MAX < len(view.groups) <= INSTANCE_GROUPS_MAX:
        quote = row("cli-command-groups-up-to-20")
        yield Problem(
            view.path("instance_groups"),
            f'{len(view.groups)} groups; AWS\'s Slurm CLI page: "{quote.quote}" ({quote.url}), while the API '
            f"reference allows {INSTANCE_GROUPS_MAX}: the pages disagree, and a create may be refused over "
            f"{GUIDE_GROUPS_MAX}",
            got=len(view.groups),
            fix=f"merge groups of one type and role (at most {GUIDE_GROUPS_MAX}), or check the account's limit first",
        )


@rule("GRP-NEW-GROUP-COUNT", "instance_groups", "instance_groups[*].count", source=CLI_COMMAND_DOC)
def new_group_count(view: ClusterView) -> Iterator[Problem]:
    """A group added to a deployed cluster starts with at least one instance (--previous)."""
    previous = view.previous
    if previous is None:
        return
    deployed = {g.name for g in previous.groups}
    for index, group in enumerate(view.groups):
        if group.name not in deployed and view.concrete(group.count) and group.count < 1:
            quote = row("cli-command-new-group-count")
            yield Problem(
                group_path(view, index, "count"),
                f'{group.name!r} is new to the deployed cluster; AWS: "{quote.quote}" ({quote.url})',
                got=group.count,
                fix="deploy the new group with count 1 or more (scale it to 0 in a later update)",
            )


@rule("GRP-CONTROLLER-REMOVE", "instance_groups", "instance_groups[*].count", source=CLI_COMMAND_DOC)
def controller_removed(view: ClusterView) -> Iterator[Problem]:
    """A deployed controller group keeps its nodes: its count does not go down and it is not removed (--previous)."""
    previous = view.previous
    if previous is None:
        return
    now = {g.name: (index, g) for index, g in enumerate(view.groups)}
    for old in previous.groups:
        if old.role != NodeRole.CONTROLLER:
            continue
        quote = row("cli-command-no-controller-removal")
        said = f'AWS: "{quote.quote}" ({quote.url})'
        if old.name not in now:
            yield Problem(
                view.path("instance_groups"),
                f"the deployed controller group {old.name!r} is gone: its nodes would be removed; {said}",
                fix=f"keep the group {old.name!r} (a new controller needs a new cluster)",
            )
            continue
        index, group = now[old.name]
        concrete = view.concrete(group.count) and view.concrete(old.count)
        if group.role == old.role and concrete and group.count < old.count:
            yield Problem(
                group_path(view, index, "count"),
                f"the deployed controller group has {old.count} instance(s): lowering the count removes controller "
                f"nodes; {said}",
                got=group.count,
                fix=f"keep count {old.count}",
            )
