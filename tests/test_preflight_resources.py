"""Preflight rules on what the stack adopts or uses (keys, the accounting secret, AMIs, the boundary, the workspace,
file systems, buckets) against moto: an account that breaks each, and one that passes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ops_support import ACCOUNT, REGION, aws_env, moto_url  # noqa: F401
from preflight_support import (  # noqa: F401
    AZ,
    OTHER_AZ,
    AccountFakes,
    MotoAccount,
    acct_fixture,
    check,
    config,
    fakes_fixture,
    moto_extras,
    only,
)

pytestmark = pytest.mark.usefixtures("aws_env")


# --- AWS-KMS ------------------------------------------------------------------------------------------------------
NO_ROOT_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/admin"},
            "Action": "kms:*",
            "Resource": "*",
        }
    ],
}


def with_key(acct: MotoAccount, key: str) -> dict[str, Any]:
    return config(acct, organization={"kms_key_arn": key})


def test_kms_key_good(acct: MotoAccount, fakes: AccountFakes) -> None:
    assert check("AWS-KMS", with_key(acct, acct.key()), fakes)[0] == []


def test_kms_key_policy_without_the_account(acct: MotoAccount, fakes: AccountFakes) -> None:
    key = acct.key(policy=NO_ROOT_POLICY)
    problem = only(check("AWS-KMS", with_key(acct, key), fakes)[0])
    assert problem.path == "organization.kms_key_arn" and problem.got == key
    assert f"does not let IAM policies in account {ACCOUNT} grant the key" in problem.expected
    statement = problem.fix.removeprefix("add the statement ").removesuffix(" to the key policy")
    assert json.loads(statement)["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}


def test_kms_key_disabled_or_missing(acct: MotoAccount, fakes: AccountFakes) -> None:
    problem = only(check("AWS-KMS", with_key(acct, acct.key(enabled=False)), fakes)[0])
    assert "the key is Disabled" in problem.expected
    missing = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
    data = config(acct)
    data["instance_groups"][1]["volume_kms_key_arn"] = missing
    problem = only(check("AWS-KMS", data, fakes)[0])
    assert problem.path == "instance_groups[1].volume_kms_key_arn" and "no such KMS key" in problem.expected


# --- AWS-SECRET, AWS-SECRET-KEYS ----------------------------------------------------------------------------------
def with_secret(acct: MotoAccount, arn: str, continuous: bool = True) -> dict[str, Any]:
    accounting = {"enabled": True, "database": "external", "host": "acct.example.com", "password_secret_arn": arn}
    extra = {"node_provisioning_mode": "continuous"} if continuous else {}
    return config(acct, runtime={"accounting": accounting}, **extra)


def secret(acct: MotoAccount, value: str) -> str:
    return str(acct.secrets.create_secret(Name="slurm-db", SecretString=value)["ARN"])


def test_secret_missing_or_deleted(acct: MotoAccount, fakes: AccountFakes) -> None:
    missing = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:slurm-db-AbCdEf"
    problem = only(check("AWS-SECRET", with_secret(acct, missing), fakes)[0])
    assert problem.path == "runtime.accounting.password_secret_arn" and "no such secret" in problem.expected
    arn = secret(acct, '{"username": "slurm", "password": "x"}')
    assert check("AWS-SECRET", with_secret(acct, arn), fakes)[0] == []
    acct.secrets.delete_secret(SecretId=arn, RecoveryWindowInDays=7)
    assert "scheduled for deletion" in only(check("AWS-SECRET", with_secret(acct, arn), fakes)[0]).expected


def test_secret_keys_for_hyperpod(acct: MotoAccount, fakes: AccountFakes) -> None:
    arn = secret(acct, '{"password": "x"}')
    problem = only(check("AWS-SECRET-KEYS", with_secret(acct, arn), fakes)[0])
    assert problem.level == "warning" and "has no username key" in problem.expected
    assert problem.got == "password"  # the keys, never the value
    good = acct.secrets.create_secret(Name="good", SecretString='{"username": "u", "password": "p"}')["ARN"]
    assert check("AWS-SECRET-KEYS", with_secret(acct, good), fakes)[0] == []


def test_secret_keys_for_the_runtime(acct: MotoAccount, fakes: AccountFakes) -> None:
    arn = secret(acct, '{"user": "slurm", "pass": "x"}')
    problem = only(check("AWS-SECRET-KEYS", with_secret(acct, arn, continuous=False), fakes)[0])
    assert problem.level == "error" and "no password key" in problem.expected
    plain = acct.secrets.create_secret(Name="plain", SecretString="just-the-password")["ARN"]
    assert check("AWS-SECRET-KEYS", with_secret(acct, plain, continuous=False), fakes)[0] == []


# --- AWS-AMI ------------------------------------------------------------------------------------------------------
def with_image(acct: MotoAccount, image_id: str) -> dict[str, Any]:
    data = config(acct)
    data["instance_groups"][1]["image_id"] = image_id
    return data


def test_ami_good_missing_encrypted(acct: MotoAccount, fakes: AccountFakes) -> None:
    assert check("AWS-AMI", with_image(acct, acct.image()), fakes)[0] == []
    problem = only(check("AWS-AMI", with_image(acct, "ami-0123456789abcdef0"), fakes)[0])
    assert problem.path == "instance_groups[1].image_id" and "no such AMI visible in us-west-2" in problem.expected
    assert "copy the AMI to us-west-2" in problem.fix
    problem = only(check("AWS-AMI", with_image(acct, acct.image(encrypted=True)), fakes)[0])
    assert "snapshots are encrypted" in problem.expected


def test_ami_with_more_than_its_primary_volume(
    acct: MotoAccount, fakes: AccountFakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "Only the primary AMI snapshot volume is supported; additional AMI volumes are not supported." """
    from hyperpod_cdk.preflight import lookups

    image_id = acct.image()
    found = lookups.image
    volume = {"DeviceName": "/dev/sdb", "Ebs": {"SnapshotId": "snap-0123456789abcdef0", "Encrypted": False}}

    def with_data_volume(account: Any, wanted: str) -> Any:
        image = found(account, wanted)
        return {**image, "BlockDeviceMappings": [*image.get("BlockDeviceMappings", []), volume]}

    monkeypatch.setattr(lookups, "image", with_data_volume)
    problem = only(check("AWS-AMI", with_image(acct, image_id), fakes)[0])
    assert "only the primary AMI snapshot volume" in problem.expected and "/dev/sdb" in problem.expected


