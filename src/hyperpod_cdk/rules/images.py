"""Rules on a group's image and its updates: a custom AMI, the update schedule, automatic patching and the
rolling deployment both use."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_support import api_rule
from hyperpod_cdk.aws_data.inventory import row
from hyperpod_cdk.model import BatchSize, BatchSizeType, InstanceGroup, RollingDeployment
from hyperpod_cdk.rules import cron
from hyperpod_cdk.rules.field_values import scoped_values
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.network import aws_id_pattern, id_format_problem
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

AMI_ID_PATTERN = aws_id_pattern("ami")
SCHEDULE_EXPRESSION_PATTERN = re.compile(
    r"cron\((?:[0-5][0-9]|[0-9]|) (?:[01][0-9]|2[0-3]|[0-9]) (?:[1-9]|0[1-9]|[12][0-9]|3[01]|\?) "
    r"(?:[1-9]|0[1-9]|1[0-2]|\*|\*/(?:[1-9]|1[0-2])|) "
    r"(?:MON|TUE|WED|THU|FRI|SAT|SUN|[1-7]|\?|L|(?:[1-7]#[1-5])|(?:[1-7]L)) (?:20[2-9][0-9]|\*|)\)"
)
"""AWS::SageMaker::Cluster ScheduledUpdateConfig.ScheduleExpression's pattern, as its CloudFormation registry schema
states it (the one cfn-lint bundles: cfn-lint 1.58.0, schema_date 2026-10-20); matched against the whole value."""
MAX_SCHEDULE_LENGTH = 256
MAX_WAIT_INTERVAL_S = 3600
MAX_ROLLBACK_ALARMS = 10
MAX_ALARM_NAME = 256
MAX_PERCENTAGE = 100
DEFAULT_IMAGE = "default"
"""``ImageId: default``: HyperPod's latest image (the API reference accepts ``ami-...`` and ``default``)."""
AUTO_PATCH_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-auto-patching.html"
AMI_UPDATE_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-update.html"

rule = REGISTRY.rule


@api_rule(rule, "image-id", "instance_groups", "instance_groups[*].image_id")
def image_id(view: ClusterView) -> Iterator[Problem]:
    """image_id is a custom AMI's ID (ami- followed by 8 or 17 lower-case hex digits) or default (HyperPod's
    latest image)."""
    for index, group in enumerate(view.groups):
        value = group.image_id
        if value is None or not view.concrete(value) or value == DEFAULT_IMAGE:
            continue
        problem = id_format_problem(group_path(view, index, "image_id"), AMI_ID_PATTERN, value)
        if problem:
            yield problem


@api_rule(rule, "auto-patch", "instance_groups", "instance_groups[*].auto_patch")
def auto_patch_slurm(view: ClusterView) -> Iterator[Problem]:
    """auto_patch (AutoPatchConfig) is refused: AWS documents automatic patching for EKS clusters only."""
    for where, _ in scoped_values(view, "auto-patch"):
        yield Problem(
            where,
            'AWS documents auto-patching for EKS clusters only ("Auto-patching is available only for HyperPod '
            f"Amazon EKS clusters\", {AUTO_PATCH_DOC}); HyperPod's Slurm clusters update their AMI otherwise",
            got="set",
            fix="remove auto_patch; roll AMI updates out with scheduled_update, or run UpdateClusterSoftware",
        )


