"""Online rules on what the stack uses but does not create: KMS keys, the accounting secret, custom AMIs, the
permission boundary and the Prometheus workspace."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from hyperpod_cdk.core.accounting import (
    ACCOUNTING_DATABASE_API,
    EXTERNAL_ACCOUNTING_DOC,
    external_database,
    slurmdbd_owner,
)
from hyperpod_cdk.preflight import lookups
from hyperpod_cdk.preflight.account import Account
from hyperpod_cdk.preflight.online import online_rule
from hyperpod_cdk.preflight.resource_checks import each_resource
from hyperpod_cdk.rules.groups import group_path
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.params import SLURMDBD_BY_HYPERPOD
from training_runtime.problems import WARNING, Problem

KMS_ROOT_DOC = (
    "https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html "
    "(Allows access to the AWS account and enables IAM policies)"
)
CUSTOM_AMI_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-custom-ami-cluster-management.html"
HYPERPOD_SECRET_KEYS = ("username", "password")
"""The keys we expect in a secret HyperPod reads. AWS's API reference says only that the secret "contains the user
name and password"; these names are the RDS-managed-secret convention (unconfirmed), so a miss is a warning."""


def key_problems(account: Account, where: str, key: str) -> Iterator[Problem]:
    """A customer-managed key exists, is enabled, and its policy lets IAM policies in the account grant its use."""
    found = lookups.kms_key(account, key)
    if found is None:
        yield Problem(where, f"no such KMS key in {account.region}", got=key, fix="check the key ARN and Region")
        return
    if found.get("KeyState") != "Enabled":
        yield Problem(
            where,
            f"the key is {found.get('KeyState')}: every encrypt and decrypt with it fails",
            got=key,
            fix="enable the key (or cancel its deletion), or use another",
        )
    if found.get("KeyManager") == "AWS":
        return  # an AWS managed key's policy is AWS's
    owner = str(found.get("AWSAccountId", ""))
    if not _delegates(lookups.kms_policy(account, key), owner):
        yield Problem(
            where,
            f"the key policy does not let IAM policies in account {owner} grant the key, so the roles the stack "
            "creates cannot use it",
            got=key,
            fix=f'add the statement {{"Effect": "Allow", "Principal": {{"AWS": "arn:aws:iam::{owner}:root"}}, '
            '"Action": "kms:*", "Resource": "*"} to the key policy',
        )


def _delegates(policy: dict[str, Any], owner: str) -> bool:
    roots = {owner, f"arn:aws:iam::{owner}:root"}
    for statement in policy.get("Statement", []):
        if statement.get("Effect") != "Allow" or statement.get("Condition"):
            continue
        principal = statement.get("Principal", {})
        principals = principal.get("AWS", []) if isinstance(principal, dict) else principal
        principals = [principals] if isinstance(principals, str) else principals
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if roots & set(principals) and ("kms:*" in actions or "*" in actions):
            return True
    return False


@online_rule(
    "AWS-KMS",
    "organization",
    "organization.kms_key_arn, instance_groups[*].volume_kms_key_arn",
    actions=("kms:DescribeKey", "kms:GetKeyPolicy"),
    needs=("instance_groups",),
    source=f"AWS KMS API DescribeKey, GetKeyPolicy; {KMS_ROOT_DOC}",
)
def kms_keys(view: ClusterView) -> Iterator[Problem]:
    """Customer-managed keys exist, are enabled, and their policies let the account's IAM policies grant them."""
    keys = []
    if view.organization is not None and view.organization.kms_key_arn:
        keys.append((view.path("organization", "kms_key_arn"), view.organization.kms_key_arn))
    for index, group in enumerate(view.groups):
        if view.concrete(group.volume_kms_key_arn):
            keys.append((group_path(view, index, "volume_kms_key_arn"), str(group.volume_kms_key_arn)))
    yield from each_resource(view, keys, key_problems)


@online_rule(
    "AWS-SECRET",
    "runtime",
    "runtime.accounting.password_secret_arn",
    actions=("secretsmanager:DescribeSecret",),
    needs=("cluster",),
    source=f"{ACCOUNTING_DATABASE_API} (SecretArn); Secrets Manager API DescribeSecret",
)
def accounting_secret(view: ClusterView) -> Iterator[Problem]:
    """The external accounting database's secret exists and is not scheduled for deletion."""
    yield from each_resource(view, _secret(view), _secret_problems)


def _secret(view: ClusterView) -> list[tuple[str, str]]:
    """The external accounting database's secret, with its path (none without one)."""
    options = view.runtime_options
    if options is None or not external_database(options.accounting) or not options.accounting.password_secret_arn:
        return []
    return [(view.path("runtime", "accounting.password_secret_arn"), options.accounting.password_secret_arn)]


def _secret_problems(account: Account, where: str, arn: str) -> Iterator[Problem]:
    found = lookups.secret(account, arn)
    if found is None:
        yield Problem(where, f"no such secret in {account.region}", got=arn, fix="create it, or fix the ARN")
    elif found.get("DeletedDate"):
        yield Problem(where, "the secret is scheduled for deletion", got=arn, fix="restore it (RestoreSecret)")


@online_rule(
    "AWS-SECRET-KEYS",
    "runtime",
    "runtime.accounting.password_secret_arn",
    actions=("secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"),
    needs=("cluster",),
    source=f'{ACCOUNTING_DATABASE_API} ("contains the user name and password"); {EXTERNAL_ACCOUNTING_DOC}',
)
def accounting_secret_keys(view: ClusterView) -> Iterator[Problem]:
    """The secret holds what its reader needs: username and password (HyperPod), or a password (the runtime)."""
    options, secret = view.runtime_options, _secret(view)
    if options is None or not secret:
        return
    by_hyperpod = slurmdbd_owner(view.mode, view.node_provisioning_mode, options.accounting) == SLURMDBD_BY_HYPERPOD
    yield from each_resource(view, secret, functools.partial(_secret_key_problems, by_hyperpod))