def test_ami_of_another_account(acct: MotoAccount, fakes: AccountFakes) -> None:
    public = "ami-12c6146b"  # one of moto's public AMIs (owner: Amazon)
    problem = only(check("AWS-AMI", with_image(acct, public), fakes)[0])
    assert "belongs to account" in problem.expected and "copy the AMI into this account" in problem.fix


# --- AWS-BOUNDARY, AWS-WORKSPACE ----------------------------------------------------------------------------------
def test_boundary(acct: MotoAccount, fakes: AccountFakes) -> None:
    missing = f"arn:aws:iam::{ACCOUNT}:policy/boundary"
    problem = only(check("AWS-BOUNDARY", config(acct, organization={"permission_boundary_arn": missing}), fakes)[0])
    assert problem.path == "organization.permission_boundary_arn" and "no such managed policy" in problem.expected
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    arn = acct.iam.create_policy(PolicyName="boundary", PolicyDocument=json.dumps(document))["Policy"]["Arn"]
    assert check("AWS-BOUNDARY", config(acct, organization={"permission_boundary_arn": arn}), fakes)[0] == []


def test_workspace(acct: MotoAccount, fakes: AccountFakes) -> None:
    missing = f"arn:aws:aps:{REGION}:{ACCOUNT}:workspace/ws-00000000-0000-0000-0000-000000000000"
    problem = only(check("AWS-WORKSPACE", config(acct, observability={"workspace_arn": missing}), fakes)[0])
    assert problem.path == "observability.workspace_arn" and "no such workspace" in problem.expected
    arn = acct.amp.create_workspace(alias="metrics")["arn"]
    assert check("AWS-WORKSPACE", config(acct, observability={"workspace_arn": arn}), fakes)[0] == []


