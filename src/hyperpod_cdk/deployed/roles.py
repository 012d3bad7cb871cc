"""A deployed instance group keeps its execution role: what synth reads back, and what the template then gives it.

AWS's guide to UpdateCluster for Slurm clusters
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-operate-slurm-cli-command.html): "For
ExecutionRole [...] For updating an existing instance group, keep using the same IAM role you attached during
cluster creation. For adding a new instance group, specify an IAM role you want to attach." (inventory row
``update-cluster-keep-execution-role``). A cluster deployed before roles per group has one role on every group, the
one whose logical ID the controller's role kept (:data:`hyperpod_cdk.constructs.node_roles.CONTROLLER_ROLE_ID`); a
template that gives its login and compute groups roles of their own would change their ``ExecutionRole``.

So synth reads each deployed group's ``ExecutionRole`` (DescribeCluster, :func:`deployed_roles`; the bundled app
records it in ``cdk.context.json``, :func:`hyperpod_cdk.deployed.synth_context.cached_roles`) and
:func:`kept_roles` decides, per group the cluster already has:

* on the controller's deployed role and ``own`` in the config: put on the controller's role, as ``execution_role:
  controller`` does, with a warning (:data:`RULE`) naming the group, AWS's words and how to move it;
* on a role of its own and ``controller`` in the config: an error (the template would change its role);
* otherwise what the config says (a group of its own stays on its own role, whose logical ID is the group's).

A role given for every group (``HyperPodCluster(role=...)``, an ARN known at synth) must be each deployed group's
(:func:`role_mismatches`). No ``aws_cdk`` import; boto3 only through the client the caller passes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.core.errors import ConfigurationError
from hyperpod_cdk.deployed.scaler_counts import describe_deployed, sagemaker_client
from hyperpod_cdk.model import ExecutionRoleChoice, InstanceGroup, NodeRole
from training_runtime.problems import ERROR, WARNING, Problem

if TYPE_CHECKING:
    from hyperpod_cdk.core.deployment import Deployment

ROLES_CONTEXT = "execution_roles"
"""The app's context key (``-c execution_roles=config``): synthesize with the config's execution roles, without
reading the deployed cluster's, for a template that will not update a running cluster."""
CONFIG_ROLES = "config"
RULE = "GRP-DEPLOYED-ROLE"
KEEP_ROLE_ROW = "update-cluster-keep-execution-role"


def roles_of(described: Mapping[str, Any]) -> dict[str, str]:
    """A ``DescribeCluster`` answer's ``ExecutionRole`` (an ARN) per group."""
    return {
        str(g["InstanceGroupName"]): str(g["ExecutionRole"])
        for g in described.get("InstanceGroups", [])
        if g.get("ExecutionRole")
    }


def deployed_roles(sagemaker: Any, cluster_name: str) -> dict[str, str] | None:
    """Each group's ``ExecutionRole`` in the deployed cluster; None when there is no such cluster. Any other error
    propagates (:func:`hyperpod_cdk.deployed.scaler_counts.describe_deployed`)."""
    described = describe_deployed(sagemaker, cluster_name)
    return None if described is None else roles_of(described)


def roles_for_synth(deployed: Deployment, client: Callable[[], Any] = sagemaker_client) -> dict[str, str] | None:
    """:func:`deployed_roles` of a deployment's cluster; a failed look-up is a :class:`ConfigurationError`
    (:func:`lookup_failed`)."""
    try:
        return deployed_roles(client(), deployed.cluster_name)
    except Exception as error:  # any failure: credentials, access, network; the message names it
        raise lookup_failed(deployed.cluster_name, error) from None


def lookup_failed(cluster_name: str, error: Exception) -> ConfigurationError:
    """The error of a look-up that failed: a synth must not guess, since a template that changes a deployed group's
    role goes against AWS's guide (and the API may refuse it)."""
    return ConfigurationError(
        "cluster configuration",
        [
            Problem(
                "instance_groups[*].execution_role",
                "a deployed group keeps the execution role it has (AWS's guide to UpdateCluster), and DescribeCluster "
                f"on {cluster_name!r} failed: {type(error).__name__}: {error}",
                fix="synthesize with credentials that may call sagemaker:DescribeCluster in the cluster's Region, "
                f"or pass -c {ROLES_CONTEXT}={CONFIG_ROLES} for a template that will not update a running cluster",
                rule=RULE,
            )
        ],
    )


