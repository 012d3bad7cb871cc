"""The rules table: for every registered rule, the smallest config that breaks it, the field it names and
the words it uses; each row gives the same verdict through `hyperpod-cdk validate` and through synth."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from hyperpod_cdk import ConfigurationError, TrainingClusterStack, parse_config
from hyperpod_cdk.aws_data.api_support import unconfirmed_rules
from hyperpod_cdk.aws_data.update_policy import GENERIC_RULES
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.rules import all_rules
from hyperpod_cdk.validate import validate_command, validate_file
from support import fast_app

CONTROLLER = {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}
CPU_WORKERS = {"name": "workers", "instance_type": "ml.c5.xlarge", "count": 2}
TRN_WORKERS = {"name": "workers", "instance_type": "ml.trn1.32xlarge", "count": 2}
P4D_WORKERS = {"name": "workers", "instance_type": "ml.p4d.24xlarge", "count": 2}
P5_WORKERS = {"name": "workers", "instance_type": "ml.p5.48xlarge", "count": 2}
FLEX_WORKERS = {"name": "workers", "instance_types": ["ml.c5.xlarge", "ml.c5.2xlarge"], "count": 2}
ULTRA_WORKERS = {"name": "workers", "instance_type": "ml.p6e-gb200.36xlarge", "count": 2}
ULTRA_ZONE = {"availability_zone": "us-east-1-dfw-2a"}
"""The one Local Zone AWS names for UltraServers (GRP-ULTRASERVER-ZONE)."""
TWENTY_ONE_TYPES = [
    *(f"ml.c5.{size}" for size in ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge")),
    *(f"ml.m5.{size}" for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")),
    *(f"ml.c6i.{size}" for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")),
]
LOGIN = {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 1}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ0kXkqj7y1o0n8v2k8yHqRzY2yq8f1m3mJ2b9c3d4e5 alice@laptop"
EXISTING_NET = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnet_id": "subnet-0123456789abcdef0",
    "availability_zone": "us-west-2a",
}
EXISTING_FS = {
    "file_system_id": "fs-0123456789abcdef0",
    "mount_name": "abcdefgh",
    "security_group_id": "sg-0123456789abcdef0",
}


WORKSPACE = "arn:aws:aps:us-west-2:111122223333:workspace/ws-12345678-abcd-1234-abcd-123456789012"
VOLUME_KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd"
SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-db-AbCdEf"
CA_SUM = "0" * 64
CONTINUOUS = {"node_provisioning_mode": "continuous"}
PRICED = {t: {"per_hour": 1.0, "source": "test rate"} for t in ("ml.m5.xlarge", "ml.trn1.32xlarge")}
SCALED = {**CPU_WORKERS, "scaling": {"min": 0, "max": 4}}
PLAN = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/plan-a"
CERTIFICATE = "arn:aws:acm:us-west-2:111122223333:certificate/12345678-1234-1234-1234-123456789012"
PIPELINE = "arn:aws:iam::111122223333:role/pipeline"
REST = {
    "certificate_arn": CERTIFICATE,
    "domain_name": "slurm.example.com",
    "allowed_cidrs": ["10.0.0.0/16"],
    "identities": [{"principal_arn": PIPELINE, "slurm_user": "alice"}],
}


POOL_GROUPS = {"instance_groups": [CONTROLLER, CPU_WORKERS, LOGIN]}


def pool(**fields: Any) -> dict[str, Any]:
    """A valid ``login_pool`` section with ``fields``, and the login group it needs."""
    return {**POOL_GROUPS, "login_pool": fields}


def rest(**fields: Any) -> dict[str, Any]:
    """A valid ``rest_api`` section with ``fields`` replaced."""
    return {"rest_api": {**REST, **fields}}


def external_accounting(host: str = "acct.example.com") -> dict[str, Any]:
    accounting = {"enabled": True, "database": "external", "host": host, "password_secret_arn": SECRET}
    return {"accounting": {**accounting, "ca_bundle_sha256": CA_SUM}}


ZFS_ID = "fs-0123456789abcdef1"
OPENZFS = {
    "existing": {
        "file_system_id": ZFS_ID,
        "dns_name": f"{ZFS_ID}.fsx.us-west-2.amazonaws.com",
        "security_group_id": "sg-0123456789abcdef2",
    },
    "mount_path": "/home",
}


def openzfs(mount_path: str = "/home", **existing: str) -> dict[str, Any]:
    return {"existing": {**OPENZFS["existing"], **existing}, "mount_path": mount_path}


OVERRIDE = {"subnet_ids": ["subnet-0123456789abcdef1"], "security_group_ids": ["sg-0123456789abcdef1"]}


def update(**deployment: Any) -> dict[str, Any]:
    return {"schedule_expression": "cron(0 3 ? * SUN *)", "deployment": deployment}


def groups(*items: dict[str, Any]) -> dict[str, Any]:
    return {"instance_groups": [CONTROLLER, *items]}


def repo(**fields: Any) -> dict[str, Any]:
    return {"name": "data", "file_system_path": "/data", **fields}


@dataclass(frozen=True)
class Row:
    rule: str
    config: dict[str, Any]
    path: str
    words: str
    region: str | None = None
    previous: dict[str, Any] = field(default_factory=dict)
    has_previous: bool = False
    also: frozenset[str] = frozenset()
    """Rules the smallest breaking config cannot help breaking too (a scheduled deployment is refused on Slurm)."""


TEAM_USERS = [{"name": "alice", "uid": 2101}, {"name": "bob", "uid": 2102}]


def row(rule: str, config: dict[str, Any], path: str, words: str, **kw: Any) -> Row:
    """A row; a rule other than an unconfirmed-support warning runs with those warnings accepted, so the smallest
    breaking config (a flexible group, Spot, deep health checks) breaks only the rule it names."""
    if rule not in unconfirmed_rules() and "accept_unconfirmed" not in config:
        config = {**config, "accept_unconfirmed": sorted(unconfirmed_rules())}
    return Row(rule, config, path, words, **kw)


DIRECTORY = {
    "uris": ["ldaps://ldap.corp.example.com"],
    "search_base": "dc=corp,dc=example,dc=com",
    "bind_dn": "cn=reader,dc=corp,dc=example,dc=com",
    "bind_password_secret_arn": "arn:aws:secretsmanager:us-west-2:123456789012:secret:ldap-bind-AbCdEf",
}
GROUP_TEAM = {"name": "vision", "directory_group": "vision-researchers"}

ROWS = [
    # --- cluster
    row("CL-NAME", {"cluster_name": "-bad-"}, "cluster_name", "1-63 letters"),
    row("CL-MOUNT-PATH", {"fsx_mount_path": "/opt/ml/fsx"}, "fsx_mount_path", "belongs to the system"),
    row("CL-TAG-COUNT", {"tags": {f"k{i}": "v" for i in range(46)}}, "tags", "at most 45 tags"),
    row("CL-TAG-KEY", {"tags": {"aws:owner": "me"}}, "tags.aws:owner", "must not start with 'aws:'"),
    row("API-MODEL", {"tags": {"team!": "a"}}, "tags.team!", "rejects Tags[0].Key: allowed: regular expression"),
    row(
        "CL-STRATEGY-MODE",
        {"mode": "lifecycle-driven", "slurm_config_strategy": "Merge"},
        "slurm_config_strategy",
        "only to mode api-driven",
    ),
    row(
        "CL-NAME-REPLACES",
        {"cluster_name": "new-name"},
        "cluster_name",
        "replaces the cluster",
        previous={"cluster_name": "old-name"},
        has_previous=True,
    ),
    row(
        "CL-STORAGE-NEEDED",
        {"storage": None, "users": [{"name": "alice", "uid": 2001}]},
        "storage",
        "users (their homes)",
    ),
    # --- instance groups
    row("GRP-COUNT", groups(*({**CPU_WORKERS, "name": f"w{i}"} for i in range(100))), "instance_groups", "1 to 100"),
    row("GRP-NAME", groups({**CPU_WORKERS, "name": "bad_name"}), "instance_groups[1].name", "1-63 letters"),
    row("GRP-UNIQUE", groups(CPU_WORKERS, CPU_WORKERS), "instance_groups[2].name", "must be unique"),
    row(
        "GRP-ROLE",
        {"instance_groups": []},
        "",
        "",
    ),  # placeholder, replaced below (role is an enum)
    row(
        "GRP-PARTITION-ROLE",
        groups(CPU_WORKERS, {**LOGIN, "partition": "p"}),
        "instance_groups[2].partition",
        "only compute groups",
    ),
    row(
        "GRP-PARTITION-NAME",
        groups({**CPU_WORKERS, "partition": "p" * 129}),
        "instance_groups[1].partition",
        "1-128 letters",
    ),
    row("GRP-CONTROLLER", {"instance_groups": [CPU_WORKERS]}, "instance_groups", "exactly one"),
    row("GRP-LOGIN", groups(CPU_WORKERS, LOGIN, {**LOGIN, "name": "login2"}), "instance_groups", "at most one"),
    row("GRP-COMPUTE", {"instance_groups": [CONTROLLER]}, "instance_groups", "no compute group"),
    row(
        "GRP-INSTANCE-TYPE",
        groups({**CPU_WORKERS, "instance_type": "ml.p5.48xlarg"}),
        "instance_groups[1].instance_type",
        "did you mean 'ml.p5.48xlarge'",
    ),
    row("GRP-REGION", {}, "region", "HyperPod is not offered there", region="eu-west-3"),
    row("GRP-REGION-UNLISTED", groups(CPU_WORKERS), "region", "The sources disagree", region="ca-central-1"),
    row("GRP-INSTANCE-COUNT", groups({**CPU_WORKERS, "count": 6759}), "instance_groups[1].count", "0 to 6758"),
    # --- multi-head controllers (a controller group of two or more)
    row(
        "MH-MODE",
        {"instance_groups": [{**CONTROLLER, "count": 2}, CPU_WORKERS]},
        "instance_groups[0].count",
        "need mode lifecycle-driven",
    ),
    row(
        "MH-ACCOUNTING",
        {
            "mode": "lifecycle-driven",
            "instance_groups": [{**CONTROLLER, "count": 2}, CPU_WORKERS],
            "runtime": {"accounting": {"enabled": True}},
        },
        "runtime.accounting.database",
        "goes down with it",
    ),
    row(
        "GRP-FLEX-EXCLUSIVE",
        groups({**CPU_WORKERS, "instance_types": ["ml.c5.2xlarge"]}),
        "instance_groups[1]",
        "gives both instance_type and instance_types",
    ),
    row(
        "GRP-FLEX-TYPES",
        groups({"name": "workers", "count": 2, "instance_types": TWENTY_ONE_TYPES}),
        "instance_groups[1].instance_types",
        "HyperPod takes 1 to 20",
    ),
    row(
        "GRP-FLEX-DUPLICATE",
        {
            **groups(
                {"name": "workers", "count": 2, "instance_types": ["ml.c5.xlarge", "ml.c5.2xlarge", "ml.c5.xlarge"]}
            ),
            **CONTINUOUS,
            "accept_unconfirmed": ["GRP-FLEX-SLURM"],
        },
        "instance_groups[1].instance_types",
        "the list must not contain duplicates",
    ),
    row(
        "GRP-FLEX-CONTINUOUS",
        {**groups(FLEX_WORKERS), "accept_unconfirmed": ["GRP-FLEX-SLURM"]},
        "instance_groups[1].instance_types",
        "Flexible instance groups require continuous node provisioning mode",
    ),
    row(
        "GRP-FLEX-SWITCH",
        groups(FLEX_WORKERS),
        "instance_groups[1].instance_types",
        "cannot switch between InstanceType and InstanceRequirements",
        previous=groups(CPU_WORKERS),
        has_previous=True,
        also=frozenset({"UPD-REFUSED"}),  # instance_type leaves: an existing group keeps its type (Slurm CLI page)
    ),
    row(
        "GRP-FLEX-TYPE-REMOVED",
        groups(FLEX_WORKERS),
        "instance_groups[1].instance_types",
        "drops ml.c5.4xlarge from the deployed list",
        previous=groups({**FLEX_WORKERS, "instance_types": [*FLEX_WORKERS["instance_types"], "ml.c5.4xlarge"]}),
        has_previous=True,
    ),
    row(
        "GRP-FLEX-ACCELERATOR",
        groups({"name": "workers", "count": 2, "instance_types": ["ml.c5.xlarge", "ml.g5.xlarge"]}),
        "instance_groups[1].instance_types",
        "mixes accelerator kinds (no accelerator: ml.c5.xlarge; NVIDIA GPUs: ml.g5.xlarge)",
    ),
    row(
        "GRP-FLEX-ACCELERATOR-COUNT",
        groups({"name": "workers", "count": 2, "instance_types": ["ml.g5.xlarge", "ml.g5.12xlarge"]}),
        "instance_groups[1].instance_types",
        "differ in accelerators per node (1 per node: ml.g5.xlarge; 4 per node: ml.g5.12xlarge)",
    ),
    row(
        "GRP-FLEX-PARAMETER",
        {
            **groups(FLEX_WORKERS),
            "parameters": {"instance_groups": {"workers": {"instance_types": ["ml.c5.xlarge"]}}},
        },
        "parameters.instance_groups.workers.instance_types",
        "group 'workers' is flexible",
    ),
    row(
        "GRP-THREADS-PER-CORE",
        groups({**CPU_WORKERS, "instance_type": "ml.c6g.xlarge", "threads_per_core": 2}),
        "instance_groups[1].threads_per_core",
        "one thread per core",
    ),
    row(
        "GRP-HARDWARE-KNOWN",
        {
            "mode": "lifecycle-driven",
            **groups({**CPU_WORKERS, "instance_type": "ml.p6e-gb200.36xlarge"}),
            "network": ULTRA_ZONE,
        },
        "instance_groups[1].instance_type",
        "runtime.node_hardware.ml.p6e-gb200.36xlarge",
        also=frozenset({"NET-LOCAL-ZONE"}),  # the controller's type in the UltraServers' Local Zone
    ),
    row(
        "GRP-COMPUTE-INSTANCES",
        {"mode": "lifecycle-driven", **groups({**CPU_WORKERS, "count": 0})},
        "instance_groups",
        "every compute group has count 0",
    ),
    row(
        "GRP-EBS-VOLUME",
        groups({**CPU_WORKERS, "ebs_volume_gib": 20000}),
        "instance_groups[1].ebs_volume_gib",
        "1 to 16384",
    ),
    row(
        "GRP-DEEP-HEALTH-CHECKS",
        groups({**TRN_WORKERS, "deep_health_checks": ["InstanceStress", "InstanceStress"]}),
        "instance_groups[1].deep_health_checks",
        "each check once",
    ),
    row(
        "GRP-DEEP-HEALTH-ACCELERATED",
        groups({**CPU_WORKERS, "instance_type": "ml.g6.xlarge", "deep_health_checks": ["InstanceConnectivity"]}),
        "instance_groups[1].deep_health_checks",
        "ml.g6.xlarge has accelerators but no EFA",
    ),
    row(
        "GRP-DEEP-HEALTH-CONNECTIVITY",
        groups({**CPU_WORKERS, "deep_health_checks": ["InstanceConnectivity"]}),
        "instance_groups[1].deep_health_checks",
        "ml.c5.xlarge has no GPU",
    ),
    row(
        "GRP-HARDWARE-UNKNOWN",
        {
            **groups(
                {**CPU_WORKERS, "instance_type": "ml.p6e-gb200.36xlarge", "deep_health_checks": ["InstanceStress"]}
            ),
            "network": ULTRA_ZONE,
        },
        "instance_groups[1].instance_type",
        "aws ec2 describe-instance-types --instance-types p6e-gb200.36xlarge",
        also=frozenset({"NET-LOCAL-ZONE"}),
    ),
    row(
        "GRP-TRAINING-PLAN",
        groups({**CPU_WORKERS, "training_plan_arn": "my-plan"}),
        "instance_groups[1].training_plan_arn",
        "training-plan/<name>",
    ),
    row(
        "GRP-ROLE-IMMUTABLE",
        groups(CPU_WORKERS, {**CPU_WORKERS, "name": "more", "role": "login"}),
        "instance_groups[2].role",
        "changed from compute",
        previous=groups(CPU_WORKERS, {**CPU_WORKERS, "name": "more"}),
        has_previous=True,
    ),
    row(
        "GRP-ROLE-REPLACES",
        groups({**CPU_WORKERS, "name": "other"}),
        "instance_groups",
        "'workers' is gone",
        previous=groups(CPU_WORKERS),
        has_previous=True,
    ),
    row(
        "GRP-CONTROLLER-ROLE",
        groups({**CPU_WORKERS, "execution_role": "controller"}),
        "instance_groups[1].execution_role",
        "the controller's execution role",
    ),
    # --- instance groups: the HyperPod API's newer settings
    row(
        "GRP-CAPACITY",
        {"node_provisioning_mode": "continuous", "instance_groups": [{**CONTROLLER, "capacity": "spot"}, CPU_WORKERS]},
        "instance_groups[0].capacity",
        "controller group cannot run on Spot",
    ),
    row(
        "GRP-MIN-COUNT",
        {**groups({**CPU_WORKERS, "min_count": 3}), **CONTINUOUS},
        "instance_groups[1].min_count",
        "count 2",
    ),
    row(
        "GRP-MIN-COUNT-CONTINUOUS",
        groups({**CPU_WORKERS, "min_count": 1}),
        "instance_groups[1].min_count",
        "MinCount is only available for clusters with NodeProvisioningMode set to Continuous",
    ),
    row(
        "GRP-TRAINING-PLAN-CONTROLLER",
        {"instance_groups": [{**CONTROLLER, "training_plan_arn": PLAN}, CPU_WORKERS]},
        "instance_groups[0].training_plan_arn",
        "primary instance group",
    ),
    row(
        "GRP-ULTRASERVER-ZONE",
        {**groups(ULTRA_WORKERS), "network": {"availability_zone": "us-east-1a"}},
        "network.availability_zone",
        "available only in the Dallas Local Zone",
    ),
    row(
        "NET-LOCAL-ZONE",
        {"network": {"availability_zone": "us-west-2-lax-1a"}},
        "network.availability_zone",
        "AWS documents HyperPod in one Local Zone only",
    ),
    row(
        "GRP-SPOT-CONTINUOUS",
        groups({**CPU_WORKERS, "capacity": "spot"}),
        "instance_groups[1].capacity",
        "without continuous provisioning",
    ),
    row(
        "CL-PROVISIONING",
        {"node_provisioning_mode": "continuous"},
        "node_provisioning_mode",
        "changed from none",
        previous={},
        has_previous=True,
    ),
    row("GRP-IMAGE-ID", groups({**CPU_WORKERS, "image_id": "ami-12345"}), "instance_groups[1].image_id", "8 or 17"),
    row(
        "GRP-IMAGE-RELEASE-VERSION",
        groups({**CPU_WORKERS, "image_release_version": "1.2.3"}),
        "instance_groups[1].image_release_version",
        "Supported only for EKS",
    ),
    row(
        "GRP-AUTO-PATCH-SLURM",
        groups({**CPU_WORKERS, "auto_patch": {"strategy": "when-idle"}}),
        "instance_groups[1].auto_patch",
        "EKS clusters only",
    ),
    row(
        "GRP-UPDATE-BATCHES-SLURM",
        groups({**CPU_WORKERS, "scheduled_update": update(wait_interval_s=600)}),
        "instance_groups[1].scheduled_update.deployment",
        "only for HyperPod clusters integrated with Amazon EKS",
    ),
    row(
        "GRP-UPDATE-SCHEDULE",
        groups({**CPU_WORKERS, "scheduled_update": {"schedule_expression": "cron(0 3 * * * *)"}}),
        "instance_groups[1].scheduled_update.schedule_expression",
        "cron(minute hour day-of-month",
    ),
    row(
        "GRP-UPDATE-SCHEDULE-BUFFER",
        groups(
            {**CPU_WORKERS, "scheduled_update": {"schedule_expression": "cron(0 3 ? * SUN *)"}},
            {**CPU_WORKERS, "name": "more", "scheduled_update": {"schedule_expression": "cron(0 3 ? * SUN *)"}},
        ),
        "instance_groups[2].scheduled_update.schedule_expression",
        "we recommend that you have a time buffer in between schedules",
    ),
    row(
        "GRP-UPDATE-BATCH",
        groups({**CPU_WORKERS, "scheduled_update": update(maximum_batch_size={"type": "INSTANCE_COUNT", "value": 3})}),
        "instance_groups[1].scheduled_update.deployment.maximum_batch_size.value",
        "the group's count 2",
        also=frozenset({"GRP-UPDATE-BATCHES-SLURM"}),
    ),
    row(
        "GRP-UPDATE-DEPLOYMENT",
        groups({**CPU_WORKERS, "scheduled_update": update(wait_interval_s=4000)}),
        "instance_groups[1].scheduled_update.deployment.wait_interval_s",
        "0 to 3600",
        also=frozenset({"GRP-UPDATE-BATCHES-SLURM"}),
    ),
    row(
        "GRP-OVERRIDE-VPC",
        {
            **groups({**CPU_WORKERS, "override_vpc": {**OVERRIDE, "subnet_ids": ["subnet-1"]}}),
            "network": EXISTING_NET,
            "storage": None,
        },
        "instance_groups[1].override_vpc.subnet_ids[0]",
        "8 or 17",
    ),
    row(
        "GRP-OVERRIDE-VPC-EXISTING",
        {**groups({**CPU_WORKERS, "override_vpc": OVERRIDE}), "storage": None},
        "instance_groups[1].override_vpc",
        "only with an existing VPC",
    ),
    row(
        "GRP-OVERRIDE-VPC-FSX",
        {**groups({**CPU_WORKERS, "override_vpc": OVERRIDE}), "network": EXISTING_NET},
        "instance_groups[1].override_vpc",
        "across AZs",
    ),
    row(
        "GRP-NETWORK-INTERFACE",
        groups({**CPU_WORKERS, "network_interface": "efa"}),
        "instance_groups[1].network_interface",
        "ml.c5.xlarge has no EFA",
    ),
    row(
        "GRP-VOLUME-KEY",
        {**groups({**CPU_WORKERS, "volume_kms_key_arn": "alias/team"}), **CONTINUOUS},
        "instance_groups[1].volume_kms_key_arn",
        "expected a KMS key ARN",
    ),
    row(
        "GRP-VOLUME-KEY-SHARED",
        {
            "instance_groups": [
                {**CONTROLLER, "volume_kms_key_arn": VOLUME_KEY},
                {**CPU_WORKERS, "volume_kms_key_arn": VOLUME_KEY},
            ],
            **CONTINUOUS,
        },
        "instance_groups[1].volume_kms_key_arn",
        "the same key as group 'controller'",
    ),
    row(
        "GRP-VOLUME-KEY-CONTINUOUS",
        groups({**CPU_WORKERS, "volume_kms_key_arn": VOLUME_KEY}),
        "instance_groups[1].volume_kms_key_arn",
        "only in clusters with continuous node provisioning",
    ),
    row(
        "ORG-VOLUME-KEY",
        {
            **groups({**CPU_WORKERS, "volume_kms_key_arn": VOLUME_KEY}),
            **CONTINUOUS,
            "organization": {"kms_key_arn": VOLUME_KEY + "ef"},
        },
        "instance_groups[1].volume_kms_key_arn",
        "differs from organization.kms_key_arn",
    ),
    row(
        "CL-ACCOUNTING-ENDPOINT",
        {"runtime": external_accounting("db_1.example.com"), **CONTINUOUS},
        "runtime.accounting.host",
        "accepts a DNS name",
    ),
    row(
        "CL-ACCOUNTING-CONTINUOUS",
        {"runtime": external_accounting()},
        "runtime.accounting.database",
        "only with continuous node provisioning",
    ),
    # --- the HyperPod API support table (data/api_support.yaml)
    row(
        "CL-CONTINUOUS-STRATEGY",
        {**CONTINUOUS, "slurm_config_strategy": "Merge"},
        "slurm_config_strategy",
        "rejects any SlurmConfigStrategy",
    ),
    row(
        "CL-CONTINUOUS-MODE",
        {**CONTINUOUS, "mode": "lifecycle-driven"},
        "node_provisioning_mode",
        "provisioning_parameters.json",
    ),
    row(
        "CL-ACCOUNTING-AMI",
        {
            **groups({**CPU_WORKERS, "image_id": "ami-0123456789abcdef0"}),
            "runtime": external_accounting(),
            **CONTINUOUS,
        },
        "instance_groups[1].image_id",
        "released after 2026-08-30",
    ),
    row(
        "CL-ACCOUNTING-ONE-WAY",
        {"runtime": external_accounting(), **CONTINUOUS},
        "runtime.accounting.database",
        "cannot revert",
        previous=CONTINUOUS,
        has_previous=True,
    ),
    row(
        "CL-ACCOUNTING-NO-REVERT",
        CONTINUOUS,
        "runtime.accounting",
        "cannot revert it to the internal MariaDB",
        previous={"runtime": external_accounting(), **CONTINUOUS},
        has_previous=True,
    ),
    row(
        "GRP-FLEX-SLURM",
        {**groups(FLEX_WORKERS), **CONTINUOUS},
        "instance_groups[1].instance_types",
        "Slurm support is unconfirmed",
    ),
    row(
        "GRP-SPOT-SLURM",
        {**groups({**CPU_WORKERS, "capacity": "spot"}), **CONTINUOUS},
        "instance_groups[1].capacity",
        "EKS clusters only",
    ),
    row(
        "GRP-DHC-CONTINUOUS",
        {**groups({**P5_WORKERS, "deep_health_checks": ["InstanceStress"]}), "storage": None},
        "instance_groups[1].deep_health_checks",
        "announced with continuous provisioning",
    ),
    row(
        "GRP-DHC-COMPUTE",
        {
            "instance_groups": [
                {**CONTROLLER, "deep_health_checks": ["InstanceStress"], "instance_type": "ml.p5.48xlarge"},
                CPU_WORKERS,
            ],
            **CONTINUOUS,
            "storage": None,
        },
        "instance_groups[0].deep_health_checks",
        "this is a controller group",
    ),
    row("CL-ACCEPT-UNCONFIRMED", {"accept_unconfirmed": ["CL-NAME"]}, "accept_unconfirmed[0]", "only the warnings"),
    # --- levels and suppression (tests/test_levels.py)
    row(
        "CL-ACCOUNTING-PERMANENT",
        {"runtime": external_accounting(), **CONTINUOUS},
        "runtime.accounting.database",
        "cannot revert to the internal MariaDB database later",
    ),
    row("CL-SUPPRESS", {"suppress": [{"rule": "CL-NAME", "reason": "r"}]}, "suppress[0].rule", "cannot be suppressed"),
    row(
        "CL-SUPPRESS-UNUSED",
        {"suppress": [{"rule": "GRP-SPOT-SLURM", "reason": "r"}]},
        "suppress[0].rule",
        "silences nothing",
    ),
    row("CL-ACCEPT-UNCONFIRMED-FORM", {"accept_unconfirmed": ["GRP-SPOT-SLURM"]}, "accept_unconfirmed", "suppress"),
    row(
        "ZFS-MODE",
        {"mode": "lifecycle-driven", "storage_openzfs": OPENZFS},
        "storage_openzfs",
        "does not mount NFS yet",
    ),
    row(
        "ZFS-EXISTING-IDS",
        {"storage_openzfs": openzfs(dns_name="fs-0123abcd.fsx")},
        "storage_openzfs.existing.dns_name",
        "expected the file system's DNS name",
    ),
    row(
        "ZFS-MOUNT-PATH",
        {"storage_openzfs": openzfs("/home/")},
        "storage_openzfs.mount_path",
        "expected an absolute path without a trailing slash, e.g. /home",
    ),
    row(
        "ZFS-LUSTRE-PATH",
        {"storage_openzfs": openzfs("/fsx")},
        "storage_openzfs.mount_path",
        "FSx for Lustre is mounted there",
    ),
    row(
        "ZFS-EXISTING-ONLY",
        {"storage_openzfs": {**OPENZFS, "storage_capacity_gib": 512}},
        "storage_openzfs.storage_capacity_gib",
        "applies only to a new file system",
    ),
    row(
        "ZFS-CAPACITY",
        {"storage_openzfs": {"storage_capacity_gib": 63}},
        "storage_openzfs.storage_capacity_gib",
        "64 to 524288",
    ),
    row(
        "ZFS-THROUGHPUT",
        {"storage_openzfs": {"deployment_type": "SINGLE_AZ_2", "throughput_capacity_mbps": 64}},
        "storage_openzfs.throughput_capacity_mbps",
        "SINGLE_AZ_2 takes one of 160, 320",
    ),
    row(
        "ZFS-BACKUPS",
        {"storage_openzfs": {"automatic_backup_retention_days": 91}},
        "storage_openzfs.automatic_backup_retention_days",
        "0 to 90 days",
    ),
    row(
        "ZFS-MULTI-AZ",
        {"storage_openzfs": {"standby_subnet_id": "subnet-0123456789abcdef1"}},
        "storage_openzfs.standby_subnet_id",
        "applies only to MULTI_AZ_1, not SINGLE_AZ_1",
    ),
    row(
        "ZFS-MULTI-AZ-VPC",
        {"storage_openzfs": {"deployment_type": "MULTI_AZ_1", "standby_subnet_id": "subnet-0123456789abcdef1"}},
        "storage_openzfs.deployment_type",
        "the new VPC has one",
    ),
    row(
        "ZFS-CLIENTS",
        {"storage_openzfs": {"client_cidrs": ["0.0.0.0/0"]}},
        "storage_openzfs.client_cidrs[0]",
        "exports the file system to every address",
    ),
    row(
        "ZFS-CLIENTS-REQUIRED",
        {"network": EXISTING_NET, "storage_openzfs": {}},
        "storage_openzfs.client_cidrs",
        "the existing subnet's CIDR is not known at synth",
    ),
    row(
        "ZFS-REMOVAL",
        {"storage_openzfs": {"removal_policy": "destroy"}},
        "storage_openzfs.removal_policy",
        "deleted with the stack",
    ),
    # --- network
    row("NET-CIDR", {"network": {"cidr": "10.0.0.1/16"}}, "network.cidr", "use 10.0.0.0/16"),
    row(
        "NET-SUBNET-MASK",
        {"network": {"cidr": "10.0.0.0/24", "private_subnet_cidr_mask": 25}},
        "network.private_subnet_cidr_mask",
        "the VPC 10.0.0.0/24 has 256",
    ),
    row(
        "NET-EXISTING",
        {"network": {"subnet_id": "subnet-0123456789abcdef0"}},
        "network.subnet_id",
        "needs network.vpc_id",
    ),
    row("NET-NEW-VPC-ONLY", {"network": {**EXISTING_NET, "cidr": "10.1.0.0/16"}}, "network.cidr", "only to a new VPC"),
    row("NET-ID-FORMAT", {"network": {**EXISTING_NET, "vpc_id": "vpc-1"}}, "network.vpc_id", "8 or 17"),
    row(
        "NET-EGRESS-CLOSED",
        {"network": {"allow_internet_egress": False}},
        "network.allow_internet_egress",
        "cannot store or retrieve lifecycle scripts",
    ),
    row(
        "NET-AZ",
        {"network": {"availability_zone": "use1-az1"}},
        "network.availability_zone",
        "this is an AZ ID",
    ),
    row(
        "NET-SUBNET-CAPACITY",
        {**groups({**TRN_WORKERS, "count": 200}), "network": {"private_subnet_cidr_mask": 22}},
        "network.private_subnet_cidr_mask",
        "the groups take 1801 (controller: 1 x 1; workers: 200 x 9)",
    ),
    row(
        "NET-REPLACES",
        {"network": EXISTING_NET},
        "network",
        "replaces the cluster",
        previous={"network": {**EXISTING_NET, "subnet_id": "subnet-0123456789abcdef1"}},
        has_previous=True,
    ),
    # --- storage
    row(
        "FSX-CAPACITY", {"storage": {"storage_capacity_gib": 3000}}, "storage.storage_capacity_gib", "multiple of 2400"
    ),
    row(
        "FSX-THROUGHPUT",
        {"storage": {"deployment_type": "SCRATCH_2", "throughput_mb_per_tib": 250}},
        "storage.throughput_mb_per_tib",
        "no per-unit throughput",
    ),
    row(
        "FSX-VERSION",
        {"storage": {"file_system_type_version": "2.12"}},
        "storage.file_system_type_version",
        "needs Lustre 2.15",
    ),
    row(
        "FSX-EFA",
        {"storage": {"deployment_type": "PERSISTENT_1", "throughput_mb_per_tib": 200, "efa_enabled": True}},
        "storage.efa_enabled",
        "needs deployment_type PERSISTENT_2",
    ),
    row("FSX-METADATA-IOPS", {"storage": {"metadata_iops": 5000}}, "storage.metadata_iops", "multiple of 12000"),
    row(
        "FSX-EXISTING-ONLY",
        {"storage": {"existing": EXISTING_FS, "storage_capacity_gib": 2400}},
        "storage.storage_capacity_gib",
        "only to a new file system",
    ),
    row(
        "FSX-EXISTING-IDS",
        {"storage": {"existing": {**EXISTING_FS, "mount_name": "far-too-long"}}},
        "storage.existing.mount_name",
        "1-8 character",
    ),
    row("FSX-REMOVAL", {"storage": {"removal_policy": "destroy"}}, "storage.removal_policy", "deleted with the stack"),
    row(
        "FSX-SHARED-MOVES",
        {"storage": {"existing": {**EXISTING_FS, "shared": True}}},
        "storage.existing.shared",
        "nothing is moved or deleted",
        previous={"storage": {"existing": EXISTING_FS}},
        has_previous=True,
    ),
    row("FSX-EFA-CLIENTS", groups(P5_WORKERS), "storage.efa_enabled", "GPUDirect Storage"),
    row(
        "FSX-REPLACES",
        {
            "storage": {
                "deployment_type": "PERSISTENT_1",
                "throughput_mb_per_tib": 200,
                "file_system_type_version": "2.15",
            }
        },
        "storage",
        "deployment_type changed",
        previous={},
        has_previous=True,
    ),
    row(
        "DRA-SUPPORTED",
        {"storage": {"deployment_type": "SCRATCH_1", "storage_capacity_gib": 3600, "data_repositories": [repo()]}},
        "storage.data_repositories",
        "not SCRATCH_1",
    ),
    row(
        "DRA-NAME",
        {"storage": {"data_repositories": [repo(name="data"), repo(name="Data", file_system_path="/b")]}},
        "storage.data_repositories[1].name",
        "repeats data_repositories[0].name",
    ),
    row(
        "DRA-PATH",
        {"storage": {"data_repositories": [repo(), repo(name="b", file_system_path="/data/b")]}},
        "storage.data_repositories[1].file_system_path",
        "overlaps",
    ),
    row(
        "DRA-PRIVATE",
        {"storage": {"data_repositories": [repo(file_system_path="/")]}},
        "storage.data_repositories[0].file_system_path",
        "covers /.hyperpod-cdk",
    ),
    row(
        "DRA-BUCKET",
        {"storage": {"data_repositories": [repo(bucket_name="My_Bucket")]}},
        "storage.data_repositories[0].bucket_name",
        "3-63 lower-case",
    ),
    row(
        "DRA-EVENTS",
        {"storage": {"data_repositories": [repo(auto_import_events=["NEW", "NEW"])]}},
        "storage.data_repositories[0].auto_import_events",
        "each event once",
    ),
    row(
        "DRA-CHUNK",
        {"storage": {"data_repositories": [repo(imported_file_chunk_size_mib=600000)]}},
        "storage.data_repositories[0].imported_file_chunk_size_mib",
        "1 to 512000",
    ),
    row(
        "DRA-REPLACES",
        {"storage": {"data_repositories": [repo(file_system_path="/datasets")]}},
        "storage.data_repositories[0]",
        "replaces the association",
        previous={},
        has_previous=True,
    ),
    # --- lifecycle
    row("LC-PREFIX", {"lifecycle": {"prefix": "/bad"}}, "lifecycle.prefix", "no leading slash"),
    row(
        "LC-BUCKET", {"lifecycle": {"bucket_name": "sagemaker-Bad_Bucket"}}, "lifecycle.bucket_name", "3-63 lower-case"
    ),
    row("LC-BUCKET-ACCESS", {"lifecycle": {"bucket_name": "team-scripts"}}, "lifecycle.bucket_name", "KMS key"),
    # --- runtime
    row(
        "RT-SHAPE",
        {"runtime": {"slurm": {"slurmd_timeout": "soon"}}},
        "runtime.slurm.slurmd_timeout",
        "expected an integer",
    ),
    row(
        "RT-NODE-HARDWARE",
        {"runtime": {"node_hardware": {"ml.m5.xlarge": {"cpus": -1}}}},
        "runtime.node_hardware.ml.m5.xlarge.cpus",
        "a positive integer",
    ),
    row(
        "RT-SLURM-SECONDS",
        {"runtime": {"slurm": {"slurmd_timeout": 100000}}},
        "runtime.slurm.slurmd_timeout",
        "1 to 65535",
    ),
    row(
        "RT-SLURM-CRED-EXPIRE", {"runtime": {"slurm": {"cred_expire": 60}}}, "runtime.slurm.cred_expire", "at least 70"
    ),
    row(
        "RT-SLURM-RETURN-TO-SERVICE",
        {"runtime": {"slurm": {"return_to_service": 3}}},
        "runtime.slurm.return_to_service",
        "0, 1, 2",
    ),
    row(
        "RT-SLURM-VERSION",
        {"mode": "lifecycle-driven", "runtime": {"slurm": {"version": "25"}}},
        "runtime.slurm.version",
        "such as '24.11' or '25.11'",
    ),
    row(
        "RT-SLURM-SECURITY",
        {"mode": "lifecycle-driven", "runtime": {"slurm": {"version": "24.11"}}},
        "runtime.slurm.version",
        "no fixed release exists for the 24.11 line",
    ),
    row(
        "CL-SLURM-VERSION-MODE",
        {"mode": "api-driven", "runtime": {"slurm": {"version": "24.11"}}},
        "runtime.slurm.version",
        "HyperPod starts Slurm before the OnInitComplete script runs",
    ),
    row(
        "RT-ACCOUNTING-DATABASE",
        {"runtime": {"accounting": {"database": "sqlite"}}},
        "runtime.accounting.database",
        "local, external",
    ),
    row(
        "RT-ACCOUNTING-EXTERNAL",
        {"runtime": {"accounting": {"enabled": True, "database": "external", "host": "db.example.com"}}, **CONTINUOUS},
        "runtime.accounting.password_secret_arn",
        "Secrets Manager",
    ),
    row(
        "PAR-BUCKET-SCOPE",
        {
            "storage": {"data_repositories": [{"name": "d", "file_system_path": "/d", "bucket_name": "team-a-d"}]},
            "parameters": {"data_repositories": {"d": {"bucket_name": True}}},
        },
        "parameters.data_repositories.d.bucket_name",
        "link any bucket of the account",
    ),
    row(
        "RT-ACCOUNTING-TLS",
        {
            "runtime": {"accounting": {**external_accounting()["accounting"], "ca_bundle_url": "http://x/b.pem"}},
            **CONTINUOUS,
        },
        "runtime.accounting.ca_bundle_url",
        "an https URL",
    ),
    row(
        "CL-ACCOUNTING-TLS",
        {
            "mode": "lifecycle-driven",
            "runtime": {"accounting": {**external_accounting()["accounting"], "ca_bundle_sha256": None}},
        },
        "runtime.accounting.ca_bundle_sha256",
        "over TLS",
    ),
    row(
        "RT-ACCOUNTING-LOCAL",
        {"runtime": {"accounting": {"host": "db.example.com"}}},
        "runtime.accounting",
        "only to database 'external'",
    ),
    row(
        "RT-ACCOUNTING-USER",
        {"runtime": {"accounting": {"user": "slurm.user"}}},
        "runtime.accounting.user",
        "1-32 letters",
    ),
    row("RT-ACCOUNTING-PORT", {"runtime": {"accounting": {"port": 70000}}}, "runtime.accounting.port", "1-65535"),
    row(
        "RT-HEALTH-DISK",
        {"runtime": {"health": {"min_free_disk_gib": -1}}},
        "runtime.health.min_free_disk_gib",
        "0 (no disk check)",
    ),
    row("RT-HEALTH-DCGM", {"runtime": {"health": {"dcgm_level": 3}}}, "runtime.health.dcgm_level", "0 (off), 1"),
    row(
        "RT-SPOT-TIMING",
        {"runtime": {"spot": {"poll_interval": 5, "checkpoint_grace": 115}}},
        "runtime.spot.checkpoint_grace",
        "under EC2's 120 s notice",
    ),
    row(
        "RT-CHECKPOINT-SIZE",
        {"runtime": {"checkpoint": {"state_gib_per_node": 0}}},
        "runtime.checkpoint.state_gib_per_node",
        "expected whole GiB, 1 or more",
    ),
    row(
        "RT-CHECKPOINT-MEMORY",
        {**groups(CPU_WORKERS), "runtime": {"checkpoint": {"state_gib_per_node": 4}}},
        "runtime.checkpoint.state_gib_per_node",
        "stage 4 GiB per node, over the staging budget of ml.c5.xlarge of group workers: 3.5 GiB (50% of 8.0 GiB",
    ),
    row(
        "RT-OBSERVABILITY-INTERVAL",
        {"runtime": {"observability": {"scrape_interval": 1}}},
        "runtime.observability.scrape_interval",
        "from 5 to 300",
    ),
    row(
        "RT-OBSERVABILITY-TEXTFILE",
        {"runtime": {"observability": {"node_exporter": False, "efa_metrics": False}}},
        "runtime.observability.node_exporter",
        "slurm_metrics need node_exporter",
    ),
    row(
        "RT-CONTAINERS-CACHE",
        {"runtime": {"containers": {"enroot_cache": "fsx"}}},
        "runtime.containers.enroot_cache",
        "auto, nvme, shared",
    ),
    row(
        "CL-CONTAINERS-SHARED-CACHE",
        {"storage": None, "runtime": {"containers": {"enroot_cache": "shared"}}},
        "runtime.containers.enroot_cache",
        "no storage section",
    ),
    row(
        "RT-CONTAINERS-SHA256",
        {"runtime": {"containers": {"enroot_sha256": "A" * 64}}},
        "runtime.containers.enroot_sha256",
        "64 lower-case hexadecimal digits",
    ),
    row(
        "RT-CONTAINERS-INSTALL",
        {"runtime": {"containers": {"install_missing": True, "enroot_caps_sha256": "b" * 64}}},
        "runtime.containers.enroot_sha256",
        "no sha256 of it is published",
    ),
    row(
        "RT-SECURITY-IMDS-GROUPS",
        {"runtime": {"security": {"imds_groups": ["ops", "ops"]}}},
        "runtime.security.imds_groups[1]",
        "names a group twice",
    ),
    row(
        "RT-HEALTH-ON-HYPERPOD",
        {"runtime": {"health": {"on_hyperpod": "ignore"}}},
        "runtime.health.on_hyperpod",
        "recover, drain",
    ),
    row(
        "RT-PYTORCH-VERSION",
        {**groups(CPU_WORKERS), "runtime": {"pytorch": {"version": "latest"}}},
        "runtime.pytorch.version",
        "exact release",
    ),
    row(
        "RT-PYTORCH-INDEX-URL",
        {**groups(CPU_WORKERS), "runtime": {"pytorch": {"version": "2.5.1", "index_url": "http://pypi.example/"}}},
        "runtime.pytorch.index_url",
        "expected an https:// index URL",
    ),
    row(
        "RT-PYTORCH-SMP",
        {**groups(CPU_WORKERS), "runtime": {"pytorch": {"version": "2.5.1", "smp": True}}},
        "runtime.pytorch.smp",
        "conda build",
    ),
    row(
        "RT-PYTORCH-PACKAGES",
        {**groups(CPU_WORKERS), "runtime": {"pytorch": {"version": "2.5.1", "packages": ["numpy; rm -rf /"]}}},
        "runtime.pytorch.packages[0]",
        "pip requirement",
    ),
    row(
        "RT-PYTORCH-NEURON",
        {**groups(TRN_WORKERS), "runtime": {"pytorch": {"version": "2.13.0"}}},
        "runtime.pytorch.version",
        "need PyTorch 2.9.x",
    ),
    row(
        "RT-PYTORCH-SMDDP",
        {**groups(TRN_WORKERS), "runtime": {"pytorch": {"version": "2.9.0", "smddp": True}}},
        "runtime.pytorch.smddp",
        "cannot run on the Trainium groups",
    ),
    # --- parameters (launch choices)
    row(
        "PAR-TARGET",
        {"parameters": {"instance_groups": {"gpus": {"count": {"min": 1, "max": 8}}}}},
        "parameters.instance_groups.gpus",
        "no instance group has this name",
    ),
    row(
        "PAR-DEFAULT",
        {"parameters": {"storage_capacity_gib": [2400, 4800]}},
        "parameters.storage_capacity_gib",
        "must include storage.storage_capacity_gib's value 1200",
    ),
    row(
        "PAR-CHOICE",
        {"parameters": {"storage_capacity_gib": [1200, 3000]}},
        "parameters.storage_capacity_gib[1]",
        "with this choice, storage.storage_capacity_gib: got 3000; PERSISTENT_2 takes 1200, 2400 or a multiple",
    ),
    row(
        "PAR-CHOICE-WARNING",
        {"parameters": {"instance_groups": {"workers": {"instance_types": ["ml.trn1.32xlarge", "ml.p5.48xlarge"]}}}},
        "parameters.instance_groups.workers.instance_types[1]",
        "GPUDirect Storage",
    ),
    # --- users
    row("USR-SHAPE", {"users": [{"name": "alice", "uid": 2001, "sudo": "yes"}]}, "users[0].sudo", "true or false"),
    row("USR-NAME", {"users": [{"name": "Alice", "uid": 2001}]}, "users[0].name", "lowercase POSIX"),
    row("USR-ID", {"users": [{"name": "alice", "uid": 1000}]}, "users[0].uid", "2000 to 60000"),
    row("USR-SHELL", {"users": [{"name": "alice", "uid": 2001, "shell": "bash"}]}, "users[0].shell", "absolute path"),
    row(
        "USR-SSH-KEY",
        {"users": [{"name": "alice", "uid": 2001, "ssh_public_keys": ["AAAA"]}]},
        "users[0].ssh_public_keys",
        "OpenSSH public keys",
    ),
    row(
        "USR-UNIQUE",
        {"users": [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2001}]},
        "users[1].uid",
        "already used",
    ),
    # --- teams (issue #32)
    *[
        row(rule, {"runtime": {"accounting": {"enabled": True}}, "users": TEAM_USERS, **config}, path, words)
        for rule, config, path, words in (
            (
                "TEAM-SHAPE",
                {"teams": [{"name": "v", "users": ["alice", "bob"], "colour": 1}]},
                "teams[0].colour",
                "unknown",
            ),
            ("TEAM-NAME", {"teams": [{"name": "Vision", "users": ["alice", "bob"]}]}, "teams[0].name", "account name"),
            (
                "TEAM-UNIQUE",
                {"teams": [{"name": "v", "users": ["alice"]}, {"name": "v", "users": ["bob"]}]},
                "teams[1].name",
                "already the name",
            ),
            ("TEAM-USERS", {"teams": [{"name": "v", "users": []}]}, "teams[0].users", "without users"),
            (
                "TEAM-USER-UNKNOWN",
                {"teams": [{"name": "v", "users": ["alice", "bob", "eve"]}]},
                "teams[0].users[2]",
                "not a user of this config",
            ),
            (
                "TEAM-DEFAULT",
                {"teams": [{"name": "v", "users": ["alice", "bob"]}, {"name": "w", "users": ["bob"]}]},
                "teams",
                "no team is their default",
            ),
            (
                "TEAM-QOS",
                {
                    "enforce_accounts": True,
                    "teams": [{"name": "v", "users": ["alice", "bob"], "qos": {"max_nodes": 0}}],
                },
                "teams[0].qos.max_nodes",
                "1 or more",
            ),
            (
                "TEAM-BUDGET",
                {
                    "enforce_accounts": True,
                    "teams": [{"name": "v", "users": ["alice", "bob"], "budget": {"amount": -1}}],
                },
                "teams[0].budget.amount",
                "zero or more",
            ),
            (
                "TEAM-BUDGET-ONCE",
                {
                    "enforce_accounts": True,
                    "teams": [{"name": "v", "users": ["alice", "bob"], "budget": {"amount": 1, "period": "none"}}],
                },
                "teams[0].budget.period",
                "one-time allocation",
            ),
            (
                "TEAM-ENFORCE",
                {"teams": [{"name": "v", "users": ["alice", "bob"], "budget": {"amount": 1}}]},
                "enforce_accounts",
                "AccountingStorageEnforce=limits",
            ),
            (
                "TEAM-UNASSIGNED",
                {"enforce_accounts": True, "teams": [{"name": "v", "users": ["alice"]}]},
                "teams",
                "'bob' is in no team",
            ),
        )
    ],
    row(
        "TEAM-ACCOUNTING",
        {"users": TEAM_USERS, "teams": [{"name": "v", "users": ["alice", "bob"]}]},
        "teams",
        "accounting is off",
    ),
    # --- directory (issue #41)
    *[
        row(rule, {"directory": {**DIRECTORY, **change}}, path, words)
        for rule, change, path, words in (
            ("DIR-SHAPE", {"colour": 1}, "directory.colour", "unknown field"),
            ("DIR-URI", {"uris": ["ldap://ldap.corp.example.com"]}, "directory.uris[0]", "clear text"),
            ("DIR-DN", {"search_base": "corp.example.com"}, "directory.search_base", "distinguished name"),
            ("DIR-SECRET", {"bind_password_secret_arn": "hunter2"}, "directory.bind_password_secret_arn", "never"),
            ("DIR-CA", {"ca_certificate": "not a certificate"}, "directory.ca_certificate", "PEM certificate"),
            ("DIR-SCHEMA", {"schema": "openldap"}, "directory.schema", "allowed: rfc2307"),
            ("DIR-FILTER", {"access_filter": "memberOf=cn=hpc"}, "directory.access_filter", "parenthesized"),
        )
    ],
    row(
        "DIR-TEAM-DIRECTORY",
        {"runtime": {"accounting": {"enabled": True}}, "enforce_accounts": True, "teams": [GROUP_TEAM]},
        "teams[0].directory_group",
        "no directory",
    ),
    row(
        "DIR-TEAM-ENFORCE",
        {"runtime": {"accounting": {"enabled": True}}, "directory": DIRECTORY, "teams": [GROUP_TEAM]},
        "enforce_accounts",
        "refuses a leaver",
    ),
    # --- organization
    row(
        "ORG-BOUNDARY-ARN",
        {"organization": {"permission_boundary_arn": "TeamBoundary"}},
        "organization.permission_boundary_arn",
        "managed policy ARN",
    ),
    row(
        "ORG-TAG-KEY",
        {"organization": {"required_tags": {"aws:team": "a"}}},
        "organization.required_tags.aws:team",
        "must not start with 'aws:'",
    ),
    row(
        "ORG-TAG-MISSING",
        {"organization": {"required_tags": {"Owner": None}}},
        "organization.required_tags.Owner",
        "`tags` does not set it",
    ),
    row(
        "ORG-NAME-PREFIX",
        {"organization": {"name_prefix": "Team_A-"}},
        "organization.name_prefix",
        "lowercase letters, digits and hyphens",
    ),
    row(
        "ORG-PREFIXED-NAME",
        {"cluster_name": "c" * 60, "organization": {"name_prefix": "team-a-"}},
        "cluster_name",
        "67 characters; HyperPod allows 63",
    ),
    row(
        "ORG-KMS-ARN",
        {"organization": {"kms_key_arn": "alias/team"}},
        "organization.kms_key_arn",
        "expected a key ARN",
    ),
    row(
        "ORG-KMS-SCRATCH",
        {
            "storage": {"deployment_type": "SCRATCH_2"},
            "organization": {"kms_key_arn": "arn:aws:kms:us-west-2:111122223333:key/1234abcd"},
            **CONTINUOUS,
        },
        "organization.kms_key_arn",
        "SCRATCH_2 cannot be encrypted",
    ),
    # --- principles: AWS's rules over the field map's classes (tests/test_principles.py sets every field)
    row(
        "PRINCIPLE-REGION",
        {"network": {"availability_zone": "us-east-1a"}},
        "network.availability_zone",
        "an Availability Zone in us-east-1, but the cluster is in us-west-2 (the stack's Region)",
        region="us-west-2",
    ),
    row(
        "PRINCIPLE-VOLUME-KEY",
        {"organization": {"kms_key_arn": VOLUME_KEY}, **CONTINUOUS},
        "organization.kms_key_arn",
        "changes the volume key of existing instance group(s) controller, workers from none to " + VOLUME_KEY,
        previous=CONTINUOUS,
        has_previous=True,
        also=frozenset({"UPD-REPLACES-DATA"}),  # the file system takes the key too, and is replaced
    ),
    row(
        "ORG-VOLUME-KEY-CONTINUOUS",
        {"organization": {"kms_key_arn": "arn:aws:kms:us-west-2:111122223333:key/1234abcd"}},
        "organization.kms_key_arn",
        "only in clusters with continuous node provisioning",
    ),
    row(
        "ORG-ACCESS-LOGS",
        {"organization": {"access_logs_bucket": "Org_Logs"}},
        "organization.access_logs_bucket",
        "3-63 lower-case letters",
    ),
    # --- observability
    row(
        "OBS-WORKSPACE-ARN",
        {"observability": {"workspace_arn": "ws-12345678"}},
        "observability.workspace_arn",
        "expected a workspace ARN",
    ),
    row(
        "OBS-DISABLED",
        {"observability": {"enabled": False, "alarms": {"emails": ["ops@example.com"]}}},
        "observability.alarms.emails",
        "while observability.enabled is false",
    ),
    row("OBS-GRAFANA-SSO", {"observability": {"grafana": True}}, "observability.grafana", "IAM Identity Center"),
    row(
        "OBS-ALARM-EMAIL",
        {"observability": {"alarms": {"emails": ["ops.example.com"]}}},
        "observability.alarms.emails[0]",
        "expected an email address",
    ),
    row(
        "OBS-WORKSPACE-REGION",
        {"observability": {"workspace_arn": WORKSPACE}},
        "observability.workspace_arn",
        "the workspace is in us-west-2, the cluster in eu-west-1",
        region="eu-west-1",
    ),
    # --- instance groups: the scaler (issue #24)
    row(
        "GRP-SCALING-BOUNDS",
        {**CONTINUOUS, **groups({**CPU_WORKERS, "scaling": {"min": 0, "max": 4, "idle_minutes": 0}})},
        "instance_groups[1].scaling.idle_minutes",
        "1 to 10080",
    ),
    row("GRP-SCALING-CONTINUOUS", groups(SCALED), "instance_groups[1].scaling", "continuous node provisioning"),
    row(
        "GRP-SCALING-ROLE",
        {**CONTINUOUS, "instance_groups": [{**CONTROLLER, "scaling": {"min": 1, "max": 1}}, CPU_WORKERS]},
        "instance_groups[0].scaling",
        "a controller group cannot scale",
    ),
    row(
        "GRP-SCALING-TRAINING-PLAN",
        {**CONTINUOUS, **groups({**SCALED, "training_plan_arn": PLAN})},
        "instance_groups[1].scaling",
        "training plan runs reserved capacity",
    ),
    row(
        "GRP-SCALING-COUNT",
        {**CONTINUOUS, **groups({**CPU_WORKERS, "scaling": {"min": 3, "max": 4}})},
        "instance_groups[1].count",
        "outside scaling 3..4",
    ),
    row(
        "GRP-SCALING-MIN-COUNT",
        {**CONTINUOUS, **groups({**SCALED, "min_count": 1})},
        "instance_groups[1].scaling.min",
        "below min_count 1",
    ),
    row(
        "GRP-SCALING-PARTITION",
        {**CONTINUOUS, **groups(SCALED, {**CPU_WORKERS, "name": "other", "partition": "workers"})},
        "instance_groups[1].partition",
        "shared with other",
    ),
    row(
        "GRP-SCALING-PARAMETER",
        {
            **CONTINUOUS,
            **groups(SCALED),
            "parameters": {"instance_groups": {"workers": {"count": {"min": 0, "max": 4}}}},
        },
        "parameters.instance_groups.workers.count",
        "the scaler owns its count",
    ),
    row(
        "GRP-SCALING-DEEP-HEALTH",
        {
            **CONTINUOUS,
            **groups({**TRN_WORKERS, "scaling": {"min": 0, "max": 4}, "deep_health_checks": ["InstanceStress"]}),
        },
        "instance_groups[1].deep_health_checks",
        "45-90 minutes",
    ),
    # --- cost (the default groups run ml.m5.xlarge and ml.trn1.32xlarge: PRICED prices both)
    row("COST-CURRENCY", {"cost": {"currency": "usd", "prices": PRICED}}, "cost.currency", "ISO 4217"),
    row(
        "COST-PRICE",
        {"cost": {"prices": {**PRICED, "ml.m5.xlarge": {"per_hour": -1.0, "source": "x"}}}},
        "cost.prices.ml.m5.xlarge.per_hour",
        "zero or more",
    ),
    row(
        "COST-PRICE-UNUSED",
        {"cost": {"prices": {**PRICED, "ml.p9.48xlarge": {"per_hour": 1.0, "source": "x"}}}},
        "cost.prices.ml.p9.48xlarge",
        "no instance group runs this type",
    ),
    row("COST-PRICE-SOURCE", {"cost": {}}, "cost.prices", "no price for ml.trn1.32xlarge"),
    row(
        "COST-BUDGET",
        {"cost": {"prices": PRICED, "aws_budget": {"monthly": -5.0}}},
        "cost.aws_budget.monthly",
        "more than zero",
    ),
    row(
        "COST-BUDGET-TOPIC",
        {"cost": {"prices": PRICED, "aws_budget": {"monthly": 100.0}}, "observability": {"enabled": False}},
        "cost.aws_budget",
        "alarm topic",
    ),
    # --- the REST API (rules/rest_api.py)
    row("REST-CERTIFICATE", rest(certificate_arn=None), "rest_api.certificate_arn", "TLS listener needs"),
    row("REST-PORT", rest(port=6817), "rest_api.port", "slurmctld's port"),
    row("REST-TOKEN-LIFETIME", rest(token_lifetime_s=7200), "rest_api.token_lifetime_s", "60 to 3600 seconds"),
    row("REST-CALLERS", rest(allowed_cidrs=["0.0.0.0/0"]), "rest_api.allowed_cidrs[0]", "admits every address"),
    row("REST-CIDR-WIDE", rest(allowed_cidrs=["10.0.0.0/8"]), "rest_api.allowed_cidrs[0]", "wider than any VPC"),
    row(
        "REST-IDENTITY",
        {"users": TEAM_USERS, **rest(identities=[{"principal_arn": PIPELINE, "slurm_user": "carol"}])},
        "rest_api.identities[0].slurm_user",
        "not one of the config's users",
    ),
    row("REST-PRINCIPAL-TAG", rest(principal_tag="aws:slurm"), "rest_api.principal_tag", "IAM tag key"),
    row(
        "REST-MAPPING-SIZE",
        rest(identities=[{"principal_arn": f"{PIPELINE}-{i:03}", "slurm_user": "alice"} for i in range(80)]),
        "rest_api.identities",
        "more than Lambda's 4 KB",
    ),
    # --- the login pool (rules/login_pool.py)
    row("LOGIN-POOL-GROUP", {"login_pool": {}}, "login_pool", "needs a login group"),
    row("LOGIN-POOL-CALLERS", pool(scheme="internet-facing"), "login_pool.allowed_cidrs", "internet-facing"),
    row(
        "LOGIN-POOL-PUBLIC-SUBNET",
        {**pool(scheme="internet-facing", allowed_cidrs=["203.0.113.0/24"]), "network": EXISTING_NET},
        "login_pool.scheme",
        "needs a public subnet",
    ),
    row("LOGIN-POOL-HEALTH-PORT", pool(health_port=22), "login_pool.health_port", "not sshd's 22"),
    row("LOGIN-POOL-DOMAIN", pool(domain_name="not a name"), "login_pool.domain_name", "DNS name"),
    row("LOGIN-POOL-DRAIN", pool(drain_grace_s=400000), "login_pool.drain_grace_s", "0 to 360000 seconds"),
    # --- AWS's provisioning and resiliency pages (rules/aws_provisioning.py)
    row("CL-STRATEGY-MERGE", {"slurm_config_strategy": "Managed"}, "slurm_config_strategy", "keep the default Merge"),
    row(
        "CL-MODE-NO-REVERT",
        {"mode": "lifecycle-driven"},
        "mode",
        "cannot revert the cluster to the legacy",
        previous={},
        has_previous=True,
    ),
    row("CL-NODE-RECOVERY", {"node_recovery": "None"}, "node_recovery", "We recommend setting the Automatic option"),
    # --- the Slurm CLI page (sagemaker-hyperpod-operate-slurm-cli-command)
    row(
        "GRP-COUNT-GUIDE",
        groups(*({**CPU_WORKERS, "name": f"w{i}", "count": 1} for i in range(20))),
        "instance_groups",
        "you can configure up to 20 instance groups",
    ),
    row(
        "GRP-NEW-GROUP-COUNT",
        groups(CPU_WORKERS, {**CPU_WORKERS, "name": "extra", "count": 0}),
        "instance_groups[2].count",
        "specify an integer greater or equal to 1",
        previous=groups(CPU_WORKERS),
        has_previous=True,
    ),
    row(
        "GRP-CONTROLLER-REMOVE",
        {"mode": "lifecycle-driven", **groups(CPU_WORKERS)},
        "instance_groups[0].count",
        "You cannot remove instances that are configured as Slurm controller nodes",
        previous={"mode": "lifecycle-driven", **groups({**CONTROLLER, "count": 2}, CPU_WORKERS)},
        has_previous=True,
    ),
]
# A role outside controller/login/compute never gets past the config's schema or InstanceGroup's type; the
# rule guards the parameters file the node reads (test_node_checks_group_roles_in_its_parameters_file).
ROWS = [r for r in ROWS if r.rule != "GRP-ROLE"]
NODE_ONLY = {"GRP-ROLE"}


UPDATE_POLICY_RULES = set(GENERIC_RULES)
"""They judge the fields of the AWS inventory's update-policy rows: tests/test_update_policy.py runs each on made-up
rows, tests/test_aws_inventory.py each row's own breaks and passes."""