# --- AWS-FSX-LUSTRE, AWS-FSX-OPENZFS ------------------------------------------------------------------------------
def with_lustre(acct: MotoAccount, fs_id: str, **existing: str) -> dict[str, Any]:
    adopted = {"file_system_id": fs_id, "mount_name": "abcdef", "security_group_id": acct.sg, **existing}
    return config(acct, storage={"existing": adopted})


def lustre(acct: MotoAccount, subnet: str | None = None, sg: str | None = None) -> str:
    return acct.file_system("LUSTRE", sg or acct.sg, subnet, LustreConfiguration={"MountName": "abcdef"})


def test_lustre_good(acct: MotoAccount, fakes: AccountFakes) -> None:
    assert check("AWS-FSX-LUSTRE", with_lustre(acct, lustre(acct)), fakes)[0] == []


def test_lustre_mount_name_and_security_group(acct: MotoAccount, fakes: AccountFakes) -> None:
    fs_id = lustre(acct, sg=acct.security_group("fsx", self_referencing=True))
    problems = check("AWS-FSX-LUSTRE", with_lustre(acct, fs_id, mount_name="wrong"), fakes)[0]
    assert [p.path for p in problems] == ["storage.existing.mount_name", "storage.existing.security_group_id"]
    assert problems[0].fix == "set it to 'abcdef'"
    assert "not a security group of the file system" in problems[1].expected


def test_lustre_in_another_az_missing_or_not_lustre(acct: MotoAccount, fakes: AccountFakes) -> None:
    problem = only(check("AWS-FSX-LUSTRE", with_lustre(acct, lustre(acct, subnet=acct.other_subnet)), fakes)[0])
    assert problem.level == "warning" and f"the file system is in {OTHER_AZ}, the nodes in {AZ}" in problem.expected
    problem = only(check("AWS-FSX-LUSTRE", with_lustre(acct, "fs-0123456789abcdef0"), fakes)[0])
    assert problem.path == "storage.existing.file_system_id" and "no such file system" in problem.expected
    zfs = acct.file_system("OPENZFS", acct.sg)
    assert "is OPENZFS, not LUSTRE" in only(check("AWS-FSX-LUSTRE", with_lustre(acct, zfs), fakes)[0]).expected


def test_openzfs(acct: MotoAccount, fakes: AccountFakes) -> None:
    fs_id = acct.file_system("OPENZFS", acct.sg, OpenZFSConfiguration={"DeploymentType": "SINGLE_AZ_1"})
    dns = f"{fs_id}.fsx.{REGION}.amazonaws.com"
    good = {"file_system_id": fs_id, "dns_name": dns, "security_group_id": acct.sg}
    assert check("AWS-FSX-OPENZFS", config(acct, storage_openzfs={"existing": good}), fakes)[0] == []
    wrong = {**good, "dns_name": "fs-0.fsx.us-west-2.amazonaws.com"}
    problem = only(check("AWS-FSX-OPENZFS", config(acct, storage_openzfs={"existing": wrong}), fakes)[0])
    assert problem.path == "storage_openzfs.existing.dns_name" and problem.fix == f"set it to {dns!r}"


