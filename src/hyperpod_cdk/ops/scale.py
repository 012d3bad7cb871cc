"""``scale``: one instance group's count through UpdateCluster, without drifting from the CDK stack.

A cluster deployed by a CloudFormation stack (its tags include ``aws:cloudformation:stack-name``, or the
caller names the config with ``--config``) has its counts in the stack: an UpdateCluster from here lasts only
until the next deploy that touches the cluster, which sends the template's count again. So for such a
cluster the command refuses, names the exact config change and validates it offline; ``--allow-drift``
scales now anyway and names the same change, to make before the next deploy.

A group the scaler grows and shrinks is different: a deploy keeps the deployed count of such a group
(docs/scaler-cloudformation.md), so ``scale`` sets it without drift, but only inside ``min..max``, and says that the
scaler moves it on (it adds nodes for waiting jobs and deletes nodes idle for ``idle_minutes``). Its bounds are
changed in the config (``scaling.min``/``scaling.max``), then deployed.

Which groups the scaler owns, and their bounds, come from the config when ``--config`` names it (the source of
truth: a group it does not scale is the stack's, whatever the cluster's tags say). Without it they come from the
scaler's heartbeat tag (``hyperpod-cdk:scaler``), which among the cluster's nodes only the controller's execution
role may write (constructs/scaler.py, attached to the controller's role alone: docs/execution-roles.md); a
principal with ``sagemaker:AddTags`` on the cluster can still write it, so ``--config`` is the check to use.
"""

from __future__ import annotations

import argparse
from typing import Any

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.lookup import Cluster, get_cluster
from hyperpod_cdk.ops.render import print_json
from training_runtime.scaler.heartbeat import TAG_KEY, GroupLine, parse_heartbeat

STACK_TAG = "aws:cloudformation:stack-name"
RENAMED = {"MinCount": "MinInstanceCount"}
"""DescribeCluster's group fields whose UpdateCluster name differs."""


def cluster_tags(sagemaker: Any, cluster: Cluster) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=cluster.arn):
        tags.update({str(t.get("Key")): str(t.get("Value")) for t in page.get("Tags", [])})
    return tags


def owning_stack(sagemaker: Any, cluster: Cluster) -> str | None:
    return cluster_tags(sagemaker, cluster).get(STACK_TAG)


def scaled_group(tags: dict[str, str], group: str) -> GroupLine | None:
    """The group's line in the scaler's heartbeat tag; None where no scaler reports the group (or the value is not a
    heartbeat: then the count is treated as the stack's, the safe side)."""
    value = tags.get(TAG_KEY)
    if value is None:
        return None
    try:
        beat = parse_heartbeat(value)
    except ValueError:
        return None
    return next((line for line in beat.groups if line.name == group), None)


def config_scaling(path: str, group: str, target: int) -> GroupLine | None:
    """The group's scaling bounds in the config file: None for a group the config does not scale (or does not
    have: :func:`config_change` names that)."""
    from hyperpod_cdk.core.config import load_file, parse_model
    from hyperpod_cdk.core.errors import ConfigurationError

    try:
        config = parse_model(load_file(path), path)
    except ConfigurationError as error:
        raise OpsError(f"{error} (run `hyperpod-cdk validate {path}` for every finding)", Exit.USAGE) from None
    found = next((g for g in config.instance_groups if g.name == group), None)
    if found is None or found.scaling is None:
        return None
    return GroupLine(group, target, found.scaling.min, found.scaling.max)


def group_specification(sagemaker: Any, group: dict[str, Any], count: int) -> dict[str, Any]:
    """The group as UpdateCluster takes it: DescribeCluster's fields that ClusterInstanceGroupSpecification has."""
    members = sagemaker.meta.service_model.shape_for("ClusterInstanceGroupSpecification").members
    spec = {RENAMED.get(k, k): v for k, v in group.items() if RENAMED.get(k, k) in members}
    spec["InstanceCount"] = count
    return spec