@rule(
    "GRP-UPDATE-SCHEDULE",
    "instance_groups",
    "instance_groups[*].scheduled_update.schedule_expression",
    source="AWS::SageMaker::Cluster ScheduledUpdateConfig.ScheduleExpression (pattern, 1-256 characters); "
    + AMI_UPDATE_DOC
    + " (Cron expressions)",
)
def update_schedule(view: ClusterView) -> Iterator[Problem]:
    """The update schedule is cron(minute hour day-of-month month day-of-week year), all six given, the year not past.

    HyperPod's pattern holds the values and wildcards; AWS's field table adds that every field is given and that the
    year runs from the current one."""
    for index, group in enumerate(view.groups):
        update = group.scheduled_update
        if update is None or not view.concrete(update.schedule_expression):
            continue
        value = update.schedule_expression
        where = group_path(view, index, "scheduled_update.schedule_expression")
        if len(value) > MAX_SCHEDULE_LENGTH or not SCHEDULE_EXPRESSION_PATTERN.fullmatch(value):
            yield Problem(
                where,
                "expected cron(minute hour day-of-month month day-of-week year), one value per field, e.g. "
                "cron(0 3 ? * SUN *) for Sundays at 03:00 UTC; ranges, lists and '*' for minutes or hours are not "
                "accepted",
                got=value,
            )
            continue
        schedule = cron.parse(value)
        if schedule.empty:
            quote = row("ami-update-cron-six-fields")
            yield Problem(
                where,
                f'{" and ".join(schedule.empty)} left empty; AWS: "{quote.quote}" ({quote.url})',
                got=value,
                fix="give every field: '*' for every month or year, e.g. cron(0 3 ? * SUN *)",
            )
        elif schedule.year is not None and schedule.year < cron.today().year:
            quote = row("ami-update-cron-fields")
            yield Problem(
                where,
                f"the year {schedule.year} is past: AWS's field table allows the current year to {cron.YEAR_MAX} "
                f"({quote.url}); the schedule would never run",
                got=value,
                fix="give a year from this one on, or '*' for every year",
            )


SCHEDULE_BUFFER_MINUTES = 60
"""How far apart two groups' schedules should fire. AWS gives no figure ("we recommend that you have a time buffer
in between schedules"); an hour is hyperpod-cdk's choice, a floor rather than how long an update takes."""


@rule(
    "GRP-UPDATE-SCHEDULE-BUFFER",
    "instance_groups",
    "instance_groups[*].scheduled_update.schedule_expression",
    level=WARNING,
    source=AMI_UPDATE_DOC,
)
def update_schedule_buffer(view: ClusterView) -> Iterator[Problem]:
    """Two groups' update schedules fire at least an hour apart (AWS: a time buffer between schedules).

    Overlapping updates might fail; AWS gives no length, the hour is hyperpod-cdk's floor."""
    schedules = []
    for index, group in enumerate(view.groups):
        update = group.scheduled_update
        value = None if update is None else update.schedule_expression
        if value is not None and view.concrete(value) and SCHEDULE_EXPRESSION_PATTERN.fullmatch(value):
            schedules.append((index, group.name, value, cron.parse(value)))
    for later, (index, _name, value, schedule) in enumerate(schedules):
        for _, other, _value, earlier in schedules[:later]:
            found = cron.closest(earlier, schedule, SCHEDULE_BUFFER_MINUTES)
            if found is None:
                continue
            gap, day = found
            quote = row("ami-update-schedules-buffer")
            when = "at the same minute as" if gap == 0 else f"{abs(gap)} minutes {'after' if gap > 0 else 'before'}"
            yield Problem(
                group_path(view, index, "scheduled_update.schedule_expression"),
                f"fires {when} the schedule of group {other!r} (e.g. on {day.isoformat()}, UTC); "
                f'AWS: "{quote.quote}" ({quote.url})',
                got=value,
                fix=f"move one of the two schedules at least {SCHEDULE_BUFFER_MINUTES} minutes (or a day) away from "
                "the other",
            )
            break


def _deployments(view: ClusterView) -> Iterator[tuple[str, InstanceGroup, RollingDeployment]]:
    """Each rolling deployment with its field path: a scheduled update's and automatic patching's."""
    for index, group in enumerate(view.groups):
        for field, setting in (("scheduled_update", group.scheduled_update), ("auto_patch", group.auto_patch)):
            if setting is not None and setting.deployment is not None:
                yield group_path(view, index, f"{field}.deployment"), group, setting.deployment


def _batch_problems(where: str, batch: BatchSize, group: InstanceGroup, view: ClusterView) -> Iterator[Problem]:
    if batch.value < 1:
        yield Problem(where + ".value", "at least 1", got=batch.value)
    elif batch.type == BatchSizeType.CAPACITY_PERCENTAGE and batch.value > MAX_PERCENTAGE:
        yield Problem(where + ".value", f"a percentage is 1 to {MAX_PERCENTAGE}", got=batch.value)
    elif batch.type == BatchSizeType.INSTANCE_COUNT and view.concrete(group.count) and batch.value > group.count:
        yield Problem(
            where + ".value",
            f"more instances than the group's count {group.count}",
            got=batch.value,
            fix=f"use at most {group.count}, or CAPACITY_PERCENTAGE",
        )


