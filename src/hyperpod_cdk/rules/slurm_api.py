"""Rules on what the HyperPod API accepts on a Slurm cluster, each from its row of the support table
(``data/api_support.yaml``, :mod:`hyperpod_cdk.aws_data.api_support`): continuous provisioning's combinations, the
external
accounting database's prerequisites, and the settings whose Slurm support AWS has not confirmed (those warn, say
what to check, and can be suppressed once checked: ``suppress``, or its former form ``accept_unconfirmed``)."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_support import api_rule, support_row, unconfirmed_rules
from hyperpod_cdk.core.accounting import slurmdbd_owner
from hyperpod_cdk.model import Capacity, NodeProvisioningMode, NodeRole, SlurmMode
from hyperpod_cdk.rules.field_values import scoped_values
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.images import DEFAULT_IMAGE
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.params import SLURMDBD_BY_HYPERPOD
from training_runtime.problems import Problem


def rule(row_id: str, section: str, field: str, needs: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    return api_rule(REGISTRY.rule, row_id, section, field, needs)


def _continuous(view: ClusterView) -> bool:
    return view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS


@rule("continuous-no-strategy", "cluster", "slurm_config_strategy")
def continuous_no_strategy(view: ClusterView) -> Iterator[Problem]:
    """With continuous provisioning, slurm_config_strategy is not given: the API rejects any SlurmConfigStrategy."""
    if _continuous(view) and "slurm_config_strategy" in view.given:
        yield Problem(
            view.path("cluster", "slurm_config_strategy"),
            "continuous provisioning manages slurm.conf in merge mode only, and HyperPod rejects any "
            "SlurmConfigStrategy with it (the template writes none)",
            got=str(view.slurm_config_strategy),
            fix="remove slurm_config_strategy, or leave node_provisioning_mode out",
        )


@rule("continuous-api-driven", "cluster", "node_provisioning_mode")
def continuous_api_driven(view: ClusterView) -> Iterator[Problem]:
    """Continuous provisioning needs mode api-driven: HyperPod needs every group's SlurmConfig, not
    provisioning_parameters.json."""
    if _continuous(view) and view.mode == SlurmMode.LIFECYCLE_DRIVEN:
        yield Problem(
            view.path("cluster", "node_provisioning_mode"),
            "continuous provisioning needs each group's SlurmConfig (mode api-driven); clusters configured through "
            "provisioning_parameters.json (mode lifecycle-driven) are not compatible",
            got=str(view.node_provisioning_mode),
            fix=f"set {view.path('cluster', 'mode')}: api-driven, or leave node_provisioning_mode out",
        )


def _hyperpod_runs_slurmdbd(view: ClusterView) -> bool:
    options = view.runtime_options
    return options is not None and (
        slurmdbd_owner(view.mode, view.node_provisioning_mode, options.accounting) == SLURMDBD_BY_HYPERPOD
    )


@rule("accounting-ami", "instance_groups", "instance_groups[*].image_id", needs=("cluster", "runtime"))
def accounting_ami(view: ClusterView) -> Iterator[Problem]:
    """With an external accounting database HyperPod needs AMIs released after 2026-08-30: a custom AMI must be
    built from one."""
    if not _hyperpod_runs_slurmdbd(view):
        return
    for index, group in enumerate(view.groups):
        image = group.image_id
        if image is not None and view.concrete(image) and image != DEFAULT_IMAGE:
            yield Problem(
                group_path(view, index, "image_id"),
                "HyperPod's external accounting database (runtime.accounting, database external) needs AMIs "
                "released after 2026-08-30, and this custom AMI's age is not known here",
                got=image,
                fix=f"check {support_row('accounting-ami').check}",
            )


def _previously_by_hyperpod(view: ClusterView) -> bool | None:
    """Whether HyperPod ran slurmdbd against the external database in the deployed config (None: not known)."""
    return None if view.previous is None else _hyperpod_runs_slurmdbd(view.previous)


@rule("accounting-one-way", "runtime", "runtime.accounting.database", needs=("cluster",))
def accounting_one_way(view: ClusterView) -> Iterator[Problem]:
    """Attaching the external accounting database to a deployed cluster is one-way, and its nodes need a new AMI."""
    if _previously_by_hyperpod(view) is False and _hyperpod_runs_slurmdbd(view):
        yield Problem(
            view.path("runtime", "accounting.database"),
            "attaches an external accounting database (AccountingDatabase) to the deployed cluster: HyperPod cannot "
            "revert the cluster to the controller's database afterwards, and its nodes need an AMI released after "
            "2026-08-30",
            got="external",
            fix="update the cluster's software (UpdateClusterSoftware) to a current AMI first, and deploy this only "
            "if the cluster keeps this database",
        )


@rule("accounting-no-revert", "runtime", "runtime.accounting.database", needs=("cluster",))
def accounting_no_revert(view: ClusterView) -> Iterator[Problem]:
    """A deployed cluster's external accounting database cannot be detached (HyperPod cannot revert to MariaDB)."""
    if _previously_by_hyperpod(view) is True and not _hyperpod_runs_slurmdbd(view):
        yield Problem(
            view.path("runtime", "accounting"),
            "the deployed cluster has an external accounting database (AccountingDatabase) and HyperPod cannot "
            "revert it to the internal MariaDB database; this update would fail",
            fix="keep runtime.accounting external with node_provisioning_mode continuous, or create a new cluster",
        )