def config_change(path: str | None, group: str, count: int) -> dict[str, Any]:
    """Where the count lives in the cluster config, checked offline with the new count."""
    if path is None:
        return {
            "file": None,
            "path": f"instance_groups[name={group}].count",
            "text": f"in the cluster config, set `count: {count}` on the instance group named {group}, then deploy",
        }
    from hyperpod_cdk.core.config import load_file, parse_config
    from hyperpod_cdk.core.errors import ConfigurationError

    data = load_file(path)
    groups = data.get("instance_groups") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        raise OpsError(
            f"{path}: instance_groups is not in the file (a config that relies on the default groups): "
            f"write them out before scaling group {group}",
            Exit.USAGE,
        )
    index = next((i for i, g in enumerate(groups) if isinstance(g, dict) and g.get("name") == group), None)
    if index is None:
        names = ", ".join(str(g.get("name")) for g in groups if isinstance(g, dict))
        raise OpsError(f"{path}: no instance group named {group} (groups: {names})", Exit.USAGE)
    before = groups[index].get("count")
    groups[index]["count"] = count
    try:
        parse_config(data, path)
    except ConfigurationError as error:
        raise OpsError(f"count {count} does not pass the config's rules: {error}", Exit.USAGE) from None
    return {
        "file": path,
        "path": f"instance_groups[{index}].count",
        "before": before,
        "text": f"{path}: instance_groups[{index}] (name: {group}): count: {before} -> {count}, then deploy",
    }


def scale(args: argparse.Namespace, ctx: OpsContext) -> int:
    if args.count < 0:
        raise OpsError(f"count {args.count}: give 0 or more instances", Exit.USAGE)
    aws = Aws(ctx.session(args.profile, args.region))
    cluster = get_cluster(aws.sagemaker, args.cluster)
    group = cluster.group(args.group)
    tags = cluster_tags(aws.sagemaker, cluster)
    stack = tags.get(STACK_TAG)
    target = int(group.get("TargetCount") or 0)
    bounds = config_scaling(args.config, args.group, target) if args.config else scaled_group(tags, args.group)
    source = "the config" if args.config else "the scaler's heartbeat tag"
    if bounds is not None and not bounds.min <= args.count <= bounds.max:
        raise OpsError(
            f"count {args.count}: the scaler keeps group {args.group} within {bounds.min}..{bounds.max}; give a count "
            f"in that range, or change instance_groups[name={args.group}].scaling.min/max in the config and deploy",
            Exit.USAGE,
        )
    managed = bounds is None and (stack is not None or args.config is not None)
    change = config_change(args.config, args.group, args.count)
    spec = group_specification(aws.sagemaker, group, args.count)
    report: dict[str, Any] = {
        "scaler": None if bounds is None else {"min": bounds.min, "max": bounds.max, "from": source},
        "cluster": cluster.name,
        "group": args.group,
        "from": group.get("TargetCount"),
        "to": args.count,
        "stack": stack,
        "config_change": change,
    }
    if managed and not args.allow_drift:
        owner = f"stack {stack}" if stack else f"the stack deployed from {args.config}"
        if args.json:
            print_json(ctx, {**report, "updated": False, "refused": True, "exit_status": int(Exit.UNSUPPORTED)})
        else:
            ctx.err.print(
                f"not scaling: {owner} owns the count of group {args.group}; the next deploy would set it back.\n"
                f"Change it there instead: {change['text']}.\n"
                "(--allow-drift scales now anyway; make the same change before the next deploy.)"
            )
        return Exit.UNSUPPORTED
    if args.dry_run:
        if args.json:
            print_json(ctx, {**report, "updated": False, "dry_run": True, "UpdateCluster": spec})
        else:
            ctx.out.print(f"Dry run: UpdateCluster {cluster.name} group {args.group} InstanceCount={args.count}")
        return Exit.OK
    aws.sagemaker.update_cluster(ClusterName=cluster.name, InstanceGroups=[spec])
    if args.json:
        print_json(ctx, {**report, "updated": True, "exit_status": 0})
        return Exit.OK
    ctx.out.print(
        f"UpdateCluster accepted: group {args.group} of {cluster.name}: {group.get('TargetCount')} -> {args.count}; "
        f"follow it with `hyperpod-cdk wait {cluster.name}`"
    )
    if managed:
        ctx.out.print(f"[yellow]Keep the stack in step:[/yellow] {change['text']}")
    if bounds is not None:
        ctx.out.print(
            f"The scaler owns this count within {bounds.min}..{bounds.max} (from {source}): it adds nodes for waiting "
            "jobs and deletes nodes idle for its idle time; a deploy keeps the deployed count."
        )
    return Exit.OK
