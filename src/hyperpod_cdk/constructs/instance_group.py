"""Instance groups of a HyperPod Slurm cluster: the value objects and the rules they obey."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

from aws_cdk import Token
from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

from training_runtime.params import COMPUTE, CONTROLLER, LOGIN, GroupSpec, group_problems

MAX_INSTANCE_GROUPS = 100
MAX_INSTANCE_COUNT = 6758
INSTANCE_TYPE_PATTERN = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
TRAINING_PLAN_ARN_PATTERN = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.+$")


class NodeRole(enum.StrEnum):
    """The Slurm role of every node in a group."""

    CONTROLLER = CONTROLLER
    """Runs slurmctld (exactly one group)."""
    LOGIN = LOGIN
    """Where users log in and submit jobs (at most one group)."""
    COMPUTE = COMPUTE
    """Runs slurmd and training jobs; belongs to one partition."""


class DeepHealthCheck(enum.StrEnum):
    """HyperPod's deep health checks, run when nodes start (OnStartDeepHealthChecks)."""

    INSTANCE_STRESS = "InstanceStress"
    INSTANCE_CONNECTIVITY = "InstanceConnectivity"


@dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="forbid"))
class InstanceGroup:
    """One instance group.

    :param name: instance-group name; also the Slurm partition of a compute group unless ``partition``
        is given. Letters, digits and hyphens, 1-63 characters.
    :param instance_type: SageMaker instance type, e.g. ``ml.p5.48xlarge``.
    :param count: number of instances (0-6758; at least 1 for controller and login groups).
    :param role: Slurm role. Default: ``NodeRole.COMPUTE``.
    :param partition: Slurm partition of a compute group. Default: the group's name.
    :param threads_per_core: 1 disables SMT (recommended for training), 2 enables it. Default: 1.
    :param ebs_volume_gib: size of an extra EBS volume mounted at /opt/sagemaker. Default: none.
    :param deep_health_checks: deep health checks to run when nodes start. Default: none.
    :param training_plan_arn: SageMaker training plan that reserves this group's capacity. Default: none.
    """

    name: str
    instance_type: str
    count: int
    role: NodeRole = NodeRole.COMPUTE
    partition: str | None = None
    threads_per_core: int = 1
    ebs_volume_gib: int | None = None
    deep_health_checks: Sequence[DeepHealthCheck] = ()
    training_plan_arn: str | None = None

    @property
    def partition_name(self) -> str | None:
        """The Slurm partition this group's nodes join (compute groups only)."""
        if self.role != NodeRole.COMPUTE:
            return None
        return self.partition or self.name

    def spec(self) -> GroupSpec:
        """This group as the node runtime sees it (the parameters contract)."""
        return GroupSpec(
            self.name, str(self.role), self.instance_type, self.partition_name, threads_per_core=self.threads_per_core
        )


def instance_group_problems(groups: Sequence[InstanceGroup], path: str = "instance_groups") -> list[str]:
    """Every rule on a cluster's instance groups, each problem with its field path."""
    problems: list[str] = []
    if not 1 <= len(groups) <= MAX_INSTANCE_GROUPS:
        problems.append(f"{path}: got {len(groups)} groups; a cluster has 1 to {MAX_INSTANCE_GROUPS}")
    problems += group_problems(
        [GroupSpec(g.name, str(g.role), g.instance_type, g.partition) for g in groups],
        path,
    )
    for index, group in enumerate(groups):
        problems += _single_group_problems(group, f"{path}[{index}]")
    return problems


def _single_group_problems(group: InstanceGroup, where: str) -> list[str]:
    problems: list[str] = []
    if not Token.is_unresolved(group.instance_type) and not INSTANCE_TYPE_PATTERN.match(group.instance_type):
        problems.append(
            f"{where}.instance_type: got {group.instance_type!r}; expected a SageMaker instance type such as "
            "'ml.p5.48xlarge' (note the 'ml.' prefix)"
        )
    minimum = 0 if group.role == NodeRole.COMPUTE else 1
    if not isinstance(group.count, int) or not minimum <= group.count <= MAX_INSTANCE_COUNT:
        problems.append(
            f"{where}.count: got {group.count!r}; a {group.role} group has {minimum} to {MAX_INSTANCE_COUNT} instances"
        )
    if group.threads_per_core not in (1, 2):
        problems.append(f"{where}.threads_per_core: got {group.threads_per_core!r}; allowed: 1 (SMT off) or 2 (SMT on)")
    if group.ebs_volume_gib is not None and not 1 <= group.ebs_volume_gib <= 16384:
        problems.append(f"{where}.ebs_volume_gib: got {group.ebs_volume_gib!r}; allowed: 1 to 16384 GiB")
    checks = [str(c) for c in group.deep_health_checks]
    allowed_checks = [str(c) for c in DeepHealthCheck]
    for check in checks:
        if check not in allowed_checks:
            problems.append(f"{where}.deep_health_checks: got {check!r}; allowed: {', '.join(allowed_checks)}")
    if len(set(checks)) != len(checks):
        problems.append(f"{where}.deep_health_checks: got {checks}; list each check once")
    arn = group.training_plan_arn
    if arn is not None and not Token.is_unresolved(arn) and not TRAINING_PLAN_ARN_PATTERN.match(arn):
        problems.append(
            f"{where}.training_plan_arn: got {arn!r}; expected "
            "'arn:aws:sagemaker:<region>:<account>:training-plan/<name>'"
        )
    return problems