def test_standby_subnet(acct: MotoAccount, fakes: AccountFakes) -> None:
    def multi_az(standby: str) -> dict[str, Any]:
        zfs = {"deployment_type": "MULTI_AZ_1", "standby_subnet_id": standby, "client_cidrs": ["10.0.0.0/16"]}
        return config(acct, storage_openzfs=zfs)

    assert check("AWS-STANDBY-SUBNET", multi_az(acct.other_subnet), fakes)[0] == []
    problem = only(check("AWS-STANDBY-SUBNET", multi_az(acct.make_subnet("10.0.48.0/24", AZ)), fakes)[0])
    assert problem.path == "storage_openzfs.standby_subnet_id" and f"in the nodes' AZ {AZ}" in problem.expected
    assert (
        "no such subnet" in only(check("AWS-STANDBY-SUBNET", multi_az("subnet-0123456789abcdef0"), fakes)[0]).expected
    )


# --- AWS-BUCKET ---------------------------------------------------------------------------------------------------
def with_buckets(
    acct: MotoAccount, lifecycle: str | None = None, data: str | None = None, logs: str | None = None
) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if lifecycle:
        extra["lifecycle"] = {"bucket_name": lifecycle}
    if data:
        repository = {"name": "datasets", "file_system_path": "/datasets", "bucket_name": data}
        extra["storage"] = {"data_repositories": [repository]}
    if logs:
        extra["organization"] = {"access_logs_bucket": logs}
    return config(acct, **extra)


DENY_ALL_READS = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "Lockdown",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::b/*",
        }
    ],
}
TLS_ONLY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "TlsOnly",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": "arn:aws:s3:::b/*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ],
}


def test_buckets_good(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = with_buckets(
        acct,
        lifecycle=acct.bucket("sagemaker-scripts", policy=TLS_ONLY),
        data=acct.bucket("datasets"),
        logs=acct.bucket("logs"),
    )
    assert check("AWS-BUCKET", data, fakes)[0] == []


def test_bucket_missing_and_in_another_region(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = with_buckets(acct, lifecycle="no-such-bucket-here", data=acct.bucket("far-data", region="eu-west-1"))
    problems = check("AWS-BUCKET", data, fakes)[0]
    assert [(p.path, p.level) for p in problems] == [
        ("lifecycle.bucket_name", "error"),
        ("storage.data_repositories[0].bucket_name", "error"),
    ]
    assert problems[0].expected == "no such bucket"
    assert "the bucket is in eu-west-1, the cluster in us-west-2" in problems[1].expected


def test_lifecycle_bucket_in_another_region_is_a_warning(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = with_buckets(acct, lifecycle=acct.bucket("sagemaker-far", region="eu-west-1"))
    problem = only(check("AWS-BUCKET", data, fakes)[0])
    assert problem.level == "warning" and "the nodes read their scripts across Regions" in problem.expected


def test_bucket_policy_denies_reads(acct: MotoAccount, fakes: AccountFakes) -> None:
    data = with_buckets(acct, lifecycle=acct.bucket("sagemaker-locked", policy=DENY_ALL_READS))
    problem = only(check("AWS-BUCKET", data, fakes)[0])
    assert problem.level == "error" and "denies reads to every principal (statement 'Lockdown')" in problem.expected
    org_only = json.loads(json.dumps(DENY_ALL_READS))
    org_only["Statement"][0]["Condition"] = {"StringNotEquals": {"aws:PrincipalOrgID": "o-abc"}}
    data = with_buckets(acct, lifecycle=acct.bucket("sagemaker-org", policy=org_only))
    problem = only(check("AWS-BUCKET", data, fakes)[0])
    assert problem.level == "warning" and "denies reads unless aws:PrincipalOrgID" in problem.expected


def test_bucket_key_denies_the_account(acct: MotoAccount, fakes: AccountFakes) -> None:
    key = acct.key(policy=NO_ROOT_POLICY)
    data = with_buckets(acct, data=acct.bucket("sealed", key=key))
    problem = only(check("AWS-BUCKET", data, fakes)[0])
    assert (
        problem.path == "storage.data_repositories[0].bucket_name" and "the key policy does not let" in problem.expected
    )
