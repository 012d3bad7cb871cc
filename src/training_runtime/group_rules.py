"""The rules on a cluster's instance groups as a whole (names, roles, partitions), shared by the constructs,
``hyperpod-cdk validate`` and the node, which re-checks the parameters file it reads.
"""

from __future__ import annotations

from typing import Dict, List

from training_runtime.groups import (
    COMPUTE,
    CONTROLLER,
    LOGIN,
    MAX_NAME_LENGTH,
    MAX_PARTITION_LENGTH,
    NAME_PATTERN,
    ROLES,
    GroupSpec,
)
from training_runtime.problems import Problem, RuleBook


def group_problems(groups: List[GroupSpec], path: str) -> List[Problem]:
    """Rules every cluster's groups must satisfy (shared by the constructs and the runtime)."""
    problems: List[Problem] = []

    def add(text: str, rule: str) -> None:
        problems.append(Problem.from_text(text, rule=rule))

    seen: Dict[str, int] = {}
    for index, group in enumerate(groups):
        where = "{}[{}]".format(path, index)
        if not NAME_PATTERN.fullmatch(group.name) or len(group.name) > MAX_NAME_LENGTH:
            add(
                "{}.name: got {!r}; use 1-63 letters, digits and hyphens, starting and ending with a "
                "letter or digit".format(where, group.name),
                "GRP-NAME",
            )
        if group.name in seen:
            add(
                "{}.name: {!r} is already used by {}[{}]; instance-group names must be unique".format(
                    where, group.name, path, seen[group.name]
                ),
                "GRP-UNIQUE",
            )
        seen.setdefault(group.name, index)
        if group.role not in ROLES:
            add("{}.role: got {!r}; allowed: {}".format(where, group.role, ", ".join(ROLES)), "GRP-ROLE")
        if group.partition is not None and group.role != COMPUTE:
            add(
                "{}.partition: got {!r}; only compute groups belong to a partition. Fix: remove it".format(
                    where, group.partition
                ),
                "GRP-PARTITION-ROLE",
            )
        if group.partition is not None and not partition_name_ok(group.partition):
            add(
                "{}.partition: got {!r}; use 1-{} letters, digits and hyphens, starting and ending with a "
                "letter or digit, not 'default' (Slurm reserves it)".format(
                    where, group.partition, MAX_PARTITION_LENGTH
                ),
                "GRP-PARTITION-NAME",
            )
    roles = [g.role for g in groups]
    if roles.count(CONTROLLER) != 1:
        add(
            "{}: found {} controller groups; a Slurm cluster needs exactly one. Fix: give exactly one "
            "group role 'controller'".format(path, roles.count(CONTROLLER)),
            "GRP-CONTROLLER",
        )
    if roles.count(LOGIN) > 1:
        add(
            "{}: found {} login groups; at most one is allowed. Fix: merge them into one group".format(
                path, roles.count(LOGIN)
            ),
            "GRP-LOGIN",
        )
    if roles.count(COMPUTE) < 1:
        add("{}: no compute group; add at least one group with role 'compute'".format(path), "GRP-COMPUTE")
    return problems


def partition_name_ok(name: str) -> bool:
    """A Slurm partition name HyperPod accepts: its pattern, Slurm's length limit, not ``default``."""
    return bool(NAME_PATTERN.fullmatch(name)) and len(name) <= MAX_PARTITION_LENGTH and name.lower() != "default"


GROUP_RULES = RuleBook("instance groups")
"""The rules on the groups as a whole; one pass (:func:`group_problems`) checks them all."""
for _id, _field, _doc, _source in (
    (
        "GRP-NAME",
        "instance_groups[*].name",
        "A group name is 1-63 letters, digits and hyphens.",
        "AWS::SageMaker::Cluster InstanceGroupName",
    ),
    (
        "GRP-UNIQUE",
        "instance_groups[*].name",
        "Group names are unique within the cluster.",
        "SageMaker CreateCluster API",
    ),
    ("GRP-ROLE", "instance_groups[*].role", "A group's role is controller, login or compute.", "hyperpod-cdk"),
    (
        "GRP-PARTITION-ROLE",
        "instance_groups[*].partition",
        "Only compute groups belong to a partition.",
        "HyperPod Slurm configuration (PartitionNames)",
    ),
    (
        "GRP-PARTITION-NAME",
        "instance_groups[*].partition",
        "A partition name follows HyperPod's pattern, has at most 128 characters and is not 'default'.",
        "HyperPod PartitionNames; slurm.conf(5)",
    ),
    (
        "GRP-CONTROLLER",
        "instance_groups",
        "Exactly one group is the Slurm controller.",
        "HyperPod Slurm configuration (NodeType)",
    ),
    (
        "GRP-LOGIN",
        "instance_groups",
        "At most one group is the login group.",
        "HyperPod Slurm configuration (NodeType)",
    ),
    ("GRP-COMPUTE", "instance_groups", "At least one group runs jobs (role compute).", "hyperpod-cdk"),
):
    GROUP_RULES.declare(_id, "instance_groups", _field, _doc, group_problems, source=_source)
