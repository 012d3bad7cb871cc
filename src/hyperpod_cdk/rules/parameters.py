"""Rules on the launch choices (the ``parameters`` section): each names something the config has, lists
the config's own value, and every value it allows passes the other rules when put into the config.

The last is checked by running the whole rule registry again with each allowed value substituted (and
once with every parameterized group at its largest choice, for the subnet's room), so a template's
constraints can never allow what ``validate`` rejects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from hyperpod_cdk.model import InstanceGroup
from hyperpod_cdk.rules.network import addresses_per_instance
from hyperpod_cdk.rules.registry import REGISTRY, SECTIONS, run
from hyperpod_cdk.rules.repositories import (
    BUCKET_NAME_START,
    S3_PREFIX_PARAMETER,
    bucket_name_problem,
    prefix_default,
)
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import ERROR, WARNING, Problem

rule = REGISTRY.rule
ROOT = "parameters"
ALL = tuple(s for s in SECTIONS if s != "parameters")
"""What a choice is judged against: every other section (the whole config)."""


def _groups(view: ClusterView) -> dict[str, tuple[int, InstanceGroup]]:
    return {g.name: (i, g) for i, g in enumerate(view.groups)}


@rule(
    "PAR-TARGET",
    "parameters",
    "parameters.{instance_groups,data_repositories}.<name>, parameters.storage_capacity_gib",
    needs=("instance_groups", "storage"),
    source="hyperpod-cdk (a parameter replaces one value of the config)",
)
def targets(view: ClusterView) -> Iterator[Problem]:
    """A choice names an instance group, a data repository with an existing bucket, or a new file system."""
    choices = view.parameters
    if choices is None:
        return
    groups = _groups(view)
    for name in choices.instance_groups:
        if name not in groups:
            yield Problem(
                f"{ROOT}.instance_groups.{name}",
                "no instance group has this name",
                fix="use one of " + ", ".join(groups),
            )
    storage = view.storage
    if choices.storage_capacity_gib is not None and (storage is None or storage.existing is not None):
        yield Problem(
            f"{ROOT}.storage_capacity_gib",
            "only a new file system has a capacity to choose (storage is null or adopts an existing one)",
            fix="remove it",
        )
    repositories = {r.name: r for r in (storage.data_repositories if storage is not None else [])}
    for name, chosen in choices.data_repositories.items():
        repository = repositories.get(name)
        if repository is None:
            yield Problem(
                f"{ROOT}.data_repositories.{name}",
                "no data repository has this name",
                fix="use one of " + (", ".join(repositories) or "the names under storage.data_repositories"),
            )
        elif repository.bucket_name is None and (chosen.bucket_name or chosen.bucket_prefix):
            yield Problem(
                f"{ROOT}.data_repositories.{name}",
                "its bucket is created by the template (no bucket_name), so it cannot be chosen at launch",
                fix="set storage.data_repositories bucket_name to an existing bucket, or remove this choice",
            )


@rule(
    "PAR-DEFAULT",
    "parameters",
    "parameters.instance_groups.<name>.{count,instance_types,capacity}, parameters.storage_capacity_gib, "
    "storage.data_repositories[*].bucket_prefix",
    needs=("instance_groups", "storage"),
    source="AWS CloudFormation parameters (Default within the constraints)",
)
def defaults(view: ClusterView) -> Iterator[Problem]:
    """The config's value is the default: in the count range, listed (once each), a prefix in the parameter's form."""
    choices = view.parameters
    if choices is None:
        return
    groups = _groups(view)
    for name, chosen in choices.instance_groups.items():
        if name not in groups:
            continue
        index, group = groups[name]
        where = f"{ROOT}.instance_groups.{name}"
        if chosen.count is not None:
            low, high = chosen.count.min, chosen.count.max
            if not low <= group.count <= high:
                yield Problem(
                    f"{where}.count",
                    f"the range must hold instance_groups[{index}].count {group.count} (the default), with min <= max",
                    got={"min": low, "max": high},
                )
        if chosen.instance_types is not None and not group.flexible:  # flexible: GRP-FLEX-PARAMETER
            yield from _listed(f"{where}.instance_types", chosen.instance_types, group.instance_type, "instance_type")
        if chosen.capacity is not None and group.capacity is None:
            yield Problem(
                f"{where}.capacity",
                f"instance_groups[{index}].capacity is the parameter's default, and it is not set",
                fix=f"set instance_groups[{index}].capacity to one of " + ", ".join(str(c) for c in chosen.capacity),
            )
        elif chosen.capacity is not None:
            yield from _listed(f"{where}.capacity", [str(c) for c in chosen.capacity], str(group.capacity), "capacity")
    storage = view.storage
    if choices.storage_capacity_gib is not None and storage is not None and storage.existing is None:
        yield from _listed(
            f"{ROOT}.storage_capacity_gib",
            choices.storage_capacity_gib,
            storage.storage_capacity_gib,
            "storage.storage_capacity_gib",
        )
    repositories = {r.name: (i, r) for i, r in enumerate(storage.data_repositories if storage is not None else [])}
    for name, chosen_repository in choices.data_repositories.items():
        found = repositories.get(name)
        if found is None or not chosen_repository.bucket_prefix:
            continue
        index, repository = found
        if not S3_PREFIX_PARAMETER.fullmatch(prefix_default(repository.bucket_prefix)):
            yield Problem(
                f"storage.data_repositories[{index}].bucket_prefix",
                "a prefix chosen at launch has S3-safe segments separated by single '/' (its default is this one)",
                got=repository.bucket_prefix,
                fix="remove the empty segments ('//')",
            )


@rule(
    "PAR-BUCKET-SCOPE",
    "parameters",
    "parameters.data_repositories.<name>.{bucket_name,bucket_name_prefix}",
    needs=("storage",),
    suppressible=True,
    source="hyperpod-cdk (security review M7: a launch that links any bucket of the account)",
)
def bucket_scope(view: ClusterView) -> Iterator[Problem]:
    """A bucket chosen at launch is limited to a team's name prefix or to a list that holds the config's bucket,
    never any bucket of the account (its objects would become readable by every cluster user)."""
    choices = view.parameters
    if choices is None:
        return
    storage = view.storage
    repositories = {r.name: (i, r) for i, r in enumerate(storage.data_repositories if storage is not None else [])}
    for name, chosen in choices.data_repositories.items():
        found = repositories.get(name)
        if found is None or found[1].bucket_name is None:
            continue  # PAR-TARGET
        index, repository = found
        where = f"{ROOT}.data_repositories.{name}"
        default_field = f"storage.data_repositories[{index}].bucket_name"
        start = chosen.bucket_name_prefix
        if isinstance(chosen.bucket_name, list):
            yield from _listed(f"{where}.bucket_name", chosen.bucket_name, repository.bucket_name, default_field)
            for position, bucket in enumerate(chosen.bucket_name):
                problem = bucket_name_problem(bucket)
                if problem:
                    yield Problem(f"{where}.bucket_name[{position}]", problem, got=bucket)
        elif chosen.bucket_name and start is None:
            yield Problem(
                f"{where}.bucket_name",
                "true lets whoever launches the template link any bucket of the account into the file system, "
                "where every cluster user can read its objects",
                fix="set bucket_name_prefix to the team's bucket-name prefix (e.g. 'team-a-'), or list the buckets "
                "a launch may choose (bucket_name: [..., ...])",
            )
        if start is None:
            continue
        if chosen.bucket_name is not True:
            yield Problem(
                f"{where}.bucket_name_prefix",
                "applies to bucket_name: true (a list names its buckets already)",
                got=start,
                fix="remove it, or set bucket_name: true",
            )
        elif not BUCKET_NAME_START.match(start):
            yield Problem(
                f"{where}.bucket_name_prefix",
                "the start of a bucket name: 1-40 lower-case letters, digits, dots and hyphens, the first a letter "
                "or digit",
                got=start,
            )
        elif view.concrete(repository.bucket_name) and not str(repository.bucket_name).startswith(start):
            yield Problem(
                default_field,
                f"the parameter's default must start with bucket_name_prefix {start!r}",
                got=repository.bucket_name,
                fix=f"use a bucket whose name starts with {start!r}, or change the prefix",
            )


def _listed(where: str, allowed: list[Any], default: Any, field: str) -> Iterator[Problem]:
    if not allowed:
        yield Problem(where, "an empty list allows nothing", fix=f"list at least {field}'s value {default!r}")
    elif default not in allowed:
        yield Problem(
            where,
            f"must include {field}'s value {default!r} (the parameter's default)",
            got=allowed,
            fix=f"add {default!r}",
        )
    if len(set(allowed)) != len(allowed):
        yield Problem(where, "list each value once", got=allowed)


@rule(
    "PAR-CHOICE",
    "parameters",
    "parameters.*",
    needs=(*ALL, "hardware", "region"),
    source="hyperpod-cdk (every rule, with the allowed value substituted)",
)
def choices_pass(view: ClusterView) -> Iterator[Problem]:
    """Every allowed value passes every rule when substituted into the config (and all groups at their largest)."""
    yield from (p for p in _choice_problems(view) if p.level == ERROR)


@rule(
    "PAR-CHOICE-WARNING",
    "parameters",
    "parameters.*",
    needs=(*ALL, "hardware", "region"),
    level=WARNING,
    source="hyperpod-cdk (every rule, with the allowed value substituted)",
)
def choices_warn(view: ClusterView) -> Iterator[Problem]:
    """An allowed value that draws a warning when substituted (e.g. a GPUDirect Storage type with non-EFA FSx)."""
    yield from (p for p in _choice_problems(view) if p.level == WARNING)


def _choice_problems(view: ClusterView) -> list[Problem]:
    """What each choice adds to the config's own problems, reported at the choice's path."""
    choices = view.parameters
    if choices is None:
        return []
    plain = dataclasses.replace(view, parameters=None, previous=None)
    baseline = set(run(plain))
    found: list[Problem] = []
    reported: set[tuple[str, str]] = set()

    def substitute(where: str, value: Any, **changes: Any) -> None:
        """Run every rule with ``changes``; report what the baseline does not have at ``where``."""
        combined = where == ROOT + ".instance_groups"
        for inner in run(dataclasses.replace(plain, **changes)):
            if inner in baseline or (combined and (inner.rule, inner.path) in reported):
                continue
            reported.add((inner.rule, inner.path))
            text = str(inner).partition(". Fix: ")[0]
            parts: dict[str, Any] = {
                "fix": "drop the choice" + (f", or change the config: {inner.fix}" if inner.fix else ""),
                "rule": "PAR-CHOICE" if inner.level == ERROR else "PAR-CHOICE-WARNING",
                "level": inner.level,
            }
            if combined:
                found.append(Problem(where, f"with {value}, {text} ({inner.rule})", **parts))
            else:
                found.append(Problem(where, f"with this choice, {text} ({inner.rule})", got=value, **parts))

    groups = _groups(view)
    largest: dict[int, InstanceGroup] = {}
    for name, chosen in choices.instance_groups.items():
        if name not in groups:
            continue
        index, group = groups[name]
        where = f"{ROOT}.instance_groups.{name}"

        def with_group(changed: InstanceGroup, at: int = index) -> tuple[InstanceGroup, ...]:
            return tuple(changed if i == at else g for i, g in enumerate(plain.groups))

        for position, instance_type in enumerate([] if group.flexible else chosen.instance_types or []):
            if instance_type != group.instance_type:
                changed = dataclasses.replace(group, instance_type=instance_type)
                substitute(f"{where}.instance_types[{position}]", instance_type, groups=with_group(changed))
        for position, allowed in enumerate(chosen.capacity or []):
            if group.capacity is not None and allowed != group.capacity:
                changed = dataclasses.replace(group, capacity=allowed)
                substitute(f"{where}.capacity[{position}]", str(allowed), groups=with_group(changed))
        if chosen.count is not None:
            for bound in ("min", "max"):
                count = getattr(chosen.count, bound)
                if count != group.count:
                    changed = dataclasses.replace(group, count=count)
                    substitute(f"{where}.count.{bound}", count, groups=with_group(changed))
        largest[index] = dataclasses.replace(
            group,
            count=chosen.count.max if chosen.count is not None else group.count,
            instance_type=group.instance_type
            if group.flexible
            else max(chosen.instance_types or group.types, key=lambda t: _addresses(view, t)),
        )
    if largest:
        biggest = tuple(largest.get(i, g) for i, g in enumerate(plain.groups))
        shown = "; ".join(f"{g.name}: {g.count} x {' or '.join(g.types)}" for g in largest.values())
        substitute(ROOT + ".instance_groups", f"every group at its largest choice ({shown})", groups=biggest)
    storage = view.storage
    if choices.storage_capacity_gib is not None and storage is not None and storage.existing is None:
        for position, capacity in enumerate(choices.storage_capacity_gib):
            if capacity != storage.storage_capacity_gib:
                changed_storage = storage.model_copy(update={"storage_capacity_gib": capacity})
                substitute(f"{ROOT}.storage_capacity_gib[{position}]", capacity, storage=changed_storage)
    return found


def _addresses(view: ClusterView, instance_type: str) -> int:
    """Subnet addresses one node of this type takes (the subnet-capacity rule's figure)."""
    hardware = view.hardware(instance_type)
    return addresses_per_instance(hardware.efa_interfaces if hardware else 0)