@rule(
    "GRP-UPDATE-BATCH",
    "instance_groups",
    "instance_groups[*].{scheduled_update,auto_patch}.deployment.{maximum_batch_size,rollback_maximum_batch_size}",
    source="AWS::SageMaker::Cluster RollingUpdatePolicy, CapacitySizeConfig (Value >= 1)",
)
def update_batch(view: ClusterView) -> Iterator[Problem]:
    """A batch is at least 1: a count at most the group's count, a percentage at most 100; rollback needs a batch."""
    for where, group, deployment in _deployments(view):
        for field in ("maximum_batch_size", "rollback_maximum_batch_size"):
            batch = getattr(deployment, field)
            if batch is not None:
                yield from _batch_problems(f"{where}.{field}", batch, group, view)
        if deployment.rollback_maximum_batch_size is not None and deployment.maximum_batch_size is None:
            yield Problem(
                f"{where}.rollback_maximum_batch_size",
                "needs maximum_batch_size (HyperPod's rolling update policy requires it)",
                fix="add maximum_batch_size",
            )


@rule(
    "GRP-UPDATE-DEPLOYMENT",
    "instance_groups",
    "instance_groups[*].{scheduled_update,auto_patch}.deployment.{wait_interval_s,rollback_alarms}",
    source="AWS::SageMaker::Cluster DeploymentConfig (WaitIntervalInSeconds 0-3600; 1-10 alarms); " + AUTO_PATCH_DOC,
)
def update_deployment(view: ClusterView) -> Iterator[Problem]:
    """A rolling update or patch waits 0 to 3600 s between batches and watches 1 to 10 CloudWatch alarms by name."""
    for where, _group, deployment in _deployments(view):
        wait = deployment.wait_interval_s
        if wait is not None and not 0 <= wait <= MAX_WAIT_INTERVAL_S:
            yield Problem(f"{where}.wait_interval_s", f"allowed: 0 to {MAX_WAIT_INTERVAL_S} seconds", got=wait)
        alarms = list(deployment.rollback_alarms)
        if len(alarms) > MAX_ROLLBACK_ALARMS:
            yield Problem(f"{where}.rollback_alarms", f"at most {MAX_ROLLBACK_ALARMS} alarms", got=len(alarms))
        for number, name in enumerate(alarms):
            if not name.strip() or len(name) > MAX_ALARM_NAME:
                yield Problem(
                    f"{where}.rollback_alarms[{number}]",
                    f"a CloudWatch alarm name: 1-{MAX_ALARM_NAME} characters, not blank",
                    got=name,
                )


BATCHES_EKS_ONLY = (
    "Updating your cluster in batches is available only for HyperPod clusters integrated with Amazon EKS."
)
"""The AMI update page's note (sagemaker-hyperpod-ami-update, read 2026-11-29)."""


@api_rule(rule, "scheduled-update-batches", "instance_groups", "instance_groups[*].scheduled_update.deployment")
def update_batches_slurm(view: ClusterView) -> Iterator[Problem]:
    """scheduled_update.deployment (batches, wait interval, rollback alarms) is refused: AWS documents updates in
    batches for EKS clusters only; a Slurm group's update re-images all of its nodes."""
    for where, _ in scoped_values(view, "scheduled-update-batches"):
        yield Problem(
            where,
            f'AWS documents updates in batches for EKS clusters only ("{BATCHES_EKS_ONLY}", {AMI_UPDATE_DOC}); '
            "on Slurm an update re-images every node of the group",
            got="set",
            fix="remove scheduled_update.deployment (the schedule alone updates the whole group); to roll an "
            "update through a Slurm cluster with drained nodes, run `hyperpod-cdk update-software` group by group "
            "(docs/operations.md, Rolling software updates)",
        )