@rule("flexible-slurm", "instance_groups", "instance_groups[*].instance_types")
def flexible_slurm(view: ClusterView) -> Iterator[Problem]:
    """A flexible group (instance_types) is of unconfirmed support on Slurm: AWS's announcement, as summarised,
    says Slurm is not supported."""
    for index, group in enumerate(view.groups):
        if group.flexible:
            yield Problem(
                group_path(view, index, "instance_types"),
                "a flexible instance group (InstanceRequirements) may be rejected on a Slurm cluster",
                got=list(group.instance_types),
                fix="give the group one instance_type, or suppress: [{rule: GRP-FLEX-SLURM, reason: ...}] once checked",
            )


def _spot_groups(view: ClusterView) -> Iterator[tuple[str, object]]:
    """(path, value) of every group that runs on Spot, or that a launch parameter lets run on Spot."""
    choices = view.parameters.instance_groups if view.parameters is not None else {}
    for index, group in enumerate(view.groups):
        chosen = choices.get(group.name)
        allowed = chosen.capacity if chosen is not None else None
        if group.capacity == Capacity.SPOT:
            yield group_path(view, index, "capacity"), str(group.capacity)
        elif allowed and Capacity.SPOT in allowed:
            yield f"parameters.instance_groups.{group.name}.capacity", [str(c) for c in allowed]


@rule("spot-slurm", "instance_groups", "instance_groups[*].capacity")
def spot_slurm(view: ClusterView) -> Iterator[Problem]:
    """Spot capacity is of unconfirmed support on Slurm: AWS documents it for EKS clusters only."""
    for where, value in _spot_groups(view):
        yield Problem(
            where,
            "Spot capacity (CapacityRequirements.Spot) is documented for EKS clusters only",
            got=value,
            fix="use on-demand, or suppress: [{rule: GRP-SPOT-SLURM, reason: ...}] once checked",
        )


@rule("deep-health-continuous", "instance_groups", "instance_groups[*].deep_health_checks", needs=("cluster",))
def deep_health_continuous(view: ClusterView) -> Iterator[Problem]:
    """Deep health checks without continuous provisioning are of unconfirmed support on Slurm."""
    if _continuous(view):
        return
    for where, value in scoped_values(view, "deep-health-continuous"):
        yield Problem(
            where,
            "on Slurm, on-start deep health checks were announced with continuous provisioning, and this "
            "cluster does not use it",
            got=[str(c) for c in value] if isinstance(value, list | tuple) else value,
            fix="set node_provisioning_mode: continuous (mode api-driven), drop them, or "
            "suppress: [{rule: GRP-DHC-CONTINUOUS, reason: ...}] once checked",
        )


@rule("deep-health-workers", "instance_groups", "instance_groups[*].deep_health_checks")
def deep_health_workers(view: ClusterView) -> Iterator[Problem]:
    """Deep health checks only on compute groups: on Slurm they run on worker nodes only (AWS's deep health check
    page)."""
    for index, group in enumerate(view.groups):
        if group.deep_health_checks and group.role != NodeRole.COMPUTE:
            yield Problem(
                group_path(view, index, "deep_health_checks"),
                'AWS: "Deep health checks run on worker nodes only. Controller and login nodes are not subject to '
                f'deep health checks."; this is a {group.role} group',
                got=[str(c) for c in group.deep_health_checks],
                fix="move them to the compute groups",
            )


@REGISTRY.rule(
    "CL-ACCEPT-UNCONFIRMED",
    "cluster",
    "accept_unconfirmed",
    source="hyperpod-cdk (data/api_support.yaml: only rows of unconfirmed Slurm support can be accepted)",
)
def accept_unconfirmed(view: ClusterView) -> Iterator[Problem]:
    """accept_unconfirmed lists only the rules of settings whose Slurm support is unconfirmed."""
    allowed = unconfirmed_rules()
    for index, rule_id in enumerate(view.accepted):
        if rule_id not in allowed:
            yield Problem(
                view.path("cluster", f"accept_unconfirmed[{index}]"),
                "only the warnings of unconfirmed Slurm support can be accepted: " + ", ".join(sorted(allowed)),
                got=rule_id,
                fix="remove it (an error or a documented constraint cannot be accepted)",
            )