def test_every_registered_rule_has_a_row() -> None:
    # The rules that need the AWS account are tested against moto in tests/test_preflight_rules.py.
    registered = {r.id for r in all_rules() if "aws" not in r.needs} - UPDATE_POLICY_RULES
    covered = {r.rule for r in ROWS} | NODE_ONLY
    assert registered - covered == set(), "add a row to ROWS for each new rule"
    assert covered - registered == set()


def _write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("case", ROWS, ids=[r.rule for r in ROWS])
def test_validate_names_the_rule_field_and_words(case: Row, tmp_path: Path) -> None:
    previous = _write(tmp_path, "old.yaml", case.previous) if case.has_previous else None
    _, found = validate_file(_write(tmp_path, "c.yaml", case.config), case.region, previous)
    mine = [p for p in found if p.rule == case.rule]
    assert mine, f"{case.rule} found nothing; got {[str(p) for p in found]}"
    assert any(p.path == case.path and case.words in str(p) for p in mine), [str(p) for p in mine]
    level = next(r.level for r in all_rules() if r.id == case.rule)
    assert all(p.level == level for p in mine)
    # The smallest breaking config breaks only this rule (so each row tests what it names); infos are advice that
    # the rows' own accept_unconfirmed (CL-ACCEPT-UNCONFIRMED-FORM) adds.
    assert {p.rule for p in found if p.level != "info" or p.rule == case.rule} == {case.rule} | case.also, [
        str(p) for p in found
    ]


