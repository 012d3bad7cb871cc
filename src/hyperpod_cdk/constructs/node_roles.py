"""The execution role of each instance group: one per group, the controller's keeping the shared role's identity.

Why per group and not per kind (controller, login, compute): a group's volume key and its ``override_vpc`` subnets
are its own, so a role per kind would let one compute group create grants on another's key and manage ENIs in
another's subnets. IAM's default quota (1,000 roles per account) is far above a cluster's 100 groups.

Why the controller's role keeps the construct ID ``ExecutionRole`` (the logical ID of the one role every group
shared before): on a deployed cluster, the controller group's ``ExecutionRole`` then does not change, and the
scaler and the accounting secret keep working through an update. AWS's guide says to keep an existing group's
role: "For ExecutionRole [...] For updating an existing instance group, keep using the same IAM role you attached
during cluster creation. For adding a new instance group, specify an IAM role you want to attach."
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-operate-slurm-cli-command.html). So ``plan``
blocks on each existing login or compute group that would move off the shared role (``instance_groups[].
execution_role``, policy refused, rule UPD-REFUSED), ``execution_role: controller`` keeps such a group on it
until it is replaced, and given the deployed cluster's roles (``deployed_roles``, which the bundled app reads at
synth) :func:`keep_deployed` does so itself (:mod:`hyperpod_cdk.deployed.roles`; docs/execution-roles.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Annotations, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_cdk.constructs.execution_role import NodeExecutionRole
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.deployed.roles import kept_roles, role_mismatches
from hyperpod_cdk.model import InstanceGroup, NodeRole
from training_runtime.problems import errors, warnings

CONTROLLER_ROLE_ID = "ExecutionRole"
"""The controller's role's construct ID: the shared role's before roles per group (its logical ID is kept)."""


def group_role_id(group: InstanceGroup) -> str:
    """``ExecutionRole-<group name>``: the construct ID of a login or compute group's own role. The group's name as
    given (construct IDs may hold hyphens; CDK's logical ID adds a hash of the path), so ``gpu-1`` and ``gpu1``
    never collide, and renaming a group is a new group (its new role) as it is for HyperPod."""
    return f"{CONTROLLER_ROLE_ID}-{group.name}"


def keep_deployed(
    scope: Construct,
    instance_groups: Sequence[InstanceGroup],
    deployed_roles: Mapping[str, str] | None,
    role: iam.IRole | None,
) -> tuple[InstanceGroup, ...]:
    """``instance_groups`` with each group the deployed cluster has (``deployed_roles``: its ExecutionRole ARN by
    group name) kept on its deployed role (:func:`hyperpod_cdk.deployed.roles.kept_roles`; a warning annotation on
    ``scope`` for each group put on the controller's role); an error when the template would change a deployed
    group's role, ``role`` (one for every group) included when its ARN is known at synth."""
    subject = f"HyperPodCluster {scope.node.path}"
    if role is not None:
        if not Token.is_unresolved(role.role_arn):
            raise_if_any(subject, role_mismatches(instance_groups, deployed_roles, role.role_arn))
        return tuple(instance_groups)
    kept, problems = kept_roles(instance_groups, deployed_roles)
    raise_if_any(subject, errors(problems))
    for warning in warnings(problems):
        Annotations.of(scope).add_warning_v2(f"hyperpod-cdk:{warning.rule}", str(warning))
    return tuple(kept)


def execution_roles(
    scope: Construct,
    *,
    role: iam.IRole | None,
    instance_groups: Sequence[InstanceGroup],
    subnet_ids: Sequence[str],
    security_group_ids: Sequence[str],
    cluster_name: str,
) -> dict[str, iam.IRole]:
    """Each group's execution role by group name: ``role`` for every group when given (yours, shared); else the
    controller's :class:`NodeExecutionRole` for the controller group and the groups with ``execution_role:
    controller``, and a role of its own for every other group."""
    if role is not None:
        return {g.name: role for g in instance_groups}
    controller = [g for g in instance_groups if g.role == NodeRole.CONTROLLER]
    sharing = [g for g in instance_groups if g.shares_controller_role]

    def make(id: str, groups: Sequence[InstanceGroup]) -> NodeExecutionRole:
        return NodeExecutionRole(
            scope,
            id,
            subnet_ids=subnet_ids,
            security_group_ids=security_group_ids,
            instance_groups=groups,
            cluster_name=cluster_name,
        )

    controller_role = make(CONTROLLER_ROLE_ID, [*controller, *sharing])
    roles: dict[str, iam.IRole] = {}
    for group in instance_groups:
        if group.role == NodeRole.CONTROLLER or group.shares_controller_role:
            roles[group.name] = controller_role
        else:
            roles[group.name] = make(group_role_id(group), [group])
    return roles


def distinct(roles: Mapping[str, iam.IRole]) -> list[iam.IRole]:
    """The roles of ``roles``, each once, in group order."""
    found: list[iam.IRole] = []
    for role in roles.values():
        if not any(role is seen for seen in found):
            found.append(role)
    return found