def wrong_account(cluster_name: str, actual: str, expected: str) -> ConfigurationError:
    """The error of credentials of another account than the one the CDK CLI deploys to."""
    return ConfigurationError(
        "cluster configuration",
        [
            Problem(
                "instance_groups[*].execution_role",
                f"the app's AWS credentials are account {actual}'s and the CDK CLI deploys to account {expected}: "
                f"cluster {cluster_name!r} would be looked up in the wrong account, and its groups' roles missed",
                fix="give the app the deploying credentials: AWS_PROFILE=<profile> cdk deploy, not cdk deploy "
                "--profile <profile> (the CDK CLI does not pass --profile on to the app)",
                rule=RULE,
            )
        ],
    )


def _aws() -> str:
    from hyperpod_cdk.aws_data.inventory import row

    found = row(KEEP_ROLE_ROW)
    return f'AWS\'s guide says "{found.quote}" ({found.url})'


def kept_roles(
    groups: Sequence[InstanceGroup], deployed: Mapping[str, str] | None, where: str = "instance_groups"
) -> tuple[list[InstanceGroup], list[Problem]]:
    """``groups`` with each deployed login or compute group on the role it has in the cluster whose groups have the
    ``deployed`` roles (None: no cluster yet), and the problems: a warning for each group put on the controller's
    role, an error for each whose role the template would change. The controller's own role is the one whose
    logical ID the shared role had, so its deployed ARN is the shared role's."""
    controller = next((g for g in groups if g.role == NodeRole.CONTROLLER), None)
    shared = None if deployed is None or controller is None else deployed.get(controller.name)
    if deployed is None or shared is None:
        return list(groups), []
    kept: list[InstanceGroup] = []
    problems: list[Problem] = []
    for index, group in enumerate(groups):
        has = deployed.get(group.name) if group.role != NodeRole.CONTROLLER else None
        path = f"{where}[{index}].execution_role"
        if has == shared and not group.shares_controller_role:
            group = dataclasses.replace(group, execution_role=ExecutionRoleChoice.CONTROLLER)
            problems.append(
                Problem(
                    path,
                    f"group {group.name!r} is deployed on the execution role it shares with the controller ({has}), "
                    f"so it stays there, as execution_role: controller does: {_aws()}. Its jobs and users keep the "
                    "controller's permissions (the scaler's, the accounting secret)",
                    fix=f"to give it a role of its own, add a new group (it gets its own role), move the work, then "
                    f"remove {group.name!r}; set execution_role: controller on it to say so in the config",
                    rule=RULE,
                    level=WARNING,
                )
            )
        elif has is not None and has != shared and group.shares_controller_role:
            problems.append(
                Problem(
                    path,
                    f"group {group.name!r} is deployed on a role of its own ({has}), not the controller's ({shared}): "
                    f"this template would change its ExecutionRole, against AWS's guide: {_aws()}",
                    got=str(group.execution_role),
                    fix="leave execution_role out (own) on the deployed group; for a group on the controller's role, "
                    "add a new group with execution_role: controller and remove this one",
                    rule=RULE,
                )
            )
        kept.append(group)
    return kept, problems


def role_mismatches(
    groups: Sequence[InstanceGroup], deployed: Mapping[str, str] | None, role_arn: str, where: str = "role"
) -> list[Problem]:
    """An error for each deployed group whose role is not ``role_arn``, the role given for every group."""
    problems: list[Problem] = []
    for group in groups:
        has = None if deployed is None else deployed.get(group.name)
        if has is not None and has != role_arn:
            problems.append(
                Problem(
                    where,
                    f"group {group.name!r} is deployed with the execution role {has}: this template would change it to "
                    f"this role, against AWS's guide: {_aws()}",
                    got=role_arn,
                    fix=f"pass the deployed role (iam.Role.from_role_arn(scope, id, {has!r})), or add a new group "
                    f"and remove {group.name!r}",
                    rule=RULE,
                    level=ERROR,
                )
            )
    return problems