@pytest.mark.parametrize("case", [r for r in ROWS if not r.has_previous], ids=lambda r: r.rule)
def test_synth_gives_the_same_verdict(case: Row) -> None:
    config = parse_model(case.config)
    level = next(r.level for r in all_rules() if r.id == case.rule)
    env = cdk.Environment(region=case.region) if case.region else None
    app = fast_app()
    if level == "error":
        with pytest.raises(ConfigurationError) as error:
            TrainingClusterStack(app, "s", config=config, env=env)
        assert any(getattr(p, "rule", "") == case.rule for p in error.value.problems)
        return
    stack = TrainingClusterStack(app, "s", config=config, env=env)
    annotations = cdk.assertions.Annotations.from_stack(stack)
    find = annotations.find_info if level == "info" else annotations.find_warning
    warnings = find("*", cdk.assertions.Match.string_like_regexp(".*"))
    assert any(case.rule in json.dumps(w.entry.data) or case.words in str(w.entry.data) for w in warnings), warnings


def test_the_base_configs_of_the_rows_are_valid() -> None:
    for config in ({}, groups(CPU_WORKERS), groups(TRN_WORKERS), groups(P4D_WORKERS), {"network": EXISTING_NET}):
        parse_config(config)


def test_validate_exit_codes_and_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path, "good.yaml", {})
    risky = _write(tmp_path, "risky.yaml", {"storage": {"removal_policy": "destroy"}})
    bad = _write(tmp_path, "bad.yaml", {"cluster_name": "-bad-"})
    assert validate_command(str(good)) == 0
    assert validate_command(str(risky)) == 0
    assert "warning: storage.removal_policy" in capsys.readouterr().err
    assert validate_command(str(risky), strict=True) == 1
    assert validate_command(str(bad)) == 1
    assert "error: cluster_name: got '-bad-'" in capsys.readouterr().err
    assert validate_command(str(bad), as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert report["problems"][0]["rule"] == "CL-NAME" and report["problems"][0]["path"] == "cluster_name"


def test_node_checks_group_roles_in_its_parameters_file() -> None:
    from training_runtime.group_rules import group_problems
    from training_runtime.groups import GroupSpec

    found = group_problems(
        [GroupSpec("c", "controller", "ml.m5.xlarge"), GroupSpec("w", "boss", "ml.c5.xlarge")], "groups"
    )
    assert [(p.rule, p.path) for p in found] == [("GRP-ROLE", "groups[1].role"), ("GRP-COMPUTE", "groups")]


def test_constructs_run_the_same_rules_on_their_props() -> None:
    """Embedding a construct gives the same rule ids, with the props' own names as paths."""
    from hyperpod_cdk import ClusterNetwork, HyperPodCluster, InstanceGroup, LifecycleScripts, LustreStorage, NodeRole

    stack = cdk.Stack(fast_app(), "s", env=cdk.Environment(region="eu-west-1"))
    network = ClusterNetwork(stack, "Network")

    def rules_of(build: Any) -> list[tuple[str, str]]:
        with pytest.raises(ConfigurationError) as error:
            build()
        return [(p.rule, p.path) for p in error.value.problems]  # type: ignore[attr-defined]

    assert rules_of(lambda: LustreStorage(stack, "Fs", network=network, storage_capacity_gib=1000)) == [
        ("FSX-CAPACITY", "storage_capacity_gib")
    ]
    assert rules_of(lambda: LifecycleScripts(stack, "Lc", prefix="")) == [("LC-PREFIX", "prefix")]
    lifecycle = LifecycleScripts(stack, "Scripts")
    groups = [
        InstanceGroup(name="c", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1),
        InstanceGroup(name="w", instance_type="ml.p5en.48xlarge", count=1),  # not offered in eu-west-1
    ]
    assert rules_of(
        lambda: HyperPodCluster(
            stack,
            "Cluster",
            cluster_name="ok",
            network=network,
            lifecycle=lifecycle,
            instance_groups=groups,
            runtime_options={"slurm": {"cred_expire": 5}},
        )
    ) == [
        ("GRP-INSTANCE-TYPE", "instance_groups[1].instance_type"),
        ("RT-SLURM-CRED-EXPIRE", "runtime_options.slurm.cred_expire"),
    ]


def test_constructs_skip_cdk_tokens() -> None:
    """A prop that is a CDK token (a parameter, an attribute) is judged by CloudFormation, not by the rules."""
    from aws_cdk import aws_s3 as s3

    from hyperpod_cdk import (
        ClusterNetwork,
        HyperPodCluster,
        InstanceGroup,
        LifecycleScripts,
        LustreStorage,
        NodeRole,
        S3DataRepository,
    )

    stack = cdk.Stack(fast_app(), "s")

    def parameter(name: str) -> str:
        return cdk.CfnParameter(stack, name).value_as_string

    network = ClusterNetwork(stack, "Network")
    bucket = s3.Bucket.from_bucket_name(stack, "Data", parameter("Bucket"))
    repository = S3DataRepository(name="d", bucket=bucket, file_system_path=parameter("Path"))
    LustreStorage(stack, "Fs", network=network, data_repositories=[repository])
    lifecycle = LifecycleScripts(stack, "Lc", prefix=parameter("Prefix"))
    groups = [
        InstanceGroup(name="c", role=NodeRole.CONTROLLER, instance_type=parameter("ControllerType"), count=1),
        InstanceGroup(name="w", instance_type="ml.c5.xlarge", count=1),
    ]
    HyperPodCluster(
        stack, "Cluster", cluster_name=parameter("Name"), network=network, lifecycle=lifecycle, instance_groups=groups
    )
    with pytest.raises(ConfigurationError, match="CL-NAME"):
        HyperPodCluster(
            stack, "Bad", cluster_name="-bad-", network=network, lifecycle=lifecycle, instance_groups=groups
        )


def test_persistent_1_has_no_default_throughput(tmp_path: Path) -> None:
    """Only PERSISTENT_2 has a default tier (250); PERSISTENT_1's tiers are 50, 100 and 200."""
    _, found = validate_file(_write(tmp_path, "c.yaml", {"storage": {"deployment_type": "PERSISTENT_1"}}))
    assert [(p.rule, p.path) for p in found] == [("FSX-THROUGHPUT", "storage.throughput_mb_per_tib")]
    assert "one of 50, 100, 200" in found[0]


@pytest.mark.parametrize(
    "example", sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.yaml")), ids=lambda p: p.name
)
def test_the_examples_pass_validate_strict(example: Path) -> None:
    """The examples are what users copy: no error and no warning."""
    assert validate_command(str(example), strict=True) == 0


def test_errors_name_their_rule_where_synth_prints_them() -> None:
    """`cdk synth` prints ConfigurationError: each problem ends with its rule id, the key into docs/rules.md."""
    with pytest.raises(ConfigurationError) as error:
        parse_config({"cluster_name": "-bad-"})
    assert str(error.value).splitlines()[-1].endswith(" [CL-NAME]")