def _secret_key_problems(by_hyperpod: bool, account: Account, where: str, arn: str) -> Iterator[Problem]:
    if lookups.secret(account, arn) is None:
        return  # AWS-SECRET reports it
    keys = lookups.secret_keys(account, arn)
    if by_hyperpod:
        missing = [k for k in HYPERPOD_SECRET_KEYS if keys is None or k not in keys]
        if missing:
            yield Problem(
                where,
                f"HyperPod reads the database's user name and password from this secret; it has no "
                f"{', '.join(missing)} key (AWS does not name the keys: username and password is the RDS "
                "convention we expect)",
                got=", ".join(keys) if keys else "(not a JSON object)",
                fix='store {"username": ..., "password": ...}',
                level=WARNING,
            )
    elif keys is not None and "password" not in keys:
        yield Problem(
            where,
            "the controller reads the password as the secret's string or its password key; this JSON object has "
            "no password key",
            got=", ".join(keys),
            fix='store the password as the whole string, or as {"password": ...}',
        )


@online_rule(
    "AWS-AMI",
    "instance_groups",
    "instance_groups[*].image_id",
    actions=("ec2:DescribeImages",),
    source=f"{CUSTOM_AMI_DOC}; Amazon EC2 API DescribeImages",
)
def custom_images(view: ClusterView) -> Iterator[Problem]:
    """A custom AMI exists in the Region, is available, belongs to this account and is not encrypted."""
    images = [
        (group_path(view, index, "image_id"), str(group.image_id))
        for index, group in enumerate(view.groups)
        if view.concrete(group.image_id)
    ]
    yield from each_resource(view, images, _image_problems)


def _image_problems(account: Account, where: str, image_id: str) -> Iterator[Problem]:
    found = lookups.image(account, image_id)
    if found is None:
        yield Problem(
            where,
            f"no such AMI visible in {account.region}",
            got=image_id,
            fix=f"copy the AMI to {account.region} (AMIs are per Region), or share it with this account",
        )
        return
    if found.get("State") != "available":
        yield Problem(where, f"the AMI is {found.get('State')}, not available", got=image_id)
    if str(found.get("OwnerId")) != account.account_id:
        yield Problem(
            where,
            f"the AMI belongs to account {found.get('OwnerId')}: HyperPod launches custom AMIs of this account",
            got=image_id,
            fix="copy the AMI into this account (ec2 copy-image)",
        )
    encrypted = [m for m in found.get("BlockDeviceMappings", []) if m.get("Ebs", {}).get("Encrypted")]
    if encrypted:
        yield Problem(
            where,
            f"the AMI's snapshots are encrypted ({', '.join(m['DeviceName'] for m in encrypted)}); HyperPod "
            "cannot launch it with a key it is not granted",
            got=image_id,
            fix="build the custom AMI unencrypted (encrypt the nodes' volumes with volume_kms_key_arn)",
        )
    volumes = [m["DeviceName"] for m in found.get("BlockDeviceMappings", []) if m.get("Ebs", {}).get("SnapshotId")]
    if len(volumes) > 1:
        yield Problem(
            where,
            f"the AMI has {len(volumes)} snapshot volumes ({', '.join(volumes)}); HyperPod supports only the primary "
            "AMI snapshot volume (API reference, ClusterInstanceGroupSpecification ImageId)",
            got=image_id,
            fix="build the custom AMI with its root volume only (ebs_volume_gib adds a data volume)",
        )


@online_rule(
    "AWS-BOUNDARY",
    "organization",
    "organization.permission_boundary_arn",
    actions=("iam:GetPolicy",),
    source="IAM API GetPolicy; IAM user guide: permissions boundaries",
)
def boundary_exists(view: ClusterView) -> Iterator[Problem]:
    """The permission boundary is an existing managed policy (every role the stack creates would fail without it)."""
    org = view.organization
    if org is None or not org.permission_boundary_arn:
        return
    listed = [(view.path("organization", "permission_boundary_arn"), org.permission_boundary_arn)]
    yield from each_resource(view, listed, _boundary_problems)


def _boundary_problems(account: Account, where: str, arn: str) -> Iterator[Problem]:
    if lookups.managed_policy(account, arn) is None:
        yield Problem(where, "no such managed policy", got=arn, fix="create it, or fix the ARN")


@online_rule(
    "AWS-WORKSPACE",
    "observability",
    "observability.workspace_arn",
    actions=("aps:DescribeWorkspace",),
    source="Amazon Managed Service for Prometheus API DescribeWorkspace",
)
def workspace_exists(view: ClusterView) -> Iterator[Problem]:
    """An existing Prometheus workspace exists in the Region and is active."""
    obs = view.observability
    if obs is None or not obs.enabled or not obs.workspace_arn:
        return
    yield from each_resource(
        view, [(view.path("observability", "workspace_arn"), obs.workspace_arn)], _workspace_problems
    )


def _workspace_problems(account: Account, where: str, arn: str) -> Iterator[Problem]:
    region = arn.split(":")[3] if arn.count(":") >= 5 else ""
    if region and region != account.region:
        return  # looked up in its own Region it may exist; OBS-WORKSPACE-REGION warns about the distance
    found = lookups.workspace(account, arn.rsplit("/", 1)[-1])
    if found is None:
        yield Problem(where, f"no such workspace in {account.region}", got=arn, fix="fix the ARN, or leave it out")
    elif found.get("status", {}).get("statusCode") not in ("ACTIVE", "UPDATING"):
        yield Problem(where, f"the workspace is {found.get('status', {}).get('statusCode')}", got=arn)
